"""``Ledger.next_runs``, the reconciler's round-robin over the active runs, and the reconciler's
state document, on the Firestore emulator: pages in the order (created_at, run id) after a
cursor, wrapping round to the oldest without reading a run twice in one page."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.ledger import Ledger, Run, RunStatus
from shared.handlers.reconcile import ACTIVE_STATUSES
from shared.model.reconciler_state import ReconcilerState, RunCursor

T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
LIMIT = 4


def _pairwise_clock() -> Callable[[], datetime]:
    """One minute later every second call: runs opened in pairs share their created_at, so only
    the run id orders them."""
    ticks: Iterator[int] = iter(range(10_000))
    return lambda: T0 + timedelta(minutes=next(ticks) // 2)


@pytest.fixture
def paired_ledger(
    firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]
) -> Ledger:
    return Ledger(
        clients.firestore_client(LOCAL_PROJECT), fresh_name("runs"), clock=_pairwise_clock()
    )


def _open(ledger: Ledger, statuses: list[RunStatus]) -> list[str]:
    """One run per status, in that order of creation; the active ones' ids in (created_at, id)
    order, which is not the order of their ids alone."""
    ids = [f"r-{n:024x}" for n in random.Random(3).sample(range(10**6), len(statuses))]
    opened = []
    for run_id, status in zip(ids, statuses, strict=True):
        snapshot, _ = ledger.open_run(
            Run(
                run_id=run_id,
                run_key=f"pubsub:requests/{run_id}",
                route="on-request",
                template="resnet-a100",
                trigger={"kind": "MessagePublished"},
                status=status,
            )
        )
        opened.append(snapshot.run)
    active = [run for run in opened if run.status in ACTIVE_STATUSES]
    return [run.run_id for run in sorted(active, key=lambda run: (run.created_at, run.run_id))]


def test_pages_go_round_the_active_runs_in_order_and_wrap_without_repeating_a_run(
    paired_ledger: Ledger,
) -> None:
    statuses = [
        (RunStatus.SUCCEEDED if i % 4 == 3 else ACTIVE_STATUSES[i % len(ACTIVE_STATUSES)])
        for i in range(14)
    ]
    order = _open(paired_ledger, statuses)
    assert len(order) == 11  # 3 ended runs are never read
    assert order != sorted(order)  # the order is by creation first

    cursor: RunCursor | None = None
    pages = []
    for _tick in range(4):
        page = paired_ledger.next_runs(ACTIVE_STATUSES, cursor, LIMIT)
        pages.append(([s.run.run_id for s in page.snapshots], page.wrapped))
        cursor = page.last

    assert (
        pages
        == [
            (order[0:4], False),
            (order[4:8], False),
            (order[8:11] + order[0:1], True),  # the end, then on from the oldest
            (order[1:5], False),
        ]
    )


def test_a_page_larger_than_the_active_runs_reads_each_once(paired_ledger: Ledger) -> None:
    order = _open(paired_ledger, [RunStatus.RUNNING] * 3)
    first = paired_ledger.next_runs(ACTIVE_STATUSES, None, 10)
    again = paired_ledger.next_runs(ACTIVE_STATUSES, first.last, 10)
    middle = RunCursor(first.snapshots[1].run.created_at, order[1])
    from_middle = paired_ledger.next_runs(ACTIVE_STATUSES, middle, 10)

    assert [s.run.run_id for s in first.snapshots] == order
    assert not first.wrapped
    assert [s.run.run_id for s in again.snapshots] == order
    assert again.wrapped
    assert [s.run.run_id for s in from_middle.snapshots] == [order[2], order[0], order[1]]


def test_a_cursor_on_a_run_that_ended_still_places_the_next_page(paired_ledger: Ledger) -> None:
    order = _open(paired_ledger, [RunStatus.RUNNING] * 5)
    first = paired_ledger.next_runs(ACTIVE_STATUSES, None, 2)
    paired_ledger.set_status(order[1], RunStatus.SUCCEEDED)  # the cursor's run ends

    second = paired_ledger.next_runs(ACTIVE_STATUSES, first.last, 2)

    assert [s.run.run_id for s in second.snapshots] == order[2:4]


def test_the_reconciler_state_is_kept_apart_from_the_runs(paired_ledger: Ledger) -> None:
    order = _open(paired_ledger, [RunStatus.SUBMITTED] * 2)
    assert paired_ledger.get_reconciler_state() == ReconcilerState()
    state = ReconcilerState(
        RunCursor(T0, order[0]), throttles=2, vertex_paused_until=T0 + timedelta(minutes=2)
    )

    paired_ledger.put_reconciler_state(replace(state, updated_at=T0))

    assert paired_ledger.get_reconciler_state() == replace(state, updated_at=T0)
    every_run = paired_ledger.list_runs(list(RunStatus), limit=100)
    assert sorted(s.run.run_id for s in every_run) == sorted(order)
