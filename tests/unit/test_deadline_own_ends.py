"""A capacity end the run's own deadline caused says nothing about its placement.

Tables: ``deadlines.ended_by_own_deadline`` (a FLEX_START wait the deadline cut that ran out; the
queue watchdog's cancel at the deadline; and every near miss that is real capacity evidence), its
use by learned placement order (``placement_order.placement_stats``: no capacity failure counted)
and by the job-state function (no placement cooldown). And the job-state function decides on the
run as the observation leaves it (``jobstate.observed_run``): a job that started and ended between
two readings is not bound by the deadline.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from run_builders import NOW, a_run, an_attempt, job_name

from shared.config.model import (
    FailureClass,
    FlexStartPlacement,
    PersistentResourcePlacement,
    RetryPolicy,
    Template,
)
from shared.model.alerts import AlertReason
from shared.model.runs import Attempt, CancelReason, JobTimes, Run, RunStatus
from shared.policy import deadlines
from shared.policy.classify import classify_error
from shared.policy.decisions import decide
from shared.policy.placement_order import placement_stats

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
CREATED = NOW - 2 * HOUR
DEADLINE = CREATED + HOUR  # the run's start_by cut the 2h wait to 1h

FLEX_CUT = {"flex_start": {"max_wait": "7200s", "deadline_max_wait": "3600s"}}
FLEX_WRITTEN_1H = {"flex_start": {"max_wait": "3600s"}}
FLEX_CUT_NOT_SHORTER = {"flex_start": {"max_wait": "3600s", "deadline_max_wait": "3600s"}}
FLEX_FOREVER_CUT = {"flex_start": {"max_wait": "0s", "deadline_max_wait": "3600s"}}
POOL = {"persistent_resource": "a100-pool"}
SPOT = {"spot": {}}


def _ended(
    placement: dict[str, Any],
    *,
    number: int = 1,
    ended: Any = CREATED + HOUR,
    created: Any = CREATED,
    cancel: CancelReason | None = None,
    **fields: Any,
) -> Attempt:
    """Attempt ``number`` whose job, created at ``created``, ended at ``ended`` never started."""
    attempt = an_attempt(
        number,
        placement=placement,
        job_name=job_name(number),
        state="JOB_STATE_CANCELLED" if cancel else "JOB_STATE_FAILED",
        error={"class": "capacity", "code": 8, "message": "capacity"},
    )
    return replace(
        attempt,
        job_created_at=created,
        ended_at=ended,
        cancel_requested_at=ended if cancel else None,
        cancel_reason=cancel.value if cancel else None,
        **fields,
    )


def _run(*attempts: Attempt, deadline: Any = DEADLINE, **fields: Any) -> Run:
    return replace(a_run(RunStatus.FAILED, *attempts, **fields), start_deadline=deadline)


RAN_EARLIER = replace(
    _ended(SPOT, ended=CREATED - HOUR, created=CREATED - 2 * HOUR), started_at=CREATED - 90 * MINUTE
)
WATCHDOG = CancelReason.QUEUE_TIMEOUT


@pytest.mark.parametrize(
    ("run", "max_queue", "expected"),
    [
        # A FLEX_START wait the deadline cut.
        pytest.param(_run(_ended(FLEX_CUT)), None, True, id="cut-wait-ran-out"),
        pytest.param(
            _run(_ended(FLEX_CUT, ended=CREATED + HOUR + 30 * MINUTE, cancel=WATCHDOG)),
            None,
            True,
            id="cut-wait-then-watchdog-cancel-after-grace",
        ),
        pytest.param(_run(_ended(FLEX_FOREVER_CUT)), None, True, id="wait-forever-cut"),
        pytest.param(_run(_ended(FLEX_WRITTEN_1H)), None, False, id="written-wait-ran-out"),
        pytest.param(
            _run(_ended(FLEX_CUT_NOT_SHORTER)), None, False, id="cut-no-shorter-than-written"
        ),
        pytest.param(
            _run(_ended(FLEX_CUT, ended=CREATED + 10 * MINUTE)),
            None,
            False,
            id="stockout-before-the-cut-ran-out",
        ),
        pytest.param(
            _run(replace(_ended(FLEX_CUT), started_at=CREATED + MINUTE)),
            None,
            False,
            id="started-then-ended",
        ),
        pytest.param(_run(_ended(FLEX_CUT, created=None)), None, False, id="no-create-time"),
        pytest.param(_run(_ended(FLEX_CUT, ended=None)), None, False, id="no-end-time"),
        # The queue watchdog's cancel of a job without a max wait of its own.
        pytest.param(
            _run(_ended(POOL, ended=DEADLINE + 2 * MINUTE, cancel=WATCHDOG)),
            None,
            True,
            id="watchdog-at-the-deadline",
        ),
        pytest.param(
            _run(_ended(POOL, ended=DEADLINE + 2 * MINUTE, cancel=WATCHDOG)),
            30 * MINUTE,
            False,
            id="watchdog-max-queue-before-the-deadline",
        ),
        pytest.param(
            _run(_ended(POOL, ended=DEADLINE - MINUTE, cancel=WATCHDOG)),
            None,
            False,
            id="watchdog-before-the-deadline",
        ),
        pytest.param(
            _run(_ended(POOL, ended=DEADLINE + 2 * MINUTE, cancel=CancelReason.OPERATOR)),
            None,
            False,
            id="operator-cancel",
        ),
        pytest.param(
            _run(_ended(POOL, ended=DEADLINE + 2 * MINUTE)), None, False, id="pool-full-error"
        ),
        pytest.param(
            _run(_ended(POOL, ended=DEADLINE + 2 * MINUTE, cancel=WATCHDOG), deadline=None),
            None,
            False,
            id="no-deadline",
        ),
        pytest.param(
            _run(
                _ended(
                    POOL,
                    created=DEADLINE + MINUTE,
                    ended=DEADLINE + 25 * HOUR,
                    cancel=WATCHDOG,
                ),
                operator_grant=1,
            ),
            None,
            False,
            id="operator-let-it-past-the-deadline",
        ),
        pytest.param(
            _run(RAN_EARLIER, _ended(POOL, number=2, ended=DEADLINE + MINUTE, cancel=WATCHDOG)),
            None,
            False,
            id="an-earlier-job-ran-deadline-no-longer-binds",
        ),
        pytest.param(
            _run(_ended(FLEX_WRITTEN_1H, ended=CREATED + 90 * MINUTE, cancel=WATCHDOG)),
            None,
            False,
            id="watchdog-after-a-written-wait",
        ),
    ],
)
def test_ended_by_own_deadline(run: Run, max_queue: timedelta | None, expected: bool) -> None:
    assert run.last_attempt is not None
    assert deadlines.ended_by_own_deadline(run, run.last_attempt, max_queue=max_queue) is expected


KEY = "flex_start|us-central1|a2-highgpu-1g"


@pytest.mark.parametrize(
    ("placement", "failures"),
    [(FLEX_CUT, 0), (FLEX_WRITTEN_1H, 1)],
    ids=["deadline-cut-no-failure", "written-wait-one-failure"],
)
def test_learned_order_counts_no_failure_for_the_runs_own_deadline(
    placement: dict[str, Any], failures: int
) -> None:
    attempt = replace(_ended(placement), machine="a2-highgpu-1g")
    stats = placement_stats([KEY], [_run(attempt)], NOW)
    assert stats[KEY].capacity_failures == failures
    assert stats[KEY].tried


# --- the job-state function ------------------------------------------------------------------

PREEMPTED = classify_error(
    "JOB_STATE_FAILED", 8, "The Spot VM was preempted. Resources are insufficient in region."
)


def _template() -> Template:
    return Template(
        name="resnet-a100",
        display_name="resnet-{run_id}",
        job_spec={},
        placements=(FlexStartPlacement(max_wait=2 * HOUR), PersistentResourcePlacement("pool")),
        retry=RetryPolicy(
            attempts=5,
            backoff_base=timedelta(minutes=30),
            backoff_cap=timedelta(hours=2),
            user_failures=1,
            retry_on=frozenset({FailureClass.CAPACITY}),
        ),
        start_by=HOUR,
    )


def test_a_job_that_started_and_ended_between_two_readings_is_not_deadline_bound() -> None:
    from shared.handlers.jobstate import observed_run

    # Last read QUEUED; it then ran for a while and was preempted, all before the next reading.
    queued = replace(
        an_attempt(1, job_name=job_name(1), state="JOB_STATE_QUEUED"), job_created_at=CREATED
    )
    run = replace(a_run(RunStatus.SUBMITTED, queued), start_deadline=NOW - MINUTE)
    times = JobTimes(
        seen_at=NOW,
        created_at=CREATED,
        started_at=CREATED + 10 * MINUTE,
        ended_at=NOW - 5 * MINUTE,
    )
    observed = observed_run(run, PREEMPTED.state, times)
    assert observed.last_attempt is not None
    assert observed.last_attempt.started_at == CREATED + 10 * MINUTE
    assert observed.last_attempt.ended_at == NOW - 5 * MINUTE
    assert not deadlines.binds(observed)

    decision = decide(observed, _template(), PREEMPTED, now=NOW, rng=random.Random(3))
    assert decision.status is RunStatus.WAITING_RETRY
    assert decision.alert is None or decision.alert.reason != AlertReason.DEADLINE_MISSED
    # What deciding on the run as last read did: the deadline, though the job had run.
    stale = decide(run, _template(), PREEMPTED, now=NOW, rng=random.Random(3))
    assert stale.alert is not None and stale.alert.reason == AlertReason.DEADLINE_MISSED


def test_observed_run_without_an_attempt_is_the_run() -> None:
    from shared.handlers.jobstate import observed_run

    run = a_run()
    assert observed_run(run, "JOB_STATE_FAILED", JobTimes(seen_at=NOW)) is run
