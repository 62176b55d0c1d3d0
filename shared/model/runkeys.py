"""Run keys and run ids: the deterministic identity of one run, derived from its trigger alone.

Every delivery of the same trigger (Eventarc and Pub/Sub deliver at least once) must produce the
same key, so the ledger finds the run it already recorded instead of starting a second GPU job.

- The **run key** is human-readable and stored in the ledger, e.g.
  ``gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000``.
- The **run id** is ``r-`` plus 24 hex digits of the key's SHA-256: a valid Firestore document id
  and a valid label value (at most 63 characters of ``[a-z0-9_-]``, starting with a letter).

A retry message carries its parent's run id, so retries need no key of their own.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

RUN_ID_PREFIX = "r-"
RUN_ID_HEX_DIGITS = 24  # 96 bits: collisions stay negligible for any realistic number of runs
RUN_ID_PATTERN = re.compile(rf"{RUN_ID_PREFIX}[0-9a-f]{{{RUN_ID_HEX_DIGITS}}}")


def object_run_key(bucket: str, name: str, generation: int) -> str:
    """One object version is one run (``every_object`` completion).

    The generation, not the name, makes the key: overwriting an object is a new dataset.
    """
    return f"gcs:{bucket}/{name}@{generation}"


def dataset_run_key(bucket: str, prefix: str, completing_generation: int) -> str:
    """One dataset directory completed by one marker or manifest version is one run.

    ``prefix`` is the directory without its trailing slash ("" for the bucket's root);
    ``completing_generation`` is the generation of the marker or manifest that completed it, so
    rewriting ``_SUCCESS`` after a re-upload starts a new run while redeliveries do not.
    """
    directory = f"{prefix}/" if prefix else ""
    return f"gcs:{bucket}/{directory}@{completing_generation}"


def dataset_version_run_key(bucket: str, prefix: str, version: int) -> str:
    """One version of a marker-less dataset (``completion: quiet``) is one run.

    ``prefix`` is the dataset's directory with its trailing slash; ``version`` counts from 1
    (``after_start: new_run`` opens the next one for objects written after a run started).
    """
    return f"gcs-dataset:{bucket}/{prefix}#{version}"


def request_run_key(message_id: str, idempotency_key: str | None) -> str:
    """A job request is keyed by its sender's ``idempotency_key``, else by its message ID.

    The two namespaces differ so that a key that happens to equal some message ID cannot collide.
    """
    if idempotency_key is not None:
        return f"request-key:{idempotency_key}"
    return f"request-message:{message_id}"


def schedule_run_key(schedule: str, tick_time: datetime) -> str:
    """One tick of a named schedule is one run: the schedule's name plus the tick time in UTC."""
    return f"schedule:{schedule}@{rfc3339(tick_time)}"


def run_id(run_key: str) -> str:
    """The run id for ``run_key``: ``r-`` + 24 hex digits of its SHA-256."""
    digest = hashlib.sha256(run_key.encode("utf-8")).hexdigest()
    return RUN_ID_PREFIX + digest[:RUN_ID_HEX_DIGITS]


def is_run_id(text: str) -> bool:
    """Whether ``text`` has the exact shape ``run_id`` produces."""
    return RUN_ID_PATTERN.fullmatch(text) is not None


def rfc3339(moment: datetime) -> str:
    """``moment`` in UTC as RFC 3339 with a ``Z`` suffix; microseconds only when present."""
    if moment.tzinfo is None:
        raise ValueError(f"tick time {moment!r} has no time zone; pass an aware datetime")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
