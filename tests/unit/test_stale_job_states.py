"""A live job state seen too late never replaces what the ledger knows is later (shared.model.runs,
shared.policy.reconcile_plan).

A reconcile listing made before a job ended may be applied after ``on_job_event`` decided its end
(and a create's answer, QUEUED, may be recorded after a fast hint decided the job). Job states
only move forward: once an attempt's recorded state is terminal, or its end is decided, a live
(non-terminal) observation is older news. The transitions return the run unchanged (so the
ledger writes nothing), and the reconciler's plan sees no change to apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from run_builders import NOW, RUN_ID, TEMPLATE_NAME, a_run, an_attempt, job_name

from shared.config.model import FlexStartPlacement, Template
from shared.model.runs import (
    CREATE_FAILED_STATE,
    INTENT_STATE,
    Attempt,
    AttemptOutcome,
    InvalidTransition,
    RetryPlan,
    Run,
    RunStatus,
    with_attempt_state,
    with_decision,
    with_job,
    with_observed_state,
)
from shared.policy.reconcile_plan import StateChange, plan_tick

JOB_1, JOB_2 = job_name(1), job_name(2)
ERROR = {"code": 13, "message": "Internal error occurred", "class": "infrastructure"}
DECISION = {"outcome": "infrastructure", "alert": None, "complete": False}
BACKOFF = RetryPlan(NOW, 2, 0, "infrastructure")
GRACE = timedelta(minutes=30)
FLEX_1H = {"flex_start": {"max_wait": "3600s"}}


def attempt(
    number: int,
    state: str,
    *,
    job: str | None = JOB_1,
    decision: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> Attempt:
    """Attempt ``number`` of the template below (FLEX_START, 1 h), its job ``job`` in ``state``."""
    return an_attempt(
        number, placement=FLEX_1H, job_name=job, state=state, decision=decision, error=error
    )


# The runs as they stand when the stale observation arrives.
DECIDED_WAITING = a_run(
    RunStatus.WAITING_RETRY,
    attempt(1, "JOB_STATE_FAILED", decision=DECISION, error=ERROR),
    next_retry=BACKOFF,
)
DECIDED_SUCCEEDED = a_run(
    RunStatus.SUCCEEDED,
    attempt(1, "JOB_STATE_SUCCEEDED", decision={"outcome": "succeeded", "alert": None}),
)
ENDED_UNDECIDED = a_run(RunStatus.CANCELLED, attempt(1, "JOB_STATE_CANCELLED"))  # a final run
END_NOT_YET_DECIDED = a_run(RunStatus.RUNNING, attempt(1, "JOB_STATE_FAILED"))  # the tick decides
OLDER_ENDED = a_run(
    RunStatus.SUBMITTED,
    attempt(1, "JOB_STATE_FAILED", decision=DECISION),
    attempt(2, "JOB_STATE_QUEUED", job=JOB_2),
)

Observe = Callable[[Run], Run]


def observed(number: int, state: str, job: str = JOB_1) -> Observe:
    return lambda r: with_observed_state(r, number, job, state)


def recorded_job(number: int, state: str, job: str = JOB_1) -> Observe:
    """What dispatch's ``record_job`` applies: the create's answer, e.g. QUEUED."""
    return lambda r: with_job(r, number, job, state)


def create_failed(number: int) -> Observe:
    """What ``mark_create_failed`` applies when the create call's answer was lost."""
    return lambda r: with_attempt_state(r, number, CREATE_FAILED_STATE, {"code": 4})


@pytest.mark.parametrize(
    ("before", "change"),
    [
        pytest.param(
            DECIDED_WAITING, observed(1, "JOB_STATE_RUNNING"), id="listing-before-the-end"
        ),
        pytest.param(DECIDED_WAITING, observed(1, "JOB_STATE_PENDING"), id="pending-after-end"),
        pytest.param(DECIDED_SUCCEEDED, observed(1, "JOB_STATE_RUNNING"), id="after-success"),
        pytest.param(
            ENDED_UNDECIDED, observed(1, "JOB_STATE_CANCELLING"), id="terminal-not-decided"
        ),
        pytest.param(OLDER_ENDED, observed(1, "JOB_STATE_RUNNING"), id="older-attempt-ended"),
        pytest.param(
            END_NOT_YET_DECIDED, observed(1, "JOB_STATE_QUEUED"), id="live-run-ended-attempt"
        ),
        pytest.param(
            DECIDED_WAITING, recorded_job(1, "JOB_STATE_QUEUED"), id="create-answer-after-hint"
        ),
        pytest.param(DECIDED_WAITING, create_failed(1), id="create-failed-after-hint"),
    ],
)
def test_a_live_state_never_replaces_a_later_one(before: Run, change: Observe) -> None:
    # Unchanged (equal) is what makes the ledger's compare-and-set loop skip the write.
    assert change(before) == before


@pytest.mark.parametrize(
    ("before", "change", "number", "state", "status"),
    [
        pytest.param(
            a_run(RunStatus.SUBMITTED, attempt(1, "JOB_STATE_QUEUED")),
            observed(1, "JOB_STATE_RUNNING"),
            1,
            "JOB_STATE_RUNNING",
            RunStatus.RUNNING,
            id="live-moves-forward",
        ),
        pytest.param(
            a_run(RunStatus.SUBMITTING, attempt(1, INTENT_STATE, job=None)),
            recorded_job(1, "JOB_STATE_QUEUED"),
            1,
            "JOB_STATE_QUEUED",
            RunStatus.SUBMITTED,
            id="the-job-of-an-intent",
        ),
        pytest.param(
            a_run(RunStatus.SUBMITTING, attempt(1, INTENT_STATE, job=None)),
            create_failed(1),
            1,
            CREATE_FAILED_STATE,
            RunStatus.SUBMITTING,
            id="an-intent-whose-create-failed",
        ),
        pytest.param(
            OLDER_ENDED,
            observed(2, "JOB_STATE_RUNNING", JOB_2),
            2,
            "JOB_STATE_RUNNING",
            RunStatus.RUNNING,
            id="the-last-attempt-runs",
        ),
        pytest.param(
            a_run(RunStatus.RUNNING, attempt(1, "JOB_STATE_RUNNING")),
            observed(1, "JOB_STATE_FAILED"),
            1,
            "JOB_STATE_FAILED",
            RunStatus.RUNNING,
            id="a-terminal-state-is-recorded",
        ),
    ],
)
def test_a_newer_state_is_still_recorded(
    before: Run, change: Observe, number: int, state: str, status: RunStatus
) -> None:
    after = change(before)
    recorded = after.attempt(number)
    assert recorded is not None
    assert (recorded.state, after.status) == (state, status)


def test_a_stale_state_of_another_job_is_still_refused() -> None:
    with pytest.raises(InvalidTransition):
        with_observed_state(DECIDED_WAITING, 1, JOB_2, "JOB_STATE_RUNNING")


def outcome() -> AttemptOutcome:
    return AttemptOutcome(
        attempt=1,
        job_name=JOB_1,
        state="JOB_STATE_FAILED",
        error=ERROR,
        decision={"outcome": "other", "alert": None, "complete": False},
        status=RunStatus.FAILED,
    )


def test_a_decided_attempt_whose_state_was_overwritten_gets_its_end_back() -> None:
    # A ledger written before stale states were refused: decided, but the state says RUNNING.
    damaged = replace(
        DECIDED_WAITING, attempts=(replace(DECIDED_WAITING.attempts[0], state="JOB_STATE_RUNNING"),)
    )

    repaired = with_decision(damaged, outcome())

    assert repaired == DECIDED_WAITING  # the end restored; the first decision and status kept
    assert with_decision(repaired, outcome()) == repaired  # and from then on nothing changes


# The reconciler's view: a listing that shows an older live state is not a change to apply.

TEMPLATE = Template(
    name=TEMPLATE_NAME,
    display_name="flex-{run_id}",
    job_spec={},
    placements=(FlexStartPlacement(max_wait=timedelta(hours=1)),),
)


def listed(state: str) -> CustomJob:
    return CustomJob(name=JOB_1, state=state, labels={"vd-run": RUN_ID, "vd-attempt": "1"})


@pytest.mark.parametrize(
    ("the_run", "state", "changed"),
    [
        pytest.param(DECIDED_WAITING, "JOB_STATE_RUNNING", False, id="decided-listed-running"),
        pytest.param(DECIDED_SUCCEEDED, "JOB_STATE_PENDING", False, id="succeeded-listed-pending"),
        pytest.param(ENDED_UNDECIDED, "JOB_STATE_RUNNING", False, id="ended-listed-running"),
        pytest.param(DECIDED_WAITING, "JOB_STATE_FAILED", False, id="decided-listed-its-end"),
        pytest.param(
            replace(
                DECIDED_WAITING,
                attempts=(replace(DECIDED_WAITING.attempts[0], state="JOB_STATE_RUNNING"),),
            ),
            "JOB_STATE_FAILED",
            True,  # a damaged ledger: applying the end repairs it, once
            id="decided-state-overwritten-listed-its-end",
        ),
        pytest.param(
            a_run(RunStatus.SUBMITTED, attempt(1, "JOB_STATE_QUEUED")),
            "JOB_STATE_RUNNING",
            True,
            id="undecided-listed-running",
        ),
    ],
)
def test_the_tick_sees_no_change_in_an_older_live_state(
    the_run: Run, state: str, changed: bool
) -> None:
    plan = plan_tick(
        [the_run], {JOB_1: listed(state)}, {TEMPLATE.name: TEMPLATE}, now=NOW, grace=GRACE
    )

    assert plan.changes == ((StateChange(RUN_ID, JOB_1, state),) if changed else ())
