"""Dataset manifests: the files a manifest lists, and which of them do not exist yet.

A route with ``completion: manifest`` treats the arrival of its manifest as "the dataset is
complete", but only once every file it lists exists. Two formats, told apart by the first
non-blank character (docs/messages.md):

- JSON: ``{"files": ["part-00000.tfrecord", "gs://other-bucket/extra.tfrecord"]}``
- text: one entry per line; blank lines and lines starting with ``#`` are skipped (so the output
  of ``gcloud storage ls`` is a valid manifest).

An entry is a ``gs://`` URI, or a name relative to the manifest's directory. Pure: the caller
reads the manifest and passes an ``exists`` callable backed by its Cloud Storage adapter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

from shared.model.errors import PermanentError


class InvalidManifest(PermanentError):
    """A manifest cannot be read as a list of the dataset's files."""

    headline = "the dataset's manifest is invalid"


MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # read at most this much of a manifest object
MAX_MANIFEST_FILES = 10_000  # each is one existence check before the job starts
MAX_OBJECT_NAME_BYTES = 1024  # Cloud Storage's limit

_BUCKET = r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]"
_GS_URI = re.compile(rf"gs://(?P<bucket>{_BUCKET})/(?P<name>.+)", re.DOTALL)
_GS_DIRECTORY = re.compile(rf"gs://{_BUCKET}/(?:.*/)?", re.DOTALL)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_COMMENT = "#"


def parse_manifest(text: str | bytes, base_uri: str) -> list[str]:
    """The ``gs://`` URIs a manifest lists, in order and without duplicates.

    ``base_uri`` is the manifest's directory (``gs://bucket/dir/``); relative entries resolve
    against it. Raises ``InvalidManifest`` naming the entry and the rule it breaks.
    """
    if _GS_DIRECTORY.fullmatch(base_uri) is None:
        raise ValueError(f"base_uri {base_uri!r} must be a gs:// directory ending in '/'")
    where = f"manifest in {base_uri}"
    entries = _entries(_as_text(text, where), where)
    if not entries:
        raise InvalidManifest(f"{where} lists no files; list the dataset's files, one per line")
    if len(entries) > MAX_MANIFEST_FILES:
        raise InvalidManifest(
            f"{where} lists {len(entries)} files, over the limit of {MAX_MANIFEST_FILES}; "
            "shard the dataset into fewer, larger files"
        )
    resolved = (_resolved(entry, base_uri, f"{where}, {label}") for label, entry in entries)
    return list(dict.fromkeys(resolved))


def missing_files(files: Iterable[str], exists: Callable[[str], bool]) -> list[str]:
    """The URIs among ``files`` for which ``exists(uri)`` is false, in order.

    Errors from ``exists`` (e.g. a ``TransientError`` from the storage adapter) propagate.
    """
    return [uri for uri in files if not exists(uri)]


def split_gs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/name`` → ``(bucket, name)``; ``ValueError`` for anything else."""
    found = _GS_URI.fullmatch(uri)
    if found is None:
        raise ValueError(f"{uri!r} is not a gs://BUCKET/OBJECT URI")
    return found["bucket"], found["name"]


def _as_text(text: str | bytes, where: str) -> str:
    if len(text) > MAX_MANIFEST_BYTES:
        raise InvalidManifest(
            f"{where} is over {MAX_MANIFEST_BYTES} bytes; list fewer, larger files"
        )
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidManifest(
            f"{where} is not UTF-8 (bad byte at offset {error.start}); write it as UTF-8"
        ) from None


def _entries(text: str, where: str) -> list[tuple[str, str]]:
    """(label for errors, entry) pairs, from either format."""
    if text.lstrip().startswith("{"):
        return _json_entries(text, where)
    lines = enumerate(text.splitlines(), start=1)
    return [
        (f"line {number}", line.strip())
        for number, line in lines
        if line.strip() and not line.strip().startswith(_COMMENT)
    ]


def _json_entries(text: str, where: str) -> list[tuple[str, str]]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise InvalidManifest(f"{where} starts with '{{' but is not JSON ({error})") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list) or not all(isinstance(entry, str) for entry in files):
        raise InvalidManifest(
            f'{where}: a JSON manifest must be {{"files": ["name or gs:// URI", ...]}}; '
            "fix the files key"
        )
    return [(f"files[{index}]", entry) for index, entry in enumerate(files)]


def _resolved(entry: str, base_uri: str, where: str) -> str:
    if _CONTROL_CHARACTER.search(entry):
        raise InvalidManifest(f"{where}: {entry!r} contains a control character; remove it")
    if entry.startswith("gs://"):
        uri = entry
    elif "://" in entry:
        raise InvalidManifest(f"{where}: {entry!r} is not in Cloud Storage; list gs:// URIs only")
    elif entry.startswith("/") or {".", ".."} & set(entry.split("/")):
        raise InvalidManifest(
            f"{where}: {entry!r} must be relative to the manifest's directory without '/', "
            "'.' or '..' at its start or in it; write it as a gs:// URI instead"
        )
    else:
        uri = base_uri + entry
    found = _GS_URI.fullmatch(uri)
    if found is None or len(found["name"].encode("utf-8")) > MAX_OBJECT_NAME_BYTES:
        raise InvalidManifest(
            f"{where}: {entry!r} is not a valid gs://BUCKET/OBJECT URI (lowercase bucket, "
            f"object name of 1-{MAX_OBJECT_NAME_BYTES} bytes); fix the entry"
        )
    return uri
