"""Learned placement order (policy/placement_order.py): tables of histories and the order they
give, with an injected clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.model import OnDemandPlacement, Template
from shared.model.runs import Attempt, PlacementSkip, RetryPlan, Run, SkipClass
from shared.policy.placement_order import (
    EXPLORE_SHARE,
    LEARNING_WINDOW,
    LONG_UNUSED,
    learn_order,
    order_placements,
    placement_stats,
    recorded_order,
    resume_index,
    run_draws,
    start_of_order,
    written_order,
)

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
MACHINE = "a2-highgpu-1g"
REGIONS = ("us-central1", "us-east4", "us-west1")
CHAIN = Template(
    name="learned",
    display_name="learned",
    job_spec={"workerPoolSpecs": [{"machineSpec": {"machineType": MACHINE}}]},
    placements=tuple(OnDemandPlacement(region=region) for region in REGIONS),
)
KEYS = [f"on_demand|{region}|{MACHINE}" for region in REGIONS]
A, B, C = 0, 1, 2

# Run ids whose draw explores (below EXPLORE_SHARE) and whose draw does not.
EXPLORING = next(f"run-{n}" for n in range(10_000) if run_draws(f"run-{n}")[0] < EXPLORE_SHARE)
SETTLED = next(f"run-{n}" for n in range(10_000) if run_draws(f"run-{n}")[0] >= EXPLORE_SHARE)


def started(
    where: int, waited: timedelta, *, ago: timedelta = timedelta(hours=1), machine: bool = True
) -> Attempt:
    """An attempt on placement ``where`` whose job was created ``ago`` and started ``waited``
    later, then succeeded an hour after that (its last use)."""
    created = NOW - ago
    return Attempt(
        number=1,
        placement={"on_demand": {"region": REGIONS[where]}},
        region=REGIONS[where],
        parent=f"projects/p/locations/{REGIONS[where]}",
        intent_at=created,
        job_name="projects/p/locations/r/customJobs/1",
        state="JOB_STATE_SUCCEEDED",
        job_created_at=created,
        started_at=created + waited,
        ended_at=created + waited + timedelta(hours=1),
        machine=MACHINE if machine else None,
    )


def capacity_end(where: int, *, ago: timedelta = timedelta(hours=1)) -> Attempt:
    """An attempt on placement ``where`` whose job never started and ended for capacity."""
    created = NOW - ago
    return Attempt(
        number=1,
        placement={"on_demand": {"region": REGIONS[where]}},
        region=REGIONS[where],
        parent=f"projects/p/locations/{REGIONS[where]}",
        intent_at=created,
        job_name="projects/p/locations/r/customJobs/2",
        state="JOB_STATE_FAILED",
        error={"code": 8, "message": "stockout", "class": "capacity"},
        job_created_at=created,
        ended_at=created + timedelta(minutes=10),
        machine=MACHINE,
    )


def refused_create(where: int, ran_on: int, *, ago: timedelta = timedelta(hours=1)) -> Attempt:
    """An attempt that ran on ``ran_on`` after the create on ``where`` was refused for capacity."""
    skip = PlacementSkip(
        {"on_demand": {"region": REGIONS[where]}},
        REGIONS[where],
        SkipClass.CAPACITY.value,
        "stockout",
        NOW - ago,
    )
    attempt = started(ran_on, 5 * MINUTE, ago=ago)
    return Attempt(**{**attempt.__dict__, "skips": (skip,)})


def unstarted(
    where: int, waited: timedelta, *, ago: timedelta = timedelta(hours=1), ended: bool = True
) -> Attempt:
    """An attempt on placement ``where`` whose job was created ``ago`` and never started: it
    ended (cancelled, no failure class) after ``waited``, or (``ended`` False) still waits."""
    created = NOW - ago
    return Attempt(
        number=1,
        placement={"on_demand": {"region": REGIONS[where]}},
        region=REGIONS[where],
        parent=f"projects/p/locations/{REGIONS[where]}",
        intent_at=created,
        job_name="projects/p/locations/r/customJobs/3",
        state="JOB_STATE_CANCELLED" if ended else "JOB_STATE_QUEUED",
        job_created_at=created,
        ended_at=created + waited if ended else None,
        machine=MACHINE,
    )


def runs_of(*attempts: Attempt) -> list[Run]:
    return [
        Run(f"old-{n}", f"key-{n}", "route", "learned", {}, attempts=(attempt,))
        for n, attempt in enumerate(attempts)
    ]


@pytest.mark.parametrize(
    ("history", "order"),
    [
        pytest.param((), (A, B, C), id="no-history-keeps-the-written-order"),
        pytest.param(
            (started(A, 30 * MINUTE), started(B, 5 * MINUTE)), (B, A, C), id="faster-start-first"
        ),
        pytest.param(
            (started(A, 10 * MINUTE), started(B, 10 * MINUTE), started(C, 10 * MINUTE)),
            (A, B, C),
            id="ties-keep-the-written-order",
        ),
        pytest.param(
            (started(C, 10 * MINUTE), started(B, 10 * MINUTE)),
            (B, C, A),
            id="a-tie-between-measured-ones-in-written-order-untried-after",
        ),
        pytest.param(
            (started(A, 5 * MINUTE), capacity_end(A), started(B, 20 * MINUTE)),
            (B, A, C),
            id="a-capacity-failure-penalises-a-faster-placement",
        ),
        pytest.param(
            (started(A, 5 * MINUTE), started(B, 40 * MINUTE), capacity_end(B)),
            (A, B, C),
            id="the-penalty-adds-to-the-slower-one",
        ),
        pytest.param(
            (capacity_end(A), started(C, 10 * MINUTE)),
            (C, B, A),
            id="only-failures-go-after-the-untried",
        ),
        pytest.param(
            (capacity_end(A), capacity_end(A), capacity_end(B)),
            (C, B, A),
            id="fewer-failures-first-among-the-never-started",
        ),
        pytest.param(
            (
                started(A, 1 * MINUTE),
                started(A, 100 * MINUTE),
                started(A, 2 * MINUTE),
                started(B, 10 * MINUTE),
            ),
            (A, B, C),
            id="the-median-not-the-mean",
        ),
        pytest.param(
            (started(A, 1 * MINUTE, ago=LEARNING_WINDOW + 2 * HOUR), started(B, 20 * MINUTE)),
            (B, A, C),
            id="outside-the-window-counts-for-nothing",
        ),
        pytest.param(
            (started(A, 1 * MINUTE, ago=LEARNING_WINDOW - 2 * HOUR), started(B, 20 * MINUTE)),
            (A, B, C),
            id="inside-the-window-counts",
        ),
        pytest.param(
            (capacity_end(A, ago=LEARNING_WINDOW + HOUR), started(B, 20 * MINUTE)),
            (B, A, C),
            id="an-old-failure-is-forgotten",
        ),
        pytest.param(
            (refused_create(A, ran_on=B), started(A, 20 * MINUTE), started(C, 10 * MINUTE)),
            (B, C, A),
            id="a-create-refused-for-capacity-counts-as-a-failure",
        ),
        pytest.param(
            (started(A, 5 * MINUTE), unstarted(A, 3 * HOUR, ago=3 * HOUR, ended=False)),
            (A, B, C),
            id="measured-before-untried-however-long-a-job-waits",
        ),
        pytest.param(
            (
                started(A, 5 * MINUTE),
                started(A, 5 * MINUTE),
                unstarted(A, 3 * HOUR, ago=3 * HOUR, ended=False),
                started(B, 20 * MINUTE),
            ),
            (B, A, C),
            id="a-job-waiting-now-longer-than-the-starts-makes-the-placement-slow",
        ),
        pytest.param(
            (
                started(A, 5 * MINUTE),
                unstarted(A, 2 * MINUTE, ago=2 * MINUTE, ended=False),
                started(B, 20 * MINUTE),
            ),
            (A, B, C),
            id="a-job-waiting-briefly-changes-nothing",
        ),
        pytest.param(
            (
                started(A, 5 * MINUTE),
                unstarted(A, 12 * HOUR, ago=13 * HOUR),
                unstarted(A, 12 * HOUR, ago=14 * HOUR),
                started(B, 20 * MINUTE),
            ),
            (B, A, C),
            id="long-waits-that-ended-unstarted-raise-the-median",
        ),
        pytest.param(
            (
                started(A, 30 * MINUTE),
                started(A, 30 * MINUTE),
                unstarted(A, 1 * MINUTE),
                started(B, 20 * MINUTE),
            ),
            (B, A, C),
            id="a-short-unstarted-wait-says-nothing",
        ),
        pytest.param(
            (started(A, 30 * MINUTE), started(B, 5 * MINUTE, machine=False)),
            (B, A, C),
            id="an-attempt-without-its-machine-is-placed-by-its-record",
        ),
    ],
)
def test_the_chain_is_ordered_by_measured_time_to_start(
    history: tuple[Attempt, ...], order: tuple[int, ...]
) -> None:
    learned = learn_order(CHAIN, "us-central1", runs_of(*history), run_id=SETTLED, now=NOW)
    assert learned.order == order
    assert learned.explored is None
    assert set(learned.reasons) == {A, B, C}


@pytest.mark.parametrize(
    ("history", "says"),
    [
        pytest.param((), {A: "untried in the last 7d"}, id="untried"),
        pytest.param(
            (started(A, 4 * MINUTE), started(A, 6 * MINUTE)),
            {A: "median time-to-start 5m over 2 starts in the last 7d; no capacity failure"},
            id="measured",
        ),
        pytest.param(
            (started(A, 5 * MINUTE), capacity_end(A)),
            {A: "1 capacity failure (expected wait 35m)"},
            id="penalised",
        ),
        pytest.param(
            (capacity_end(B), capacity_end(B)),
            {B: "no start in the last 7d; 2 capacity failures"},
            id="never-started",
        ),
        pytest.param(
            (started(A, 5 * MINUTE, ago=LONG_UNUSED + 3 * HOUR),),
            {A: "last used 25h ago"},
            id="long-unused",
        ),
    ],
)
def test_each_placement_says_why_it_is_where_it_is(
    history: tuple[Attempt, ...], says: dict[int, str]
) -> None:
    learned = learn_order(CHAIN, "us-central1", runs_of(*history), run_id=SETTLED, now=NOW)
    for index, text in says.items():
        assert text in learned.reasons[index]


@pytest.mark.parametrize(
    ("history", "explored", "head"),
    [
        pytest.param(
            (started(A, 5 * MINUTE), started(B, 10 * MINUTE)),
            C,
            C,
            id="the-untried-one-is-sampled-first",
        ),
        pytest.param(
            (
                started(A, 30 * MINUTE, ago=LONG_UNUSED + 3 * HOUR),
                started(B, 5 * MINUTE),
                started(C, 10 * MINUTE),
            ),
            A,
            A,
            id="a-long-unused-one-is-sampled-first",
        ),
        pytest.param(
            (started(A, 30 * MINUTE), started(B, 5 * MINUTE), started(C, 10 * MINUTE)),
            None,
            B,
            id="every-placement-used-lately-nothing-to-explore",
        ),
        pytest.param((), None, A, id="no-history-at-all-keeps-the-written-head"),
        pytest.param(
            (
                started(A, 5 * MINUTE, ago=LONG_UNUSED + 3 * HOUR),
                started(B, 10 * MINUTE),
                started(C, 10 * MINUTE),
            ),
            None,
            A,
            id="the-best-one-long-unused-is-first-anyway",
        ),
    ],
)
def test_an_exploring_run_samples_an_untried_or_long_unused_placement(
    history: tuple[Attempt, ...], explored: int | None, head: int
) -> None:
    learned = learn_order(CHAIN, "us-central1", runs_of(*history), run_id=EXPLORING, now=NOW)
    assert (learned.explored, learned.order[0]) == (explored, head)
    assert sorted(learned.order) == [A, B, C]
    if explored is not None:
        assert learned.reasons[explored].startswith("explored")
    settled = learn_order(CHAIN, "us-central1", runs_of(*history), run_id=SETTLED, now=NOW)
    assert settled.explored is None


def test_exploration_is_fixed_by_the_run_id_and_rare() -> None:
    history = runs_of(started(A, 5 * MINUTE), started(B, 10 * MINUTE))
    orders = [
        learn_order(CHAIN, "us-central1", history, run_id=f"r{n}", now=NOW) for n in range(2000)
    ]
    again = [
        learn_order(CHAIN, "us-central1", history, run_id=f"r{n}", now=NOW) for n in range(2000)
    ]
    assert orders == again
    share = sum(order.explored is not None for order in orders) / len(orders)
    assert EXPLORE_SHARE / 2 < share < EXPLORE_SHARE * 2


def test_two_placements_on_the_same_machines_share_what_was_measured() -> None:
    keys = ["k", "other", "k"]
    stats = placement_stats(["k", "other"], [], NOW)
    assert set(stats) == {"k", "other"}
    learned = order_placements(keys, stats, run_id=SETTLED, now=NOW)
    assert learned.order == (0, 1, 2)


@pytest.mark.parametrize(
    ("recorded", "order", "start"),
    [
        pytest.param(None, None, 0, id="none-recorded"),
        pytest.param((2, 0, 1), (2, 0, 1), 2, id="recorded"),
        pytest.param((1, 0), None, 0, id="the-chain-grew-since"),
        pytest.param((1, 1, 0), None, 0, id="not-an-order-of-the-chain"),
    ],
)
def test_a_run_follows_its_recorded_order_while_it_fits_the_chain(
    recorded: tuple[int, ...] | None, order: tuple[int, ...] | None, start: int
) -> None:
    run = Run("r", "k", "route", "learned", {}, placement_order=recorded)
    assert recorded_order(run, CHAIN) == order
    assert start_of_order(run, CHAIN) == start


@pytest.mark.parametrize(
    ("recorded", "planned", "attempt", "index"),
    [
        pytest.param(None, None, 1, 0, id="as-written-nothing-planned"),
        pytest.param((2, 0, 1), None, 1, 2, id="learned-starts-at-its-best-ranked"),
        pytest.param((2, 0, 1), (1, 0), 1, 0, id="the-planned-retry-of-this-attempt"),
        pytest.param((2, 0, 1), (1, 1), 2, 2, id="a-plan-of-another-attempt-is-not-followed"),
        pytest.param((1, 0), None, 1, 0, id="an-order-the-chain-outgrew"),
    ],
)
def test_a_budget_wait_resumes_where_the_run_would_have_walked(
    recorded: tuple[int, ...] | None,
    planned: tuple[int, int] | None,
    attempt: int,
    index: int,
) -> None:
    plan = (
        RetryPlan(at=NOW, attempt=planned[0], placement_index=planned[1], reason="capacity")
        if planned
        else None
    )
    run = Run("r", "k", "route", "learned", {}, placement_order=recorded, next_retry=plan)
    assert resume_index(run, CHAIN, attempt) == index


def test_the_written_order_says_why() -> None:
    fallback = written_order(CHAIN, "as written: the history could not be read")
    assert fallback.order == (A, B, C)
    assert fallback.lines()[0] == "placement[0]: as written: the history could not be read"
