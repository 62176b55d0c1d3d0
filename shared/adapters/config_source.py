"""Where the configuration comes from: a local path or a ``gs://bucket/object`` URI, read and
validated once per process.

- ``load_config``: read the config at a path or URI and validate it (``shared.config.loader``);
- ``config_from_env``: the config named by ``VERTEX_DISPATCH_CONFIG``, loaded once per process;
- ``forget_config``: drop that cached config (tests).

Files a config refers to (``gcloud_config``, ``rest_body``) are read relative to the config
itself, on disk or in the same bucket. Objects are read through ``shared.adapters.storage``, whose
client is built on first use only (honouring ``STORAGE_EMULATOR_HOST``): a config on disk never
pays for it.
"""

from __future__ import annotations

import functools
import os
import posixpath
from pathlib import Path

from shared.config.loader import FileReader, parse_config
from shared.config.model import Config
from shared.model.errors import ConfigError

CONFIG_VARIABLE = "VERTEX_DISPATCH_CONFIG"
GCS_SCHEME = "gs://"


def config_from_env() -> Config:
    """The config named by ``VERTEX_DISPATCH_CONFIG``, read and validated once per process."""
    source = os.environ.get(CONFIG_VARIABLE, "").strip()
    if not source:
        raise ConfigError(
            f"{CONFIG_VARIABLE} is not set; set it to the config's path or "
            "gs://BUCKET/path/config.yaml in the function's environment"
        )
    return _load_once(source)


@functools.lru_cache(maxsize=4)
def _load_once(source: str) -> Config:
    # Keyed by source, so a test (or a redeploy) that points the variable elsewhere reloads.
    return load_config(source)


def forget_config() -> None:
    """Drop the config ``config_from_env`` cached, so the next call reads it again (tests)."""
    _load_once.cache_clear()


def load_config(source: str) -> Config:
    """Read and validate the config at a local path or ``gs://bucket/object``."""
    text = read_source(source)
    base_dir = None if is_gcs_uri(source) else Path(source).resolve().parent
    return parse_config(text, source, base_dir, read_file=reader_beside(source, base_dir))


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
            f"{CONFIG_VARIABLE} or --config"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"config file {source} cannot be read ({error}); make it a readable UTF-8 YAML file"
        ) from None


def read_gcs_text(uri: str) -> str:
    """An object's text. Missing or forbidden: ``ConfigError``; service trouble: transient."""
    from shared.adapters.storage import read_text
    from shared.decode.manifests import split_gs_uri

    try:
        split_gs_uri(uri)
    except ValueError:
        raise ConfigError(
            f"{uri} is not an object URI; write gs://BUCKET/path/to/config.yaml, the bucket "
            "named as Cloud Storage names buckets (lowercase letters, digits, -, _ and .)"
        ) from None
    return read_text(
        uri,
        unreadable=ConfigError,
        if_missing=f"upload the config there or fix {CONFIG_VARIABLE}",
    )


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
