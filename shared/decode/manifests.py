"""Dataset manifests: the files a manifest lists (each maybe pinned), and which are not complete.

A route with ``completion: manifest`` treats the arrival of its manifest as "the dataset is
complete", but only once every file it lists exists, as pinned. Two formats, told apart by the
first non-blank character (``{`` or ``[``: JSON), or by the manifest's name (``*.json`` must be
JSON); docs/messages.md is the contract:

- JSON: ``{"files": ["part-00000.tfrecord", {"path": "part-00001.tfrecord", "generation": 17,
  "size": 1024, "md5": "base64 or hex"}]}``: an entry is a string, or an object that pins the
  file's generation, size or MD5 (a file that differs from a pin is not complete);
- text: one entry per line; blank lines and lines starting with ``#`` are skipped (so the output
  of ``gcloud storage ls`` is a valid manifest).

An entry is a ``gs://`` URI in the manifest's own bucket, or a name relative to the manifest's
directory. Pure: the caller reads the manifest and lists Cloud Storage (``listing_prefixes`` says
which listings show the files in few calls), then ``missing_files`` compares.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from shared.model.errors import PermanentError


class InvalidManifest(PermanentError):
    """A manifest cannot be read as a list of the dataset's files."""

    headline = "the dataset's manifest is invalid"


MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # read at most this much of a manifest object
MAX_MANIFEST_FILES = 10_000  # each is checked (by listing) on every check of the manifest
MAX_OBJECT_NAME_BYTES = 1024  # Cloud Storage's limit
PIN_KEYS = ("generation", "size", "md5")
"""What a JSON entry may pin, besides its ``path``."""

_BUCKET = r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]"
_GS_URI = re.compile(rf"gs://(?P<bucket>{_BUCKET})/(?P<name>.+)", re.DOTALL)
_GS_DIRECTORY = re.compile(rf"gs://(?P<bucket>{_BUCKET})/(?:.*/)?", re.DOTALL)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MD5_BASE64 = re.compile(r"[A-Za-z0-9+/]{22}==")
_MD5_HEX = re.compile(r"[0-9a-fA-F]{32}")
_DECIMAL = re.compile(r"[0-9]{1,19}")
_COMMENT = "#"


@dataclass(frozen=True)
class ManifestFile:
    """One file a manifest lists, and what it pins of it (None: not pinned)."""

    uri: str
    generation: int | None = None
    size: int | None = None
    md5: str | None = None  # base64, as Cloud Storage shows it


class StoredFacts(Protocol):
    """What a listing says of an object (``adapters.storage.StoredObject`` has these)."""

    @property
    def generation(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def md5_hash(self) -> str | None: ...


def parse_manifest(
    text: str | bytes, base_uri: str, *, is_json: bool = False
) -> list[ManifestFile]:
    """The files a manifest lists, in order and without duplicates.

    ``base_uri`` is the manifest's directory (``gs://bucket/dir/``); relative entries resolve
    against it, and every file must be in its bucket. ``is_json``: the manifest must be JSON
    (its name ends in ``.json``) whatever its first character. Raises ``InvalidManifest``
    naming the entry and the rule it breaks.
    """
    directory = _GS_DIRECTORY.fullmatch(base_uri)
    if directory is None:
        raise ValueError(f"base_uri {base_uri!r} must be a gs:// directory ending in '/'")
    where = f"manifest in {base_uri}"
    entries = _entries(_as_text(text, where), where, is_json)
    if not entries:
        raise InvalidManifest(f"{where} lists no files; list the dataset's files, one per line")
    if len(entries) > MAX_MANIFEST_FILES:
        raise InvalidManifest(
            f"{where} lists {len(entries)} files, over the limit of {MAX_MANIFEST_FILES}; "
            "shard the dataset into fewer, larger files"
        )
    files: dict[str, ManifestFile] = {}
    for label, entry in entries:
        here = f"{where}, {label}"
        listed = _file(entry, base_uri, directory["bucket"], here)
        earlier = files.setdefault(listed.uri, listed)
        if earlier != listed:
            raise InvalidManifest(
                f"{here}: {listed.uri} is listed twice with different pins; list it once"
            )
    return list(files.values())


@dataclass(frozen=True)
class Listing:
    """One listing of the manifest's bucket, one directory level (delimiter ``/``): the names
    starting with ``prefix``, which show the manifest's files ``names`` (full object names)."""

    prefix: str
    names: tuple[str, ...]

    @property
    def max_shown(self) -> int:
        """The most objects this listing may page through before it costs more than asking for
        its files one by one: the pages its files fill, plus one. A directory holding far more
        than the manifest lists is then read file by file (``names``), never listed whole."""
        pages = -(-len(self.names) // LIST_PAGE_OBJECTS)
        return (pages + 1) * LIST_PAGE_OBJECTS


LIST_PAGE_OBJECTS = 1000  # Cloud Storage's largest page: what one list call shows


def listing_plan(files: Iterable[ManifestFile]) -> list[Listing]:
    """The listings that show every file of ``files`` in few calls: one per directory, of the
    directory plus the longest prefix its files' names share (so it shows little beside them),
    one level deep. A listing costs one call per 1,000 objects shown, and is cut short at
    ``Listing.max_shown`` (the caller then reads its files one by one): a check never costs
    more than about twice the calls its files need, however full their directories are."""
    by_directory: dict[str, list[str]] = {}
    for listed in files:
        _, name = split_gs_uri(listed.uri)
        directory, basename = posixpath.split(name)
        by_directory.setdefault(directory, []).append(basename)
    return [
        Listing(
            (f"{directory}/" if directory else "") + posixpath.commonprefix(basenames),
            tuple(f"{directory}/{b}" if directory else b for b in basenames),
        )
        for directory, basenames in sorted(by_directory.items())
    ]


def missing_files(files: Iterable[ManifestFile], found: Mapping[str, StoredFacts]) -> list[str]:
    """What is not complete among ``files``, in order: the URI of a file ``found`` (by URI)
    lacks, or the URI and which pin differs, e.g. ``gs://b/x (md5 is A, pinned B)``."""
    missing: list[str] = []
    for listed in files:
        stored = found.get(listed.uri)
        if stored is None:
            missing.append(listed.uri)
            continue
        differs = _differing_pins(listed, stored)
        if differs:
            missing.append(f"{listed.uri} ({'; '.join(differs)})")
    return missing


def split_gs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/name`` → ``(bucket, name)``; ``ValueError`` for anything else."""
    found = _GS_URI.fullmatch(uri)
    if found is None:
        raise ValueError(f"{uri!r} is not a gs://BUCKET/OBJECT URI")
    return found["bucket"], found["name"]


def _differing_pins(listed: ManifestFile, stored: StoredFacts) -> list[str]:
    differs = []
    if listed.generation is not None and stored.generation != listed.generation:
        differs.append(f"generation is {stored.generation}, pinned {listed.generation}")
    if listed.size is not None and stored.size != listed.size:
        differs.append(f"size is {stored.size}, pinned {listed.size}")
    if listed.md5 is not None and stored.md5_hash != listed.md5:
        shown = stored.md5_hash or "absent (a composite object has no MD5)"
        differs.append(f"md5 is {shown}, pinned {listed.md5}")
    return differs


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


def _entries(text: str, where: str, is_json: bool) -> list[tuple[str, str | Any]]:
    """(label for errors, entry) pairs, from either format."""
    if is_json or text.lstrip().startswith(("{", "[")):
        return _json_entries(text, where)
    lines = enumerate(text.splitlines(), start=1)
    return [
        (f"line {number}", line.strip())
        for number, line in lines
        if line.strip() and not line.strip().startswith(_COMMENT)
    ]


def _json_entries(text: str, where: str) -> list[tuple[str, str | Any]]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise InvalidManifest(f"{where} is not valid JSON ({error}); fix its syntax") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list):
        raise InvalidManifest(
            f'{where}: a JSON manifest must be {{"files": ["name or gs:// URI", ...]}}; '
            "fix the files key"
        )
    return [(f"files[{index}]", entry) for index, entry in enumerate(files)]


def _file(entry: object, base_uri: str, bucket: str, where: str) -> ManifestFile:
    if isinstance(entry, str):
        return ManifestFile(_resolved(entry, base_uri, bucket, where))
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        raise InvalidManifest(
            f'{where}: an entry must be a name or {{"path": "name", "generation": N, "size": N, '
            f'"md5": "base64"}} (pins optional); fix the files key'
        )
    unknown = sorted(set(entry) - {"path", *PIN_KEYS})
    if unknown:
        raise InvalidManifest(
            f"{where}: unknown key {unknown[0]!r}; an entry has path and optionally "
            f"{', '.join(PIN_KEYS)}"
        )
    return ManifestFile(
        uri=_resolved(entry["path"], base_uri, bucket, where),
        generation=_count(entry, "generation", where, least=1),
        size=_count(entry, "size", where, least=0),
        md5=_md5(entry.get("md5"), where),
    )


def _count(entry: Mapping[str, object], key: str, where: str, *, least: int) -> int | None:
    """An int64 pin, as a JSON number or a decimal string (Cloud Storage shows them as strings)."""
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 2**63:
        raise InvalidManifest(
            f"{where}: {key} {value!r} must be an integer of at least {least} (a number or a "
            "decimal string); fix it or leave the pin out"
        )
    return value


def _md5(value: object, where: str) -> str | None:
    """The MD5 pin as Cloud Storage shows it (base64); 32 hex digits (``md5sum``) accepted."""
    if value is None:
        return None
    if isinstance(value, str) and _MD5_BASE64.fullmatch(value):
        return value
    if isinstance(value, str) and _MD5_HEX.fullmatch(value):
        return base64.b64encode(binascii.unhexlify(value)).decode("ascii")
    raise InvalidManifest(
        f"{where}: md5 {value!r} is not an MD5 digest in base64 (as `gcloud storage hash` "
        "shows it) or 32 hex digits; fix it or leave the pin out"
    )


def _resolved(entry: str, base_uri: str, bucket: str, where: str) -> str:
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
    if found["bucket"] != bucket:
        raise InvalidManifest(
            f"{where}: {entry!r} is outside the manifest's bucket {bucket}; a manifest lists "
            "files of its own bucket only: copy the file into it, or drop the entry"
        )
    return uri
