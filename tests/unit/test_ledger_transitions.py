"""The ledger's pure transitions for job states and decisions (shared.adapters.ledger)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from run_builders import NOW, a_run, an_attempt, job_name

from shared.adapters.ledger import (
    AttemptOutcome,
    CancelReason,
    InvalidTransition,
    RetryPlan,
    Run,
    RunStatus,
    run_from_document,
    run_to_document,
    with_alert,
    with_cancel_requested,
    with_decision,
    with_notice,
    with_observed_state,
    with_operator_grant,
    with_retry_published,
    with_waiting_cancelled,
)
from shared.model.runs import (
    cancel_reason_of,
    owed_actions,
    with_claimed_attempt,
    with_job,
    with_placement_wait,
    with_reopened,
)

JOB_1, JOB_2 = job_name(1), job_name(2)
DAY = timedelta(days=1)


ONE_QUEUED = a_run(RunStatus.SUBMITTED, an_attempt(1, job_name=JOB_1, state="JOB_STATE_QUEUED"))
# An older attempt whose job has not ended (a FAILED one keeps its end: test_stale_job_states).
FIRST_PENDING_SECOND_QUEUED = a_run(
    RunStatus.SUBMITTED,
    an_attempt(1, job_name=JOB_1, state="JOB_STATE_PENDING"),
    an_attempt(2, job_name=JOB_2, state="JOB_STATE_QUEUED"),
)


@pytest.mark.parametrize(
    ("before", "number", "job", "state", "status"),
    [
        pytest.param(
            ONE_QUEUED, 1, JOB_1, "JOB_STATE_RUNNING", RunStatus.RUNNING, id="running: RUNNING"
        ),
        pytest.param(
            ONE_QUEUED, 1, JOB_1, "JOB_STATE_PENDING", RunStatus.SUBMITTED, id="pending: SUBMITTED"
        ),
        pytest.param(
            a_run(RunStatus.SUBMITTING, an_attempt(1)),
            1,
            JOB_1,
            "JOB_STATE_QUEUED",
            RunStatus.SUBMITTED,
            id="the job of an intent",
        ),
        pytest.param(
            FIRST_PENDING_SECOND_QUEUED,
            1,
            JOB_1,
            "JOB_STATE_RUNNING",
            RunStatus.SUBMITTED,
            id="an older attempt does not move the run",
        ),
        pytest.param(
            replace(ONE_QUEUED, status=RunStatus.CANCELLED),
            1,
            JOB_1,
            "JOB_STATE_CANCELLING",
            RunStatus.CANCELLED,
            id="a final run keeps its status",
        ),
    ],
)
def test_a_live_state_is_recorded(
    before: Run, number: int, job: str, state: str, status: RunStatus
) -> None:
    after = with_observed_state(before, number, job, state)
    recorded = after.attempt(number)
    assert recorded is not None
    assert recorded.state == state
    assert after.status is status


def outcome(status: RunStatus, retry: RetryPlan | None = None) -> AttemptOutcome:
    return AttemptOutcome(
        attempt=1,
        job_name=JOB_1,
        state="JOB_STATE_FAILED",
        error={"code": 8, "message": "Resources are insufficient", "class": "capacity"},
        decision={"outcome": "capacity", "alert": None, "complete": False},
        status=status,
        next_retry=retry,
    )


def test_a_decision_is_recorded_with_the_state_once() -> None:
    plan = RetryPlan(NOW + timedelta(minutes=1), 2, 1, "capacity")
    decided = with_decision(ONE_QUEUED, outcome(RunStatus.WAITING_RETRY, plan))
    first = decided.attempt(1)
    assert first is not None
    assert (first.state, first.error, first.decision) == (
        "JOB_STATE_FAILED",
        outcome(RunStatus.WAITING_RETRY).error,
        outcome(RunStatus.WAITING_RETRY).decision,
    )
    assert (decided.status, decided.next_retry) == (RunStatus.WAITING_RETRY, plan)
    assert with_decision(decided, outcome(RunStatus.FAILED)) == decided


@pytest.mark.parametrize(
    ("before", "decided"),
    [
        pytest.param(
            replace(ONE_QUEUED, status=RunStatus.SUCCEEDED),
            outcome(RunStatus.FAILED),
            id="a final run",
        ),
        pytest.param(
            a_run(RunStatus.SUBMITTED, an_attempt(1, job_name=JOB_2, state="JOB_STATE_QUEUED")),
            outcome(RunStatus.FAILED),
            id="another job than the attempt's",
        ),
    ],
)
def test_a_decision_that_does_not_fit_is_refused(before: Run, decided: AttemptOutcome) -> None:
    with pytest.raises(InvalidTransition):
        with_decision(before, decided)


def test_a_published_retry_waits_until_its_republish_time() -> None:
    plan = RetryPlan(NOW + timedelta(minutes=1), 2, 1, "capacity")
    waiting = with_decision(ONE_QUEUED, outcome(RunStatus.WAITING_RETRY, plan))
    later = NOW + timedelta(minutes=11)

    published = with_retry_published(waiting, later)

    assert published.next_retry == RetryPlan(later, 2, 1, "capacity")
    with pytest.raises(InvalidTransition):
        with_retry_published(ONE_QUEUED, later)  # no retry is due on a live run


def decided(alert_reason: str | None, complete: bool) -> Run:
    alert = {"reason": alert_reason, "message": "m", "what_to_do": "w"} if alert_reason else None
    decision = {"outcome": "x", "alert": alert, "complete": complete}
    status = RunStatus.SUCCEEDED if complete else RunStatus.FAILED
    return with_decision(
        ONE_QUEUED,
        AttemptOutcome(1, JOB_1, "JOB_STATE_FAILED", None, decision, status, None),
    )


@pytest.mark.parametrize(
    ("run", "owed"),
    [
        pytest.param(ONE_QUEUED, (), id="undecided: nothing"),
        pytest.param(decided(None, False), (), id="decided, no alert, no completion"),
        pytest.param(decided("user_code", False), ("user_code",), id="alert not sent"),
        pytest.param(with_alert(decided("user_code", False), "user_code"), (), id="alert sent"),
        pytest.param(decided(None, True), ("completion",), id="completion not published"),
        pytest.param(with_notice(decided(None, True), "completion"), (), id="completion published"),
    ],
)
def test_what_a_run_still_owes(run: Run, owed: tuple[str, ...]) -> None:
    assert owed_actions(run) == owed
    assert run_to_document(run)["actions_owed"] is bool(owed)


def test_an_operator_grant_names_one_attempt_and_never_reopens_a_success() -> None:
    granted = with_operator_grant(ONE_QUEUED, 2)
    assert granted.operator_grant == 2
    assert run_from_document(run_to_document(granted)).operator_grant == 2
    succeeded = replace(ONE_QUEUED, status=RunStatus.SUCCEEDED)
    with pytest.raises(InvalidTransition):
        with_operator_grant(succeeded, 2)


def test_a_notice_is_recorded_once() -> None:
    once = with_notice(ONE_QUEUED, "completion")
    assert once.notices == ("completion",)
    assert with_notice(once, "completion") is once


def test_a_cancel_request_is_noted_once_on_the_attempt_with_a_job() -> None:
    first, later = datetime(2026, 12, 2, 9, 0, tzinfo=UTC), datetime(2026, 12, 2, 9, 5, tzinfo=UTC)

    noted = with_cancel_requested(ONE_QUEUED, 1, first)
    again = with_cancel_requested(noted, 1, later)

    assert noted.attempts[0].cancel_requested_at == first
    assert again == noted  # the first request counts
    assert run_from_document(run_to_document(noted)) == noted
    with pytest.raises(InvalidTransition, match="no job for attempt 2"):
        with_cancel_requested(ONE_QUEUED, 2, first)


@pytest.mark.parametrize(
    ("first", "then", "reason"),
    [
        (CancelReason.QUEUE_TIMEOUT, CancelReason.QUEUE_TIMEOUT, CancelReason.QUEUE_TIMEOUT),
        # A human meant to stop the run: the watchdog's capacity reading gives way.
        (CancelReason.QUEUE_TIMEOUT, CancelReason.OPERATOR, CancelReason.OPERATOR),
        # The watchdog's later request does not turn an operator's cancel into capacity.
        (CancelReason.OPERATOR, CancelReason.QUEUE_TIMEOUT, CancelReason.OPERATOR),
    ],
)
def test_a_cancels_reason_is_kept_and_an_operators_wins(
    first: CancelReason, then: CancelReason, reason: CancelReason
) -> None:
    noted = with_cancel_requested(ONE_QUEUED, 1, NOW, first)
    again = with_cancel_requested(noted, 1, NOW + timedelta(minutes=5), then)

    assert cancel_reason_of(again.attempts[0]) is reason
    assert again.attempts[0].cancel_requested_at == NOW
    assert run_from_document(run_to_document(again)) == again


def test_a_cancel_recorded_without_a_reason_reads_as_an_operators() -> None:
    old = replace(ONE_QUEUED.attempts[0], cancel_requested_at=NOW)
    assert cancel_reason_of(old) is CancelReason.OPERATOR
    assert cancel_reason_of(ONE_QUEUED.attempts[0]) is None


def test_a_wait_for_a_placement_keeps_its_start_until_a_job_is_recorded() -> None:
    plan = RetryPlan(NOW, 1, 0, "no placement could take the job")
    accepted = a_run(RunStatus.ACCEPTED)

    waiting = with_placement_wait(accepted, plan, NOW)
    still = with_placement_wait(waiting, replace(plan, at=NOW + timedelta(hours=1)), NOW + DAY)
    claimed = with_claimed_attempt(still, an_attempt(1))
    created = with_job(claimed, 1, JOB_1, "JOB_STATE_QUEUED")

    assert waiting.status is RunStatus.WAITING_RETRY and waiting.no_placement_since == NOW
    assert still.no_placement_since == NOW  # kept across retries
    assert claimed.no_placement_since == NOW  # a claim may still find no job created
    assert created.no_placement_since is None
    assert run_from_document(run_to_document(still)) == still


def test_an_operators_reopen_starts_a_new_wait() -> None:
    plan = RetryPlan(NOW, 1, 0, "no placement could take the job")
    waited = with_placement_wait(a_run(RunStatus.ACCEPTED), plan, NOW)
    failed = replace(waited, status=RunStatus.FAILED, next_retry=None)

    assert with_reopened(failed, plan).no_placement_since is None


@pytest.mark.parametrize(
    ("status", "cancellable"),
    [
        (RunStatus.ACCEPTED, True),
        (RunStatus.WAITING_RETRY, True),
        (RunStatus.SUBMITTING, False),  # an intent: its job may be being created
        (RunStatus.RUNNING, False),  # cancel the job instead
        (RunStatus.SUCCEEDED, False),
    ],
)
def test_only_a_run_waiting_for_an_attempt_is_cancelled_in_the_ledger_alone(
    status: RunStatus, cancellable: bool
) -> None:
    waiting = a_run(status, next_retry=RetryPlan(NOW, 2, 0, "capacity"))
    if cancellable:
        cancelled = with_waiting_cancelled(waiting)
        assert (cancelled.status, cancelled.next_retry) == (RunStatus.CANCELLED, None)
    else:
        with pytest.raises(InvalidTransition):
            with_waiting_cancelled(waiting)


def test_a_reopened_run_waits_for_the_operators_attempt_so_a_lost_delivery_is_republished() -> None:
    from shared.adapters.ledger import with_reopened
    from shared.policy.admission import retry_awaited

    plan = RetryPlan(NOW, 2, 0, "operator retry, republished because its delivery was lost")
    failed = a_run(
        RunStatus.FAILED, an_attempt(1, job_name=JOB_1, state="JOB_STATE_FAILED", decision={})
    )

    reopened = with_reopened(failed, plan)

    assert (reopened.status, reopened.next_retry) == (RunStatus.WAITING_RETRY, plan)
    assert retry_awaited(reopened, 2, by_operator=False)  # the reconciler's republished copy
