"""What a run waits for before its first attempt: a quiet dataset, or a manifest's files.

A run in ``WAITING_DATA`` carries one of these as ``Run.data_wait`` (the document's ``data_wait``
map); the reconciler checks it each tick (``shared.handlers.data_waits``) and, once the data is
complete, moves the run to ACCEPTED with the record completed (``cutoff``, ``objects``), which it
then keeps: ``vertex-dispatch status`` says what data a run waited for and what it got.

The document (field names as stored)::

    kind                 "quiet" or "manifest"
    since                when the wait began (the run was opened)
    quiet:     dataset_uri (gs://BUCKET/PREFIX/), version (1, 2, ... per dataset),
               latest_version (only on version 1: the dataset's newest version, so a shard's
               event finds it with one read), cutoff (null until complete: the newest object's
               time when it was found quiet; an object written later belongs to the next
               version), objects (null until complete: how many it counted)
    manifest:  manifest_uri, files (how many it lists), missing_count, missing (the first
               MAX_MISSING_SHOWN missing: a URI, or "URI (the pin that differs)"),
               checked_at (the check that last changed what it shows: a check that finds
               the same is not written)

Pure: no ``google.*`` import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_MISSING_SHOWN = 20
"""A waiting manifest records this many of its missing files: enough to say what to upload,
bounded so a 10,000-file manifest keeps the run's document small."""


@dataclass(frozen=True)
class QuietWait:
    """One version of a marker-less dataset, waiting for its directory to go quiet."""

    dataset_uri: str  # gs://BUCKET/PREFIX/
    version: int
    since: datetime
    latest_version: int | None = None  # version 1 only: the dataset's newest version
    cutoff: datetime | None = None  # set when complete: the newest object's time then
    objects: int | None = None  # set when complete: the objects counted

    @property
    def complete(self) -> bool:
        return self.cutoff is not None


@dataclass(frozen=True)
class ManifestWait:
    """A manifest some of whose files are not (or not as pinned) in Cloud Storage yet."""

    manifest_uri: str
    files: int
    missing_count: int
    missing: tuple[str, ...]  # the first MAX_MISSING_SHOWN
    since: datetime
    checked_at: datetime | None = None

    @property
    def complete(self) -> bool:
        return self.missing_count == 0


DataWait = QuietWait | ManifestWait


def data_wait_to_document(wait: DataWait) -> dict[str, Any]:
    if isinstance(wait, QuietWait):
        return {
            "kind": "quiet",
            "dataset_uri": wait.dataset_uri,
            "version": wait.version,
            "since": wait.since,
            "latest_version": wait.latest_version,
            "cutoff": wait.cutoff,
            "objects": wait.objects,
        }
    return {
        "kind": "manifest",
        "manifest_uri": wait.manifest_uri,
        "files": wait.files,
        "missing_count": wait.missing_count,
        "missing": list(wait.missing),
        "since": wait.since,
        "checked_at": wait.checked_at,
    }


def data_wait_from_document(document: Mapping[str, Any] | None) -> DataWait | None:
    if not document:
        return None
    if document.get("kind") == "quiet":
        return QuietWait(
            dataset_uri=document["dataset_uri"],
            version=int(document["version"]),
            since=document["since"],
            latest_version=document.get("latest_version"),
            cutoff=document.get("cutoff"),
            objects=document.get("objects"),
        )
    return ManifestWait(
        manifest_uri=document["manifest_uri"],
        files=int(document["files"]),
        missing_count=int(document["missing_count"]),
        missing=tuple(document.get("missing") or ()),
        since=document["since"],
        checked_at=document.get("checked_at"),
    )
