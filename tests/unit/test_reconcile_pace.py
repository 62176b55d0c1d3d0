"""The reconciler's pace: the throttle backoff and the cursor a tick leaves, as tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.model.reconciler_state import (
    ReconcilerState,
    RunCursor,
    state_from_document,
    state_to_document,
)
from shared.policy.reconcile_pace import VertexPace, next_state, throttle_pause, vertex_paused

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
BEFORE = RunCursor(datetime(2026, 12, 1, tzinfo=UTC), "r-000000000000000000000001")
READ = RunCursor(datetime(2026, 12, 2, tzinfo=UTC), "r-000000000000000000000002")
MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("throttles", "pause"),
    [
        (1, MINUTE),
        (2, 2 * MINUTE),
        (3, 4 * MINUTE),
        (4, 8 * MINUTE),
        (5, 15 * MINUTE),
        (50, 15 * MINUTE),
        (10**6, 15 * MINUTE),
    ],
)
def test_the_pause_doubles_per_throttled_tick_up_to_15_minutes(
    throttles: int, pause: timedelta
) -> None:
    assert throttle_pause(throttles) == pause


@pytest.mark.parametrize(
    ("before", "pace", "after"),
    [
        # A first throttle: one minute without Vertex AI calls.
        (
            ReconcilerState(BEFORE),
            VertexPace.THROTTLED,
            ReconcilerState(READ, 1, NOW + MINUTE, NOW),
        ),
        # Throttled again when the pause ended: twice as long.
        (
            ReconcilerState(BEFORE, 1, NOW - MINUTE),
            VertexPace.THROTTLED,
            ReconcilerState(READ, 2, NOW + 2 * MINUTE, NOW),
        ),
        # A paused tick keeps the backoff as it is, and still moves the cursor.
        (
            ReconcilerState(BEFORE, 2, NOW + MINUTE),
            VertexPace.PAUSED,
            ReconcilerState(READ, 2, NOW + MINUTE, NOW),
        ),
        # A tick whose calls all went through ends the backoff.
        (
            ReconcilerState(BEFORE, 4, NOW - MINUTE),
            VertexPace.CALLED,
            ReconcilerState(READ, 0, None, NOW),
        ),
    ],
)
def test_a_tick_leaves_the_cursor_at_the_last_run_read_and_moves_the_backoff(
    before: ReconcilerState, pace: VertexPace, after: ReconcilerState
) -> None:
    assert next_state(before, NOW, last_read=READ, pace=pace) == after


def test_a_tick_that_read_no_run_keeps_the_cursor() -> None:
    left = next_state(ReconcilerState(BEFORE), NOW, last_read=None, pace=VertexPace.CALLED)

    assert left.cursor == BEFORE


@pytest.mark.parametrize(
    ("paused_until", "paused"),
    [(None, False), (NOW + timedelta(seconds=1), True), (NOW, False), (NOW - MINUTE, False)],
)
def test_vertex_ai_is_paused_only_before_the_end_of_the_pause(
    paused_until: datetime | None, paused: bool
) -> None:
    assert vertex_paused(ReconcilerState(BEFORE, 1, paused_until), NOW) is paused


@pytest.mark.parametrize(
    "state",
    [ReconcilerState(), ReconcilerState(READ, 3, NOW + MINUTE, NOW), ReconcilerState(None, 1, NOW)],
)
def test_the_state_survives_its_document(state: ReconcilerState) -> None:
    assert state_from_document(state_to_document(state)) == state
