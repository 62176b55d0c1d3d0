"""The Cloud Storage adapter for datasets: read a manifest, ask whether an object exists.

Errors leave as the project's error tree: a missing or unreadable object the caller can name is a
``DatasetUnreadable`` (permanent: a human must fix the bucket or the grant); service trouble is
``BackendUnavailable`` (transient: the event retries).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from shared.clients import storage_client
from shared.datasets import split_gs_uri
from shared.errors import BackendUnavailable, PermanentError


class DatasetUnreadable(PermanentError):
    """A dataset object cannot be read: it does not exist, or the function may not read it."""

    headline = "the dataset cannot be read"


def read_object(uri: str, max_bytes: int) -> bytes:
    """The first bytes of ``gs://bucket/name``; ``DatasetUnreadable`` when it is larger."""
    bucket, name = split_gs_uri(uri)
    with _translated_errors(uri):
        data = storage_client().bucket(bucket).blob(name).download_as_bytes(end=max_bytes)
    if len(data) > max_bytes:
        raise DatasetUnreadable(
            f"{uri} is larger than {max_bytes} bytes; split the dataset or list fewer files"
        )
    return data


def object_exists(uri: str) -> bool:
    """True when ``gs://bucket/name`` exists now."""
    bucket, name = split_gs_uri(uri)
    with _translated_errors(uri):
        return storage_client().bucket(bucket).blob(name).exists()


@contextmanager
def _translated_errors(uri: str) -> Iterator[None]:
    from google.api_core import exceptions

    try:
        yield
    except exceptions.NotFound:
        raise DatasetUnreadable(f"{uri} does not exist") from None
    except exceptions.Forbidden as error:
        raise DatasetUnreadable(
            f"{uri} cannot be read ({error.message}); grant the function's service account "
            "roles/storage.objectViewer on the bucket"
        ) from None
    except (exceptions.GoogleAPIError, OSError) as error:
        raise BackendUnavailable(f"Cloud Storage did not answer for {uri}: {error}") from error
