"""The reconciler's memory between ticks: where its round-robin over the active runs stopped, and
how long its Vertex AI calls pause after a throttle.

One small document, in a collection of its own beside the runs (``Ledger.get_reconciler_state``),
so the runs' status queries never see it; written once per tick, never per run. This module owns
the record and its document form, and imports nothing that talks to a cloud; the rules that move
it along are ``shared.policy.reconcile_pace``.

The document (field names as stored)::

    cursor_created_at, cursor_run_id   where the last tick stopped: the last run it read, in the
                                       order (created_at, run id); both null before the first tick
    throttles                          Vertex AI throttles (RESOURCE_EXHAUSTED) in a row: 0 after
                                       a tick whose Vertex AI calls all went through
    vertex_paused_until                null, or the time before which no tick calls Vertex AI
    updated_at                         when a tick last wrote it
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, order=True)
class RunCursor:
    """A position in the reconciler's order of runs: creation time, then run id (the document
    id), so two runs created in the same microsecond still have an order."""

    created_at: datetime
    run_id: str


@dataclass(frozen=True)
class ReconcilerState:
    """What one tick leaves the next: the cursor and the Vertex AI backoff."""

    cursor: RunCursor | None = None  # None: start from the oldest active run
    throttles: int = 0  # throttled ticks in a row
    vertex_paused_until: datetime | None = None
    updated_at: datetime | None = None


def state_to_document(state: ReconcilerState) -> dict[str, Any]:
    cursor = state.cursor
    return {
        "cursor_created_at": cursor.created_at if cursor else None,
        "cursor_run_id": cursor.run_id if cursor else None,
        "throttles": state.throttles,
        "vertex_paused_until": state.vertex_paused_until,
        "updated_at": state.updated_at,
    }


def state_from_document(document: Mapping[str, Any]) -> ReconcilerState:
    created_at, run_id = document.get("cursor_created_at"), document.get("cursor_run_id")
    return ReconcilerState(
        cursor=RunCursor(created_at, run_id) if created_at and run_id else None,
        throttles=int(document.get("throttles") or 0),
        vertex_paused_until=document.get("vertex_paused_until"),
        updated_at=document.get("updated_at"),
    )
