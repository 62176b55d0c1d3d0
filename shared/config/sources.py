"""Where configuration text comes from: a local path or a ``gs://bucket/object`` URI.

Files a config refers to (``gcloud_config``, ``rest_body``) are read relative to the config
itself, on disk or in the same bucket. The Cloud Storage client is imported on first use only
(``shared.adapters.clients``), honouring ``STORAGE_EMULATOR_HOST``: a config on disk never pays for
it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from shared.model.errors import BackendUnavailable, ConfigError

GCS_SCHEME = "gs://"

FileReader = Callable[[str], str]  # a reference as written in the config -> the file's text


def is_gcs_uri(source: str) -> bool:
    return source.startswith(GCS_SCHEME)


def read_source(source: str) -> str:
    """The text at ``source``; ``ConfigError`` when it does not exist or cannot be read."""
    if is_gcs_uri(source):
        return read_gcs_text(source)
    try:
        return Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file {source} does not exist; check the path given in "
            "VERTEX_DISPATCH_CONFIG or --config"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"config file {source} cannot be read ({error}); make it a readable UTF-8 YAML file"
        ) from None


def read_gcs_text(uri: str) -> str:
    """An object's text. Missing or forbidden: ``ConfigError``; service trouble: transient."""
    from google.api_core import exceptions

    from shared.adapters.clients import storage_client

    bucket, _, name = uri.removeprefix(GCS_SCHEME).partition("/")
    if not bucket or not name:
        raise ConfigError(f"{uri} is not an object URI; write gs://BUCKET/path/to/config.yaml")
    try:
        return storage_client().bucket(bucket).blob(name).download_as_text()
    except exceptions.NotFound:
        raise ConfigError(
            f"{uri} does not exist; upload the config there or fix VERTEX_DISPATCH_CONFIG"
        ) from None
    except exceptions.Forbidden as error:
        raise ConfigError(
            f"{uri} cannot be read ({error.message}); grant the function's service "
            "account roles/storage.objectViewer on the bucket"
        ) from None
    except (exceptions.GoogleAPIError, OSError) as error:
        raise BackendUnavailable(f"Cloud Storage did not return {uri}: {error}") from error


def reader_beside(source: str, base_dir: Path | None) -> FileReader:
    """Reads references relative to ``source``'s directory (``base_dir`` for local text)."""

    def read(reference: str) -> str:
        if is_gcs_uri(reference):
            return read_gcs_text(reference)
        if is_gcs_uri(source):
            directory = posixpath.dirname(source.removeprefix(GCS_SCHEME))
            return read_gcs_text(GCS_SCHEME + posixpath.normpath(f"{directory}/{reference}"))
        return ((base_dir or Path.cwd()) / reference).read_text(encoding="utf-8")

    return read
