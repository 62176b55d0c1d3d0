"""shared.policy.arrivals: where an object of a quiet dataset goes, and what an instance keeps."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta

import pytest

from shared.config.model import AfterStart, QuietRule
from shared.model.data_waits import QuietWait
from shared.model.runs import Run, RunStatus
from shared.policy.arrivals import (
    Arrival,
    ArrivalMemory,
    Known,
    answer_from_memory,
    learnt,
    merged,
    place,
)
from shared.policy.quiet import HORIZON_MARGIN

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
QUIET_FOR = timedelta(minutes=10)
IGNORE = QuietRule(dataset="exports/{date}/", quiet_for=QUIET_FOR)
NEW_RUN = dataclasses.replace(IGNORE, after_start=AfterStart.NEW_RUN)
CUTOFF = T0 + timedelta(minutes=30)
ENDED = T0 + timedelta(hours=25)


def version(status: RunStatus, cutoff: datetime | None = None, updated: datetime = ENDED) -> Run:
    return Run(
        run_id="r-0123456789abcdef01234567",
        run_key="gcs-dataset:b/exports/2026-12-01/#1",
        route="nightly-export",
        template="t",
        trigger={},
        status=status,
        data_wait=QuietWait(
            dataset_uri="gs://b/exports/2026-12-01/",
            version=1,
            since=T0,
            latest_version=1,
            cutoff=cutoff,
            objects=None if cutoff is None else 3,
        ),
        updated_at=updated,
    )


WAITING = version(RunStatus.WAITING_DATA)
STARTED = [
    version(status, CUTOFF)
    for status in (RunStatus.ACCEPTED, RunStatus.SUBMITTED, RunStatus.RUNNING, RunStatus.SUCCEEDED)
]
TIMED_OUT = version(RunStatus.FAILED)
CANCELLED = version(RunStatus.CANCELLED)
BEFORE, AT, AFTER = CUTOFF - timedelta(seconds=1), CUTOFF, CUTOFF + timedelta(seconds=1)

# (newest version, written, rule, where the object goes)
PLACES = [
    pytest.param(WAITING, T0, IGNORE, Arrival.JOINS, id="waiting: joins"),
    pytest.param(WAITING, ENDED + QUIET_FOR, NEW_RUN, Arrival.JOINS, id="waiting: joins, any time"),
    *(
        pytest.param(
            run, when, rule, expected, id=f"{run.status.value} {label} {rule.after_start.value}"
        )
        for run in STARTED
        for rule in (IGNORE, NEW_RUN)
        for when, label, expected in (
            (BEFORE, "before cutoff", Arrival.PART_OF),
            (AT, "at cutoff", Arrival.PART_OF),
            (
                AFTER,
                "after cutoff",
                Arrival.OPENS_NEXT if rule is NEW_RUN else Arrival.LATE_IGNORED,
            ),
        )
    ),
    pytest.param(
        TIMED_OUT,
        ENDED - timedelta(hours=1),
        IGNORE,
        Arrival.PART_OF,
        id="timed out: its own shard",
    ),
    pytest.param(
        TIMED_OUT,
        ENDED + timedelta(seconds=1),
        IGNORE,
        Arrival.OPENS_NEXT,
        id="timed out: later opens next under ignore",
    ),
    pytest.param(
        CANCELLED,
        ENDED + timedelta(seconds=1),
        NEW_RUN,
        Arrival.OPENS_NEXT,
        id="cancelled: later opens next",
    ),
    pytest.param(CANCELLED, ENDED, NEW_RUN, Arrival.PART_OF, id="cancelled: written as it ended"),
    pytest.param(
        version(RunStatus.ACCEPTED),
        AFTER,
        NEW_RUN,
        Arrival.PART_OF,
        id="accepted without cutoff: nothing opens",
    ),
]


@pytest.mark.parametrize(("run", "written", "rule", "expected"), PLACES)
def test_place(run: Run, written: datetime, rule: QuietRule, expected: Arrival) -> None:
    assert place(run, written, rule) is expected


HORIZON = T0 + QUIET_FOR - HORIZON_MARGIN
# (what the instance knows, written, rule, answer without a read; None: read the ledger)
MEMORY_ANSWERS = [
    pytest.param(Known(1, "r", horizon=HORIZON), T0, IGNORE, Arrival.JOINS, id="before horizon"),
    pytest.param(
        Known(1, "r", horizon=HORIZON),
        HORIZON - timedelta(microseconds=1),
        NEW_RUN,
        Arrival.JOINS,
        id="just before horizon",
    ),
    pytest.param(Known(1, "r", horizon=HORIZON), HORIZON, IGNORE, None, id="at horizon: read"),
    pytest.param(
        Known(1, "r", horizon=HORIZON), HORIZON + QUIET_FOR, IGNORE, None, id="past horizon: read"
    ),
    pytest.param(
        Known(1, "r", cutoff=CUTOFF), AT, NEW_RUN, Arrival.PART_OF, id="started, at cutoff"
    ),
    pytest.param(
        Known(1, "r", cutoff=CUTOFF),
        AFTER,
        IGNORE,
        Arrival.LATE_IGNORED,
        id="started, late, ignore",
    ),
    pytest.param(
        Known(1, "r", cutoff=CUTOFF), AFTER, NEW_RUN, None, id="started, late, new_run: read"
    ),
    pytest.param(Known(1, "r"), T0, IGNORE, None, id="nothing known: read"),
]


@pytest.mark.parametrize(("known", "written", "rule", "expected"), MEMORY_ANSWERS)
def test_answer_from_memory(
    known: Known, written: datetime, rule: QuietRule, expected: Arrival | None
) -> None:
    assert answer_from_memory(known, written, rule) is expected


def test_a_version_seen_waiting_teaches_the_horizon_of_the_object_placed() -> None:
    written = T0 + timedelta(minutes=3)
    assert learnt(WAITING, 1, written, IGNORE) == Known(
        1, WAITING.run_id, horizon=written + QUIET_FOR - HORIZON_MARGIN
    )


def test_a_started_version_teaches_its_cutoff_and_a_closed_one_nothing() -> None:
    assert learnt(STARTED[0], 2, AFTER, NEW_RUN) == Known(2, STARTED[0].run_id, cutoff=CUTOFF)
    assert learnt(TIMED_OUT, 1, AFTER, NEW_RUN) is None
    assert learnt(dataclasses.replace(WAITING, data_wait=None), 1, T0, IGNORE) is None


EARLY = Known(1, "a", horizon=T0)
LATE = Known(1, "a", horizon=T0 + QUIET_FOR)
DONE = Known(1, "a", cutoff=CUTOFF)
NEXT = Known(2, "b", horizon=T0)
# (remembered, learnt now, remembered after)
MERGES = [
    pytest.param(None, EARLY, EARLY, id="first look"),
    pytest.param(LATE, EARLY, LATE, id="an older object's look keeps the later horizon"),
    pytest.param(EARLY, LATE, LATE, id="a newer object's look moves the horizon"),
    pytest.param(EARLY, DONE, DONE, id="started wins over waiting"),
    pytest.param(DONE, LATE, DONE, id="a stale look does not undo a start"),
    pytest.param(DONE, NEXT, NEXT, id="the next version wins"),
    pytest.param(NEXT, DONE, NEXT, id="an older version's stale look does not replace a newer"),
]


@pytest.mark.parametrize(("old", "new", "expected"), MERGES)
def test_merged(old: Known | None, new: Known, expected: Known) -> None:
    assert merged(old, new) == expected


def test_the_memory_is_bounded_forgetting_the_least_recently_used() -> None:
    memory = ArrivalMemory(capacity=3)
    for n in range(3):
        memory.note(n, Known(1, str(n), horizon=T0))
    assert memory.get(0) is not None  # 0 used: 1 is now the least recently used
    memory.note(3, Known(1, "3", horizon=T0))
    assert len(memory) == 3
    assert memory.get(1) is None
    assert [memory.get(n) is not None for n in (0, 2, 3)] == [True, True, True]
    memory.forget()
    assert len(memory) == 0


def test_the_memory_keeps_the_latest_horizon_under_concurrent_notes() -> None:
    memory = ArrivalMemory()
    horizons = [T0 + timedelta(seconds=s) for s in range(2_000)]

    def note(chunk: list[datetime]) -> None:
        for h in reversed(chunk):
            memory.note("d", Known(1, "r", horizon=h))

    threads = [threading.Thread(target=note, args=(horizons[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memory.get("d") == Known(1, "r", horizon=horizons[-1])
