"""shared.policy.deadlines and where its rules are applied: the deadline of a run, cutting a
FLEX_START wait and the queue watchdog's limit, a missed deadline in the decisions and the
reconcile plan, and a request's start_by (shorten, never lengthen). Tables, clock injected."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from run_builders import NOW, POOL, a_retry_plan, a_run, an_attempt, job_name

from shared.config.model import (
    FailureClass,
    FlexStartPlacement,
    OnDemandPlacement,
    PersistentResourcePlacement,
    PubSubRoute,
    RetryPolicy,
    SpotPlacement,
    Template,
)
from shared.decode.routing import RequestRejected, requested_start_by
from shared.model.alerts import AlertReason
from shared.model.runs import AttemptEvent, PlacementSkip, RunStatus
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick
from shared.policy import deadlines
from shared.policy.classify import classify_error
from shared.policy.decisions import decide
from shared.policy.max_wait import flex_start_max_wait
from shared.policy.reconcile_plan import MissedDeadline, plan_tick
from shared.policy.records import chain_record, placement_record
from shared.policy.timing import DEADLINE_MIN_USEFUL_WAIT
from shared.policy.watchdogs import QueueLimit, QueueLimitSource, queue_limit

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
GRACE = timedelta(minutes=30)
FLEX_2H = FlexStartPlacement(max_wait=2 * HOUR)
FLEX_FOREVER = FlexStartPlacement(max_wait=timedelta(0))
POOL_PLACEMENT = PersistentResourcePlacement("a100-pool")
CHAIN = (FLEX_2H, POOL_PLACEMENT)
STOCKOUT = classify_error(
    "JOB_STATE_FAILED",
    8,
    "Resources are insufficient in region: us-central1. Please try a different region.",
)
INTERNAL = classify_error(
    "JOB_STATE_FAILED", 13, "Internal error occurred for the current attempt."
)


def template(start_by: timedelta | None = None, chain: tuple = CHAIN) -> Template:
    return Template(
        name="resnet-a100",
        display_name="resnet-{run_id}",
        job_spec={},
        placements=chain,
        retry=RetryPolicy(
            attempts=5,
            backoff_base=timedelta(minutes=30),
            backoff_cap=timedelta(hours=2),
            user_failures=1,
            retry_on=frozenset({FailureClass.CAPACITY, FailureClass.INFRASTRUCTURE}),
        ),
        start_by=start_by,
    )


# --- the deadline of a run -------------------------------------------------------------------

EVENT_AT = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        pytest.param(
            ObjectFinalized("b", "d/_SUCCESS", 1, 1, 0, "e", event_time=EVENT_AT),
            EVENT_AT,
            id="object-event-time",
        ),
        pytest.param(ObjectFinalized("b", "d/_SUCCESS", 1, 1, 0, "e"), None, id="object-no-time"),
        pytest.param(JobRequest("m", {}, {}, publish_time=EVENT_AT), EVENT_AT, id="request"),
        pytest.param(ScheduleTick("m", "nightly", EVENT_AT), EVENT_AT, id="schedule-tick"),
        pytest.param(RetryRequest("m", "r-x", 2, 1, "capacity"), None, id="retry-has-none"),
    ],
)
def test_trigger_time_is_the_events_own(trigger: Any, expected: datetime | None) -> None:
    assert deadlines.trigger_time(trigger) == expected


@pytest.mark.parametrize(
    ("triggered_at", "start_by", "expected"),
    [
        pytest.param(EVENT_AT, 6 * HOUR, EVENT_AT + 6 * HOUR, id="from-the-trigger"),
        pytest.param(None, 6 * HOUR, NOW + 6 * HOUR, id="no-trigger-time-from-the-open"),
        pytest.param(EVENT_AT, None, None, id="no-start-by-no-deadline"),
    ],
)
def test_start_deadline(
    triggered_at: datetime | None, start_by: timedelta | None, expected: datetime | None
) -> None:
    assert deadlines.start_deadline(triggered_at, NOW, start_by) == expected


# --- cutting a FLEX_START wait ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_wait", "deadline", "expected"),
    [
        pytest.param(2 * HOUR, None, None, id="no-deadline-unchanged"),
        pytest.param(2 * HOUR, NOW + 6 * HOUR, None, id="ends-before-the-deadline-unchanged"),
        pytest.param(2 * HOUR, NOW + 2 * HOUR, None, id="ends-at-the-deadline-unchanged"),
        pytest.param(2 * HOUR, NOW + HOUR, HOUR, id="cut-to-the-deadline"),
        pytest.param(timedelta(0), NOW + 3 * HOUR, 3 * HOUR, id="forever-cut-to-the-deadline"),
        pytest.param(
            2 * HOUR,
            NOW + timedelta(minutes=30, seconds=0.7),
            timedelta(minutes=30),
            id="whole-seconds-rounded-down",
        ),
        pytest.param(2 * HOUR, NOW - HOUR, timedelta(seconds=1), id="passed-never-0s-forever"),
    ],
)
def test_cut_wait(
    max_wait: timedelta, deadline: datetime | None, expected: timedelta | None
) -> None:
    assert deadlines.cut_wait(max_wait, deadline, NOW) == expected


@pytest.mark.parametrize(
    ("placement", "deadline", "expected"),
    [
        pytest.param(FLEX_2H, NOW + HOUR, replace(FLEX_2H, max_wait=HOUR), id="flex-cut"),
        pytest.param(FLEX_2H, NOW + 3 * HOUR, FLEX_2H, id="flex-not-cut"),
        pytest.param(FLEX_FOREVER, NOW + HOUR, replace(FLEX_2H, max_wait=HOUR), id="forever"),
        pytest.param(POOL_PLACEMENT, NOW + HOUR, POOL_PLACEMENT, id="pool-unchanged"),
        pytest.param(SpotPlacement(), NOW + HOUR, SpotPlacement(), id="spot-unchanged"),
        pytest.param(OnDemandPlacement(), NOW + HOUR, OnDemandPlacement(), id="on-demand"),
    ],
)
def test_cut_placement(placement: Any, deadline: datetime, expected: Any) -> None:
    assert deadlines.cut_placement(placement, deadline, NOW) == expected


def test_the_cut_wait_is_recorded_and_read_back_yet_the_record_still_names_its_placement() -> None:
    record = placement_record(FLEX_2H, deadline_max_wait=HOUR)
    assert record == {"flex_start": {"max_wait": "7200s", "deadline_max_wait": "3600s"}}
    assert chain_record(record) == placement_record(FLEX_2H)
    cut = an_attempt(placement=record)
    assert flex_start_max_wait(_job("FLEX_START", "7200s"), cut) == HOUR


# --- the queue watchdog's limit --------------------------------------------------------------


def _job(
    strategy: str = "FLEX_START", max_wait: str | None = "7200s", created: str = ""
) -> CustomJob:
    scheduling: dict[str, Any] = {"strategy": strategy}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    body: dict[str, Any] = {"jobSpec": {"scheduling": scheduling}}
    if created:
        body["createTime"] = created
    return CustomJob.from_json(json.dumps(body))


CREATED = "2026-12-01T12:00:00Z"  # NOW
POOL_JOB = _job("STRATEGY_UNSPECIFIED", None, CREATED)
FLEX_JOB = _job("FLEX_START", "7200s", CREATED)


@pytest.mark.parametrize(
    ("the_template", "the_job", "placement", "deadline", "expected"),
    [
        pytest.param(
            template(),
            POOL_JOB,
            POOL,
            NOW + 3 * HOUR,
            QueueLimit(3 * HOUR, QueueLimitSource.DEADLINE),
            id="pool-default-cut-to-the-deadline",
        ),
        pytest.param(
            template(),
            POOL_JOB,
            POOL,
            NOW + 30 * HOUR,
            QueueLimit(24 * HOUR, QueueLimitSource.DEFAULT),
            id="pool-default-before-the-deadline",
        ),
        pytest.param(
            replace(template(), max_queue=HOUR),
            POOL_JOB,
            POOL,
            NOW + 3 * HOUR,
            QueueLimit(HOUR, QueueLimitSource.MAX_QUEUE),
            id="max-queue-before-the-deadline",
        ),
        pytest.param(
            replace(template(), max_queue=5 * HOUR),
            POOL_JOB,
            POOL,
            NOW + 3 * HOUR,
            QueueLimit(3 * HOUR, QueueLimitSource.DEADLINE),
            id="max-queue-cut-to-the-deadline",
        ),
        pytest.param(
            template(),
            _job("SPOT", None, CREATED),
            {"spot": {}},
            NOW + 2 * HOUR,
            QueueLimit(2 * HOUR, QueueLimitSource.DEADLINE),
            id="spot-cut",
        ),
        pytest.param(
            template(),
            _job("STRATEGY_UNSPECIFIED", None, CREATED),
            {"reservation": {"name": "r"}},
            NOW + 2 * HOUR,
            QueueLimit(2 * HOUR, QueueLimitSource.DEADLINE),
            id="reservation-cut",
        ),
        pytest.param(
            template(),
            FLEX_JOB,
            {"flex_start": {"max_wait": "7200s", "deadline_max_wait": "3600s"}},
            NOW + HOUR,
            QueueLimit(HOUR + GRACE, QueueLimitSource.MAX_WAIT),
            id="flex-its-cut-wait-plus-grace",
        ),
        pytest.param(
            template(),
            _job("FLEX_START", "0s", CREATED),
            {"flex_start": {"max_wait": "0s"}},
            NOW + 2 * HOUR,
            QueueLimit(2 * HOUR, QueueLimitSource.DEADLINE),
            id="flex-forever-an-older-record-cut",
        ),
        pytest.param(
            template(),
            POOL_JOB,
            POOL,
            None,
            QueueLimit(24 * HOUR, QueueLimitSource.DEFAULT),
            id="no-deadline",
        ),
        pytest.param(
            template(),
            POOL_JOB,
            POOL,
            NOW - HOUR,
            QueueLimit(timedelta(0), QueueLimitSource.DEADLINE),
            id="created-past-the-deadline",
        ),
    ],
)
def test_queue_limit_with_a_deadline(
    the_template: Template,
    the_job: CustomJob,
    placement: dict[str, Any],
    deadline: datetime | None,
    expected: QueueLimit,
) -> None:
    attempt = an_attempt(placement=placement)
    assert queue_limit(the_template, the_job, attempt, GRACE, deadline) == expected


# --- too late --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        pytest.param(None, False, id="no-deadline"),
        pytest.param(NOW + HOUR, False, id="an-hour-left"),
        pytest.param(NOW + DEADLINE_MIN_USEFUL_WAIT, False, id="exactly-the-minimum"),
        pytest.param(NOW + DEADLINE_MIN_USEFUL_WAIT - MINUTE, True, id="too-close"),
        pytest.param(NOW, True, id="at-the-deadline"),
        pytest.param(NOW - HOUR, True, id="passed"),
    ],
)
def test_too_late(deadline: datetime | None, expected: bool) -> None:
    assert deadlines.too_late(deadline, NOW) is expected


RAN = replace(
    an_attempt(1, job_name=job_name(1), state="JOB_STATE_FAILED"),
    started_at=NOW - HOUR,
)
RAN_EVENT = replace(
    an_attempt(1, job_name=job_name(1), state="JOB_STATE_FAILED"),
    events=(AttemptEvent("JOB_STATE_RUNNING", NOW - HOUR),),
)
USER_EXIT = classify_error(
    "JOB_STATE_FAILED",
    3,
    "The replica workerpool0-0 exited with a non-zero status of 1. To find out more about why "
    "your job exited please check the logs: https://console.cloud.google.com/logs/viewer",
)
QUEUED = an_attempt(1, job_name=job_name(1), state="JOB_STATE_QUEUED")


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        pytest.param(replace(a_run(), start_deadline=NOW), True, id="never-started"),
        pytest.param(a_run(), False, id="no-deadline"),
        pytest.param(replace(a_run(RunStatus.SUBMITTED, QUEUED), start_deadline=NOW), True, id="q"),
        pytest.param(replace(a_run(RunStatus.FAILED, RAN), start_deadline=NOW), False, id="ran"),
        pytest.param(
            replace(a_run(RunStatus.FAILED, RAN_EVENT), start_deadline=NOW), False, id="ran-event"
        ),
        pytest.param(
            replace(
                a_run(
                    RunStatus.RUNNING,
                    an_attempt(1, job_name=job_name(1), state="JOB_STATE_RUNNING"),
                ),
                start_deadline=NOW,
            ),
            False,
            id="running-now",
        ),
        pytest.param(
            replace(a_run(operator_grant=2), start_deadline=NOW), False, id="operator-retried"
        ),
        pytest.param(
            replace(
                a_run(
                    RunStatus.WAITING_RETRY,
                    an_attempt(
                        1,
                        job_name=job_name(1),
                        state="JOB_STATE_FAILED",
                        error={"class": "user_code", "message": "exit 1"},
                    ),
                ),
                start_deadline=NOW,
            ),
            False,
            id="user-code-failed-so-it-ran",
        ),
    ],
)
def test_a_deadline_binds_until_a_job_started(run: Any, expected: bool) -> None:
    assert deadlines.binds(run) is expected


# --- the decisions after a job's end ---------------------------------------------------------


def _failed_run(deadline: datetime | None, failure: Any = STOCKOUT) -> Any:
    first = an_attempt(
        1,
        placement=placement_record(FLEX_2H, deadline_max_wait=HOUR),
        job_name=job_name(1),
        state=failure.state,
        error=failure.error_record(),
    )
    return replace(a_run(RunStatus.SUBMITTED, first), start_deadline=deadline)


@pytest.mark.parametrize(
    ("deadline", "failure", "status", "reason"),
    [
        pytest.param(None, STOCKOUT, RunStatus.WAITING_RETRY, None, id="no-deadline-falls-back"),
        pytest.param(
            NOW + HOUR, STOCKOUT, RunStatus.WAITING_RETRY, None, id="time-left-falls-back"
        ),
        pytest.param(
            NOW + 5 * MINUTE,
            STOCKOUT,
            RunStatus.FAILED,
            AlertReason.DEADLINE_MISSED,
            id="fallback-too-close",
        ),
        pytest.param(
            NOW - MINUTE, STOCKOUT, RunStatus.FAILED, AlertReason.DEADLINE_MISSED, id="passed"
        ),
        pytest.param(
            NOW + 20 * MINUTE,
            INTERNAL,
            RunStatus.FAILED,
            AlertReason.DEADLINE_MISSED,
            id="backoff-retry-would-come-too-late",
        ),
        pytest.param(NOW + 3 * HOUR, INTERNAL, RunStatus.WAITING_RETRY, None, id="backoff-in-time"),
        pytest.param(
            NOW - MINUTE, USER_EXIT, RunStatus.WAITING_RETRY, None, id="user-code-ran-not-bound"
        ),
    ],
)
def test_a_retry_or_fallback_that_cannot_start_before_the_deadline_misses_it(
    deadline: datetime | None, failure: Any, status: RunStatus, reason: str | None
) -> None:
    run = _failed_run(deadline, failure)
    decision = decide(run, template(), failure, now=NOW, rng=random.Random(7))
    assert decision.status is status
    assert (decision.alert.reason if decision.alert else None) == reason
    if reason is not None:
        assert decision.alert is not None
        assert "flex_start (max wait 7200s, cut to 3600s by the deadline)" in decision.alert.message
        assert f"cut to 3600s by the deadline): {failure.failure.value}" in decision.alert.message


def test_the_fallback_keeps_finding_its_place_in_the_chain_after_a_cut_wait() -> None:
    decision = decide(_failed_run(NOW + HOUR), template(), STOCKOUT, now=NOW, rng=random.Random(1))
    assert decision.retry is not None
    assert (decision.retry.attempt, decision.retry.placement_index) == (2, 1)


# --- the reconcile plan ----------------------------------------------------------------------


def _waiting(deadline: datetime | None, attempts: tuple = ()) -> Any:
    return replace(
        a_run(RunStatus.WAITING_RETRY, *attempts, next_retry=a_retry_plan(at=NOW + HOUR)),
        start_deadline=deadline,
    )


ENDED = an_attempt(
    1,
    job_name=job_name(1),
    state="JOB_STATE_FAILED",
    error=STOCKOUT.error_record(),
    decision={"status": "WAITING_RETRY"},
)


@pytest.mark.parametrize(
    ("run", "missed"),
    [
        pytest.param(_waiting(NOW - MINUTE, (ENDED,)), True, id="waiting-retry-past"),
        pytest.param(_waiting(NOW + 5 * MINUTE), True, id="no-placement-wait-too-close"),
        pytest.param(_waiting(NOW + HOUR, (ENDED,)), False, id="waiting-in-time"),
        pytest.param(_waiting(None, (ENDED,)), False, id="no-deadline"),
        pytest.param(
            _waiting(NOW - MINUTE, (replace(ENDED, started_at=NOW - 2 * HOUR),)),
            False,
            id="a-job-ran-deadline-met",
        ),
    ],
)
def test_the_reconciler_ends_a_waiting_run_past_its_deadline(run: Any, missed: bool) -> None:
    plan = plan_tick([run], {}, {}, now=NOW, grace=GRACE)
    expected = (MissedDeadline(run.run_id, run.start_deadline),) if missed else ()
    assert plan.missed == expected
    if missed:
        assert plan.retries == ()


def test_a_queued_job_is_overdue_at_the_deadline_but_a_running_one_never() -> None:
    created = NOW - 2 * HOUR
    queued = an_attempt(1, placement=POOL, job_name=job_name(1), state="JOB_STATE_QUEUED")
    run = replace(a_run(RunStatus.SUBMITTED, queued), start_deadline=NOW - MINUTE)
    listed = _job("STRATEGY_UNSPECIFIED", None, created.isoformat().replace("+00:00", "Z"))
    listed.name = job_name(1)
    listed.state = "JOB_STATE_QUEUED"
    [overdue] = plan_tick([run], {listed.name: listed}, {}, now=NOW, grace=GRACE).overdue
    assert overdue.source is QueueLimitSource.DEADLINE
    assert overdue.limit == 2 * HOUR - MINUTE

    running = replace(queued, state="JOB_STATE_RUNNING")
    listed.state = "JOB_STATE_RUNNING"
    run = replace(run, attempts=(running,), status=RunStatus.RUNNING)
    assert plan_tick([run], {listed.name: listed}, {}, now=NOW, grace=GRACE).overdue == ()


# --- the alert's lines -----------------------------------------------------------------------


def test_the_missed_alert_names_every_placement_tried_and_why() -> None:
    skip = PlacementSkip(POOL, "us-central1", "unavailable", "the pool is full", NOW)
    first = replace(
        an_attempt(
            1,
            placement=placement_record(FLEX_2H, deadline_max_wait=HOUR),
            job_name=job_name(1),
            state="JOB_STATE_FAILED",
            error=STOCKOUT.error_record(),
        ),
        skips=(skip,),
    )
    run = replace(a_run(RunStatus.FAILED, first), start_deadline=NOW)
    message = deadlines.missed_message(run, "resnet-a100", "its deadline has come")
    assert "persistent_resource a100-pool: passed over (unavailable): the pool is full" in message
    assert "attempt 1: flex_start (max wait 7200s, cut to 3600s by the deadline): capacity" in (
        message
    )
    assert NOW.isoformat() in message


# --- a request's start_by --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "template_start_by", "expected"),
    [
        pytest.param(None, 6 * HOUR, None, id="absent-the-templates"),
        pytest.param("2h", 6 * HOUR, 2 * HOUR, id="shortens"),
        pytest.param("6h", 6 * HOUR, 6 * HOUR, id="equal"),
        pytest.param("90m", None, timedelta(minutes=90), id="template-without-one-takes-it"),
        pytest.param(3600, 6 * HOUR, HOUR, id="seconds-as-a-number"),
    ],
)
def test_a_request_may_shorten_the_deadline(
    value: object, template_start_by: timedelta | None, expected: timedelta | None
) -> None:
    assert requested_start_by(value, template(template_start_by)) == expected


@pytest.mark.parametrize(
    ("value", "says"),
    [
        pytest.param("7h", "longer than template 'resnet-a100''s start_by (6h)", id="lengthens"),
        pytest.param("soon", "not a duration", id="unparsable"),
        pytest.param("-1h", "not a duration", id="negative-text"),
        pytest.param(-60, "cannot be negative", id="negative-number"),
        pytest.param("0s", "must be longer than 0s", id="zero"),
        pytest.param(True, "boolean", id="boolean"),
    ],
)
def test_a_request_may_never_lengthen_nor_garble_the_deadline(value: object, says: str) -> None:
    with pytest.raises(RequestRejected) as refused:
        requested_start_by(value, template(6 * HOUR))
    assert "body.start_by" in str(refused.value)
    assert says in str(refused.value)


def test_a_routed_request_carries_its_start_by() -> None:
    from shared.config.model import Config
    from shared.decode.routing import route

    config = Config(
        project="p",
        region="us-central1",
        source="test",
        alerts_topic="alerts",
        routes=(PubSubRoute(name="req", template="resnet-a100"),),
        templates={"resnet-a100": template(6 * HOUR)},
    )
    request = JobRequest("m1", {}, {"start_by": "1h"}, publish_time=EVENT_AT)
    match = route(request, config)
    assert match is not None and match.start_by == HOUR
