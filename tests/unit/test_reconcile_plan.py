"""The reconciler's pure plan: what one tick owes the ledger, from runs and listed jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from run_builders import (
    EAST_PARENT,
    FLEX_2H,
    NOW,
    PARENT,
    POOL,
    RUN_ID,
    TEMPLATE_NAME,
    a_run,
    an_attempt,
    job_name,
)

from shared.adapters.ledger import INTENT_STATE, Attempt, RetryPlan, Run, RunStatus
from shared.config.model import FlexStartPlacement, PersistentResourcePlacement, Template
from shared.model.job_kinds import JobKind
from shared.policy.due_retries import DueRetry, RetryCause
from shared.policy.duplicates import Duplicates
from shared.policy.max_wait import flex_start_max_wait
from shared.policy.reconcile_plan import (
    Listing,
    OverdueWait,
    StateChange,
    StuckIntent,
    TickPlan,
    list_filter,
    plan_listings,
    plan_tick,
)
from shared.policy.watchdogs import QueueLimitSource

GRACE = timedelta(minutes=30)

TEMPLATE = Template(
    name=TEMPLATE_NAME,
    display_name="resnet-{run_id}",
    job_spec={},
    placements=(
        PersistentResourcePlacement("a100-pool"),
        FlexStartPlacement(max_wait=timedelta(hours=2)),
        FlexStartPlacement(max_wait=timedelta(hours=6), region="us-east4"),
    ),
)


def attempt(
    number: int = 1,
    *,
    job: int | None = None,
    state: str = INTENT_STATE,
    intent_age: timedelta = timedelta(minutes=20),
    placement: Mapping[str, Any] = FLEX_2H,
    parent: str = PARENT,
    decision: dict[str, Any] | None = None,
) -> Attempt:
    """Attempt ``number``, claimed ``intent_age`` before NOW in ``parent``'s region; its job is
    ``job_name(job)`` (None: an intent)."""
    return an_attempt(
        number,
        placement=placement,
        region=parent.rsplit("/", 1)[1],
        parent=parent,
        intent_at=NOW - intent_age,
        job_name=job_name(job) if job is not None else None,
        state=state,
        decision=decision,
    )


def run(
    status: RunStatus,
    *attempts: Attempt,
    created_at: datetime = NOW - timedelta(hours=1),
    **fields: Any,
) -> Run:
    """A run of TEMPLATE, opened an hour before NOW unless ``created_at`` says otherwise."""
    return a_run(status, *attempts, created_at=created_at, **fields)


def listed(
    number: int,
    state: str,
    *,
    age: timedelta = timedelta(minutes=15),
    max_wait: str | None = "7200s",
    strategy: str = "FLEX_START",
) -> CustomJob:
    """A job as ListCustomJobs returns it (REST JSON), created ``age`` before NOW."""
    scheduling: dict[str, Any] = {"strategy": strategy}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    created = (NOW - age).isoformat().replace("+00:00", "Z")
    return CustomJob.from_json(
        f'{{"name": "{job_name(number)}", "state": "{state}", "createTime": "{created}", '
        f'"labels": {{"vd-run": "{RUN_ID}", "vd-attempt": "1"}}, '
        f'"jobSpec": {{"scheduling": {json.dumps(scheduling)}}}}}'
    )


def tick(*runs: Run, jobs: tuple[CustomJob, ...] = (), **options: Any) -> TickPlan:
    return plan_tick(
        runs,
        {job.name: job for job in jobs},
        {TEMPLATE.name: TEMPLATE},
        now=NOW,
        grace=GRACE,
        **options,
    )


DECIDED = {"move": "retry", "alert": None}


@pytest.mark.parametrize(
    ("the_run", "jobs", "expected"),
    [
        pytest.param(
            run(RunStatus.SUBMITTED, attempt(job=1, state="JOB_STATE_QUEUED")),
            (listed(1, "JOB_STATE_QUEUED"),),
            TickPlan(),
            id="state-already-recorded",
        ),
        pytest.param(
            run(RunStatus.SUBMITTED, attempt(job=1, state="JOB_STATE_QUEUED")),
            (listed(1, "JOB_STATE_RUNNING"),),
            TickPlan(changes=(StateChange(RUN_ID, job_name(1), "JOB_STATE_RUNNING"),)),
            id="missed-state-change",
        ),
        pytest.param(
            run(RunStatus.RUNNING, attempt(job=1, state="JOB_STATE_RUNNING")),
            (listed(1, "JOB_STATE_FAILED"),),
            TickPlan(changes=(StateChange(RUN_ID, job_name(1), "JOB_STATE_FAILED"),)),
            id="missed-end",
        ),
        pytest.param(
            run(RunStatus.RUNNING, attempt(job=1, state="JOB_STATE_FAILED")),
            (listed(1, "JOB_STATE_FAILED"),),
            TickPlan(changes=(StateChange(RUN_ID, job_name(1), "JOB_STATE_FAILED"),)),
            id="end-recorded-but-not-decided",
        ),
        pytest.param(
            run(
                RunStatus.WAITING_RETRY,
                attempt(job=1, state="JOB_STATE_FAILED", decision=DECIDED),
                next_retry=RetryPlan(NOW - timedelta(minutes=1), 2, 0, "infrastructure"),
            ),
            (listed(1, "JOB_STATE_FAILED"),),
            TickPlan(),  # the due backoff is ensure_actions' to publish
            id="decided-and-waiting",
        ),
        pytest.param(
            run(RunStatus.SUBMITTED, attempt(job=1, state="JOB_STATE_QUEUED")),
            (),
            TickPlan(unlisted=(job_name(1),)),
            id="recorded-job-not-listed",
        ),
        pytest.param(
            run(RunStatus.SUBMITTING, attempt(intent_age=timedelta(minutes=2))),
            (),
            TickPlan(),
            id="fresh-intent-left-to-its-creator",
        ),
        pytest.param(
            run(
                RunStatus.SUBMITTING,
                attempt(job=1, state="JOB_STATE_FAILED", placement=POOL),
                attempt(2, intent_age=timedelta(minutes=6), placement=FLEX_2H),
            ),
            (),
            TickPlan(
                retries=(
                    DueRetry(
                        RUN_ID,
                        RetryPlan(NOW, 2, 1, "reconcile: attempt 2 has had no job for 360s"),
                        RetryCause.STALE_INTENT,
                    ),
                )
            ),
            id="stale-intent-retried-on-its-own-placement",
        ),
        pytest.param(
            run(RunStatus.SUBMITTING, attempt(intent_age=timedelta(minutes=40), placement=POOL)),
            (),
            TickPlan(
                retries=(
                    DueRetry(
                        RUN_ID,
                        RetryPlan(NOW, 1, 0, "reconcile: attempt 1 has had no job for 2400s"),
                        RetryCause.STALE_INTENT,
                    ),
                ),
                stuck=(StuckIntent(RUN_ID, 1, timedelta(minutes=40)),),
            ),
            id="intent-stuck-past-alert-threshold",
        ),
        pytest.param(
            run(RunStatus.ACCEPTED, created_at=NOW - timedelta(minutes=10)),
            (),
            TickPlan(
                retries=(
                    DueRetry(
                        RUN_ID,
                        RetryPlan(NOW, 1, 0, "reconcile: accepted 600s ago and never claimed"),
                        RetryCause.NEVER_CLAIMED,
                    ),
                )
            ),
            id="accepted-never-claimed",
        ),
        pytest.param(
            run(RunStatus.ACCEPTED, created_at=NOW - timedelta(minutes=1)),
            (),
            TickPlan(),
            id="accepted-just-now",
        ),
    ],
)
def test_plan_tick(the_run: Run, jobs: tuple[CustomJob, ...], expected: TickPlan) -> None:
    assert tick(the_run, jobs=jobs) == expected


FLEX_FOREVER = {"flex_start": {"max_wait": "0s"}}
FLEX_6H_EAST = {"flex_start": {"max_wait": "21600s", "region": "us-east4"}}
NOT_RECORDED: dict[str, Any] = {}  # an attempt stored before placements were recorded


def overdue_by(
    hours: float,
    limit: timedelta,
    state: str = "JOB_STATE_QUEUED",
    source: QueueLimitSource = QueueLimitSource.MAX_WAIT,
) -> OverdueWait:
    return OverdueWait(RUN_ID, job_name(1), state, timedelta(hours=hours), limit, source)


PR = "STRATEGY_UNSPECIFIED"  # a job on a persistent resource sets no scheduling strategy
DAY = timedelta(days=1)  # the default max_queue of a placement without a max wait of its own


def overdue_by_default(hours: float) -> OverdueWait:
    return overdue_by(hours, DAY, source=QueueLimitSource.DEFAULT)


LIMIT_2H = timedelta(hours=2, minutes=30)  # the recorded 2 h max wait plus the grace


@pytest.mark.parametrize(
    ("placement", "job", "overdue"),
    [
        pytest.param(
            FLEX_2H,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=3)),
            overdue_by(3, LIMIT_2H),
            id="queued-past-max-wait-and-grace",
        ),
        pytest.param(
            FLEX_2H,
            listed(1, "JOB_STATE_PENDING", age=timedelta(hours=3)),
            overdue_by(3, LIMIT_2H, "JOB_STATE_PENDING"),
            id="pending-past-max-wait-and-grace",
        ),
        pytest.param(
            FLEX_2H,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=2, minutes=20)),
            None,
            id="within-the-grace",
        ),
        pytest.param(
            FLEX_FOREVER,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(days=3), max_wait="0s"),
            overdue_by_default(72),
            id="max-wait-0-queues-a-day-by-default",
        ),
        pytest.param(
            FLEX_FOREVER,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=23), max_wait="0s"),
            None,
            id="max-wait-0-within-the-day",
        ),
        # The ledger's placement is what we asked for; the listed job may not say it: its
        # default max wait (1 day) plus the grace would leave it alone at 24h10m.
        pytest.param(
            FLEX_FOREVER,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=24, minutes=10), max_wait=None),
            overdue_by_default(24 + 10 / 60),
            id="recorded-0-wins-over-a-zero-the-service-dropped",
        ),
        pytest.param(
            FLEX_FOREVER,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=24, minutes=10), max_wait="86400s"),
            overdue_by_default(24 + 10 / 60),
            id="recorded-0-wins-over-a-default-the-service-filled-in",
        ),
        pytest.param(
            FLEX_2H,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=3), max_wait="21600s"),
            overdue_by(3, LIMIT_2H),
            id="recorded-2h-wins-over-the-jobs-6h",
        ),
        pytest.param(
            FLEX_6H_EAST,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=3)),
            None,
            id="recorded-6h-wins-over-the-jobs-2h",
        ),
        pytest.param(
            NOT_RECORDED,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=3)),
            overdue_by(3, LIMIT_2H),
            id="no-recorded-placement-falls-back-to-the-job",
        ),
        pytest.param(
            {"flex_start": {"max_wait": "soon"}},
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=3)),
            overdue_by(3, LIMIT_2H),
            id="unreadable-recorded-max-wait-falls-back-to-the-job",
        ),
        pytest.param(
            NOT_RECORDED,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(days=1, minutes=31), max_wait=None),
            overdue_by(24 + 31 / 60, timedelta(days=1, minutes=30)),
            id="unset-max-wait-is-vertex-default-1-day",
        ),
        pytest.param(
            NOT_RECORDED,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(days=3), max_wait="0s"),
            overdue_by_default(72),
            id="no-recorded-placement-job-says-0",
        ),
        pytest.param(
            POOL,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(days=3), strategy="STRATEGY_UNSPECIFIED"),
            overdue_by_default(72),
            id="persistent-resource-queues-a-day-by-default",
        ),
        pytest.param(
            POOL,
            listed(
                1, "JOB_STATE_PENDING", age=timedelta(hours=23), strategy="STRATEGY_UNSPECIFIED"
            ),
            None,
            id="persistent-resource-within-the-day",
        ),
        pytest.param(
            NOT_RECORDED,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(days=3), strategy="STRATEGY_UNSPECIFIED"),
            overdue_by_default(72),
            id="no-recorded-placement-not-flex-start",
        ),
        pytest.param(
            FLEX_2H,
            listed(1, "JOB_STATE_RUNNING", age=timedelta(days=3)),
            None,
            id="running-is-not-waiting",
        ),
    ],
)
def test_watchdog(placement: dict[str, Any], job: CustomJob, overdue: OverdueWait | None) -> None:
    recorded = attempt(job=1, state=job.state.name, placement=placement)
    plan = tick(run(RunStatus.SUBMITTED, recorded), jobs=(job,))

    assert plan.overdue == ((overdue,) if overdue else ())
    assert plan.changes == ()


@pytest.mark.parametrize(
    ("placement", "job", "overdue"),
    [
        pytest.param(
            POOL,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=1, minutes=1), strategy=PR),
            overdue_by(1 + 1 / 60, timedelta(hours=1), source=QueueLimitSource.MAX_QUEUE),
            id="persistent-resource-past-max-queue",
        ),
        pytest.param(
            FLEX_2H,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=1, minutes=1)),
            overdue_by(1 + 1 / 60, timedelta(hours=1), source=QueueLimitSource.MAX_QUEUE),
            id="max-queue-shorter-than-the-max-wait-wins",
        ),
        pytest.param(
            FLEX_FOREVER,
            listed(1, "JOB_STATE_QUEUED", age=timedelta(minutes=59), max_wait="0s"),
            None,
            id="within-max-queue",
        ),
    ],
)
def test_max_queue_of_the_template_applies_to_every_placement(
    placement: dict[str, Any], job: CustomJob, overdue: OverdueWait | None
) -> None:
    hourly = replace(TEMPLATE, max_queue=timedelta(hours=1))
    recorded = attempt(job=1, state=job.state.name, placement=placement)
    plan = plan_tick(
        [run(RunStatus.SUBMITTED, recorded)],
        {job.name: job},
        {hourly.name: hourly},
        now=NOW,
        grace=GRACE,
    )

    assert plan.overdue == ((overdue,) if overdue else ())


@pytest.mark.parametrize(
    ("placement", "job_max_wait", "expected"),
    [
        (FLEX_2H, None, timedelta(hours=2)),
        (FLEX_FOREVER, None, None),
        (FLEX_FOREVER, "86400s", None),
        (POOL, "7200s", None),
        # recorded as a kind that does not wait: the job's own setting is not ours
        ({"spot": {"region": "us-east4"}}, "7200s", None),
        ({"on_demand": {}}, "7200s", None),
        ({"reservation": {"name": "projects/p/zones/us-east4-b/reservations/r"}}, "7200s", None),
        (NOT_RECORDED, "7200s", timedelta(hours=2)),
        (NOT_RECORDED, None, timedelta(days=1)),
        (NOT_RECORDED, "0s", None),
    ],
)
def test_flex_start_max_wait_prefers_the_recorded_placement(
    placement: dict[str, Any], job_max_wait: str | None, expected: timedelta | None
) -> None:
    recorded = attempt(job=1, placement=placement)
    job = listed(1, "JOB_STATE_QUEUED", max_wait=job_max_wait)

    assert flex_start_max_wait(job, recorded) == expected


def test_flex_start_max_wait_without_an_attempt_reads_the_job() -> None:
    assert flex_start_max_wait(listed(1, "JOB_STATE_QUEUED", max_wait="3600s")) == timedelta(
        hours=1
    )


def test_a_parent_that_could_not_be_listed_is_left_for_the_next_tick() -> None:
    waiting = run(RunStatus.SUBMITTED, attempt(job=1, state="JOB_STATE_QUEUED", parent=EAST_PARENT))

    assert tick(waiting, listed=frozenset({(PARENT, JobKind.CUSTOM_JOB)})) == TickPlan()
    east = frozenset({(EAST_PARENT, JobKind.CUSTOM_JOB)})
    assert tick(waiting, listed=east).unlisted == (job_name(1),)


def created(age: timedelta, **options: Any) -> Attempt:
    """A recorded job's attempt whose job Vertex AI stamped ``age`` before NOW."""
    return replace(attempt(**options), job_created_at=NOW - age)


def test_listings_one_per_parent_from_the_oldest_watched_job_to_the_newest() -> None:
    # Cut on the create times Vertex AI stamped (as the ledger recorded them), whatever the
    # intents say: a service clock ahead of ours does not hide a job.
    runs = [
        run(RunStatus.SUBMITTED, created(timedelta(hours=1), job=1), run_id="r-a"),
        run(RunStatus.RUNNING, created(timedelta(hours=3), job=2), run_id="r-b"),
        run(RunStatus.SUBMITTED, created(timedelta(0), job=3, parent=EAST_PARENT), run_id="r-c"),
        run(RunStatus.SUBMITTING, attempt(intent_age=timedelta(days=2)), run_id="r-d"),
        run(RunStatus.ACCEPTED, run_id="r-e"),
    ]

    assert plan_listings(runs) == [
        Listing(
            PARENT,
            # 3 h + 10 min margin; 1 h - 10 min margin
            'labels.vd-run:* AND create_time>="2026-12-01T08:50:00Z" '
            'AND create_time<="2026-12-01T11:10:00Z"',
            frozenset({job_name(1), job_name(2)}),
        ),
        Listing(
            EAST_PARENT,
            'labels.vd-run:* AND create_time>="2026-12-01T11:50:00Z" '
            'AND create_time<="2026-12-01T12:10:00Z"',
            frozenset({job_name(3)}),
        ),
    ]


def test_a_job_without_its_create_time_opens_the_window_of_its_parent_upwards() -> None:
    # Recorded from a hint's read, or before the ledger kept create times: the intent (our
    # clock) bounds it below, and nothing above, so the job is listed whatever Vertex AI's clock.
    runs = [
        run(RunStatus.SUBMITTED, created(timedelta(hours=1), job=1), run_id="r-a"),
        run(RunStatus.RUNNING, attempt(job=2, intent_age=timedelta(hours=3)), run_id="r-b"),
    ]

    assert plan_listings(runs) == [
        Listing(
            PARENT,
            'labels.vd-run:* AND create_time>="2026-12-01T08:50:00Z"',
            frozenset({job_name(1), job_name(2)}),
        ),
    ]


def test_list_filter_is_rfc3339_utc() -> None:
    since = datetime(2026, 12, 1, 8, 50, 12, 345678, tzinfo=UTC)

    assert list_filter(since) == 'labels.vd-run:* AND create_time>="2026-12-01T08:50:12Z"'
    assert list_filter(since, since + timedelta(hours=1)) == (
        'labels.vd-run:* AND create_time>="2026-12-01T08:50:12Z" '
        'AND create_time<="2026-12-01T09:50:12Z"'
    )


@pytest.mark.parametrize(
    ("the_run", "retried"),
    [
        pytest.param(
            run(RunStatus.SUBMITTING, attempt(), recovery_published_at=NOW - timedelta(minutes=2)),
            False,
            id="stale-intent-recovered-2-min-ago",
        ),
        pytest.param(
            run(RunStatus.SUBMITTING, attempt(), recovery_published_at=NOW - timedelta(minutes=11)),
            True,
            id="stale-intent-recovered-11-min-ago-lost-it",
        ),
        pytest.param(
            run(
                RunStatus.SUBMITTING,
                attempt(intent_age=timedelta(minutes=6)),
                recovery_published_at=NOW - timedelta(minutes=7),
            ),
            True,
            id="recovered-before-this-intent",
        ),
        pytest.param(
            run(
                RunStatus.ACCEPTED,
                created_at=NOW - timedelta(minutes=10),
                recovery_published_at=NOW - timedelta(minutes=1),
            ),
            False,
            id="never-claimed-recovered-1-min-ago",
        ),
    ],
)
def test_a_recovery_retry_is_published_again_only_after_it_had_time(
    the_run: Run, retried: bool
) -> None:
    assert bool(tick(the_run).retries) is retried


def test_a_listing_older_than_the_recorded_end_is_neither_a_change_nor_an_overdue_wait() -> None:
    # The job was listed QUEUED (3 h, past its 2 h max wait + grace) before its end was recorded.
    decided = run(
        RunStatus.WAITING_RETRY,
        attempt(job=1, state="JOB_STATE_FAILED", decision={"action": "retry"}),
    )
    stale = listed(1, "JOB_STATE_QUEUED", age=timedelta(hours=3))

    assert tick(decided, jobs=(stale,)) == TickPlan()
    # The same listing for a run whose end is not recorded: the watchdog acts.
    waiting = run(RunStatus.SUBMITTED, attempt(job=1, state="JOB_STATE_QUEUED"))
    assert tick(waiting, jobs=(stale,)).overdue


@pytest.mark.parametrize(
    ("the_run", "jobs", "expected"),
    [
        pytest.param(
            run(RunStatus.RUNNING, attempt(job=1, state="JOB_STATE_RUNNING")),
            (listed(1, "JOB_STATE_RUNNING"), listed(2, "JOB_STATE_QUEUED", age=timedelta(hours=1))),
            (Duplicates(RUN_ID, 1, job_name(1), (job_name(2),)),),
            id="a-second-job-is-a-duplicate-even-when-older",
        ),
        pytest.param(
            run(
                RunStatus.RUNNING,
                replace(attempt(job=1, state="JOB_STATE_RUNNING"), duplicate_jobs=(job_name(2),)),
            ),
            (listed(1, "JOB_STATE_RUNNING"), listed(2, "JOB_STATE_CANCELLED")),
            (),
            id="a-noted-duplicate-is-not-planned-again",
        ),
        pytest.param(
            run(RunStatus.SUBMITTING, attempt(intent_age=timedelta(minutes=2))),
            (listed(1, "JOB_STATE_QUEUED"), listed(2, "JOB_STATE_QUEUED")),
            (),
            id="an-intent-without-a-job-is-left-to-dispatch",
        ),
        pytest.param(
            run(RunStatus.RUNNING, attempt(job=1, state="JOB_STATE_RUNNING")),
            (listed(1, "JOB_STATE_RUNNING"),),
            (),
            id="one-job-no-duplicate",
        ),
    ],
)
def test_the_tick_plans_the_duplicates_it_lists(
    the_run: Run, jobs: tuple[CustomJob, ...], expected: tuple[Duplicates, ...]
) -> None:
    plan = tick(the_run, jobs=jobs)

    assert plan.duplicates == expected
    # A duplicate's state is never a change of the attempt, however it differs.
    assert all(change.job_name == job_name(1) for change in plan.changes)


def test_a_decided_end_is_not_watched_however_old() -> None:
    # A run waiting days for its retry (a no-placement wait) keeps its last attempt's decided
    # job: watching it would stretch the listing back days, over every job created since.
    waiting = run(
        RunStatus.WAITING_RETRY,
        attempt(job=1, state="JOB_STATE_FAILED", intent_age=timedelta(days=6), decision=DECIDED),
        run_id="r-waiting",
    )
    live = run(RunStatus.RUNNING, attempt(job=2, state="JOB_STATE_RUNNING"), run_id="r-live")

    [listing] = plan_listings([waiting, live])

    assert listing.watched == frozenset({job_name(2)})
    assert 'create_time>="2026-12-01T11:30:00Z"' in listing.filter  # 20 min + 10 min margin
    assert plan_listings([waiting]) == []
    # Not listed, and not reported as missing from the listing either.
    assert tick(waiting).unlisted == ()


def test_a_decision_beside_a_live_state_is_still_watched_so_its_end_repairs_it() -> None:
    damaged = run(
        RunStatus.WAITING_RETRY,
        attempt(job=1, state="JOB_STATE_RUNNING", decision=DECIDED),
    )

    [listing] = plan_listings([damaged])

    assert listing.watched == frozenset({job_name(1)})
