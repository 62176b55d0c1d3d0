"""The reconciler's pace: which runs a tick reads next, and when it may call Vertex AI.

Pure rules over ``shared.model.reconciler_state``; ``shared.handlers.reconcile`` reads the state at
the start of a tick and writes ``next_state`` at its end.

- **Round-robin.** A tick reads the next ``reconcile_max_runs`` active runs after the cursor, in
  the order (created_at, run id), wrapping round to the oldest; the cursor moves to the last run
  read. So the runs read longest ago come first and every active run is read within
  ceil(active runs / reconcile_max_runs) ticks, whatever the number of active runs.
- **Throttle backoff.** A RESOURCE_EXHAUSTED answer to a tick's ListCustomJobs or CancelCustomJob
  (``vertex.VertexThrottled``) stops that tick's Vertex AI calls, and pauses those of the next
  ticks for ``VERTEX_THROTTLE_PAUSE`` doubled per throttled tick in a row, at most
  ``VERTEX_THROTTLE_PAUSE_MAX``; the first tick whose calls all go through ends the backoff. A
  paused tick still does its ledger work (retries due, owed actions), and still moves the cursor:
  holding it would also hold the ledger work of every run past it for the whole pause, while a
  run passed over only waits one more round for its Vertex AI check (hints still record states).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from shared.model.reconciler_state import ReconcilerState, RunCursor
from shared.policy.timing import VERTEX_THROTTLE_PAUSE, VERTEX_THROTTLE_PAUSE_MAX


class VertexPace(enum.StrEnum):
    """How a tick's Vertex AI calls went."""

    CALLED = "called"  # every call it made went through (or it needed none)
    THROTTLED = "throttled"  # one was refused with RESOURCE_EXHAUSTED: the rest were not made
    PAUSED = "paused"  # the backoff was on: it made none


def throttle_pause(throttles: int) -> timedelta:
    """How long Vertex AI calls pause after ``throttles`` throttled ticks in a row (>= 1)."""
    doublings = min(max(throttles, 1) - 1, 16)  # 2**16 minutes is far past the cap already
    return min(VERTEX_THROTTLE_PAUSE * 2**doublings, VERTEX_THROTTLE_PAUSE_MAX)


def vertex_paused(state: ReconcilerState, now: datetime) -> bool:
    """True while the backoff forbids Vertex AI calls."""
    return state.vertex_paused_until is not None and now < state.vertex_paused_until


def next_state(
    state: ReconcilerState, now: datetime, *, last_read: RunCursor | None, pace: VertexPace
) -> ReconcilerState:
    """The state a tick at ``now`` leaves: the cursor at ``last_read`` (kept when the tick read
    no run) and the backoff moved by how its Vertex AI calls went."""
    cursor = last_read if last_read is not None else state.cursor
    if pace is VertexPace.THROTTLED:
        throttles = state.throttles + 1
        return ReconcilerState(cursor, throttles, now + throttle_pause(throttles), now)
    if pace is VertexPace.PAUSED:
        return ReconcilerState(cursor, state.throttles, state.vertex_paused_until, now)
    return ReconcilerState(cursor, 0, None, now)
