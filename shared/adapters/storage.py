"""The Cloud Storage adapter: read an object (a manifest, a config), ask whether one exists,
list the objects under a prefix (a quiet dataset's directory, a manifest's files).

Errors leave as the project's error tree, translated in one place (``_translated_errors``): a
missing or unreadable object is permanent (a human must fix the bucket or the grant): a
``DatasetUnreadable`` by default, or the error class the caller names (a config that cannot be
read is a ``ConfigError``); service trouble is ``BackendUnavailable`` (transient: the event
retries).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.adapters.clients import storage_client
from shared.decode.manifests import split_gs_uri
from shared.model.errors import BackendUnavailable, DispatchError, PermanentError


class DatasetUnreadable(PermanentError):
    """A dataset object cannot be read: it does not exist, or the function may not read it."""

    headline = "the dataset cannot be read"


def read_object(uri: str, max_bytes: int, generation: int | None = None) -> bytes:
    """The first bytes of ``gs://bucket/name`` (of its ``generation`` when given: a manifest is
    read as the event that named it saw it, not as rewritten since); ``DatasetUnreadable`` when
    it is larger, or that generation no longer exists."""
    bucket, name = split_gs_uri(uri)
    where = uri if generation is None else f"{uri}#{generation}"
    with _translated_errors(where):
        blob = storage_client().bucket(bucket).blob(name, generation=generation)
        data = blob.download_as_bytes(end=max_bytes)
    if len(data) > max_bytes:
        raise DatasetUnreadable(
            f"{uri} is larger than {max_bytes} bytes; split the dataset or list fewer files"
        )
    return data


def read_text(uri: str, *, unreadable: type[DispatchError], if_missing: str) -> str:
    """The text of ``gs://bucket/name``; ``unreadable`` (saying ``if_missing`` when it does not
    exist) when it cannot be read."""
    bucket, name = split_gs_uri(uri)
    with _translated_errors(uri, unreadable, if_missing):
        text: str = storage_client().bucket(bucket).blob(name).download_as_text()
    return text


def object_exists(uri: str) -> bool:
    """True when ``gs://bucket/name`` exists now."""
    bucket, name = split_gs_uri(uri)
    with _translated_errors(uri):
        return storage_client().bucket(bucket).blob(name).exists()


LIST_PAGE_SIZE = 1000  # Cloud Storage's largest page
_LISTED_FIELDS = "items(name,generation,size,md5Hash,updated),nextPageToken"


@dataclass(frozen=True)
class StoredObject:
    """One object as a listing shows it."""

    name: str
    generation: int
    size: int
    md5_hash: str | None  # base64, as Cloud Storage gives it; None for composite objects
    updated: datetime  # when this generation was written (Cloud Storage's clock)


def list_objects(
    bucket: str, prefix: str, *, delimiter: str | None = None
) -> Iterator[StoredObject]:
    """Every object whose name starts with ``prefix`` (all depths; with ``delimiter="/"``, only
    those with no ``/`` after the prefix: one directory level), page by page (1,000 per call,
    only the fields above), in name order. A missing bucket is ``DatasetUnreadable``."""
    uri = f"gs://{bucket}/{prefix}"
    with _translated_errors(uri):
        blobs = storage_client().list_blobs(
            bucket,
            prefix=prefix,
            delimiter=delimiter,
            page_size=LIST_PAGE_SIZE,
            fields=_LISTED_FIELDS,
        )
        for blob in blobs:
            yield _stored(blob)


def stat_object(bucket: str, name: str) -> StoredObject | None:
    """The object ``gs://bucket/name`` as a listing would show it, or None when it does not
    exist (one metadata read)."""
    uri = f"gs://{bucket}/{name}"
    with _translated_errors(uri):
        blob = storage_client().bucket(bucket).get_blob(name)
    return None if blob is None else _stored(blob)


def _stored(blob: Any) -> StoredObject:
    """A ``google.cloud.storage.Blob`` as this adapter gives it out."""
    return StoredObject(
        name=blob.name,
        generation=int(blob.generation or 0),
        size=int(blob.size or 0),
        md5_hash=blob.md5_hash,
        updated=blob.updated,
    )


@contextmanager
def _translated_errors(
    uri: str, unreadable: type[DispatchError] = DatasetUnreadable, if_missing: str = ""
) -> Iterator[None]:
    from google.api_core import exceptions

    try:
        yield
    except exceptions.NotFound:
        fix = f"; {if_missing}" if if_missing else ""
        raise unreadable(f"{uri} does not exist{fix}") from None
    except exceptions.Forbidden as error:
        raise unreadable(
            f"{uri} cannot be read ({error.message}); grant the function's service account "
            "roles/storage.objectViewer on the bucket"
        ) from None
    except (exceptions.GoogleAPIError, OSError) as error:
        raise BackendUnavailable(f"Cloud Storage did not return {uri}: {error}") from error
