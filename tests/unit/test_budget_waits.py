"""A run WAITING_BUDGET: its transition, the retry the reconciler publishes for it, the admission
of that retry, its cancel, and what ``status`` shows of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.model.runs import (
    Attempt,
    InvalidTransition,
    RetryPlan,
    Run,
    RunStatus,
    with_budget_wait,
    with_retry_published,
    with_waiting_cancelled,
)
from shared.policy.admission import retry_awaited
from shared.policy.due_retries import RetryCause, due_retry
from tooling import status_table

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
PLAN = RetryPlan(NOW + timedelta(minutes=10), 2, 1, "budget: template t's budget: 90.0 spent")


def _run(status: RunStatus, *attempts: Attempt, plan: RetryPlan | None = None) -> Run:
    return Run(
        "r-" + "a" * 24, "k", "route", "t", {}, status=status, attempts=attempts, next_retry=plan
    )


ENDED = Attempt(1, {}, "us-central1", "p", NOW - timedelta(hours=3), job_name="j", state="FAILED")


@pytest.mark.parametrize(
    "status", [RunStatus.ACCEPTED, RunStatus.WAITING_RETRY, RunStatus.WAITING_BUDGET]
)
def test_a_waiting_or_new_run_may_wait_for_a_budget(status: RunStatus) -> None:
    waiting = with_budget_wait(_run(status, ENDED), PLAN)
    assert (waiting.status, waiting.next_retry) == (RunStatus.WAITING_BUDGET, PLAN)


@pytest.mark.parametrize(
    "status", [RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.RUNNING, RunStatus.SUBMITTING]
)
def test_a_live_or_final_run_cannot_wait_for_a_budget(status: RunStatus) -> None:
    with pytest.raises(InvalidTransition):
        with_budget_wait(_run(status, ENDED), PLAN)


@pytest.mark.parametrize(
    ("now", "due"),
    [(NOW, False), (PLAN.at, True), (PLAN.at + timedelta(hours=1), True)],
)
def test_the_reconciler_publishes_a_budget_waits_retry_when_due(now: datetime, due: bool) -> None:
    run = _run(RunStatus.WAITING_BUDGET, ENDED, plan=PLAN)
    found = due_retry(run, None, now)
    assert (found is not None) is due
    if found is not None:
        assert (found.plan, found.cause) == (PLAN, RetryCause.PLANNED)


@pytest.mark.parametrize(("attempt", "awaited"), [(2, True), (3, False), (1, True)])
def test_dispatch_admits_the_retry_a_budget_wait_planned(attempt: int, awaited: bool) -> None:
    run = _run(RunStatus.WAITING_BUDGET, ENDED, plan=PLAN)
    assert retry_awaited(run, attempt, by_operator=False) is awaited


def test_a_published_budget_retry_waits_to_be_republished_and_the_run_can_be_cancelled() -> None:
    run = _run(RunStatus.WAITING_BUDGET, ENDED, plan=PLAN)
    later = NOW + timedelta(minutes=20)
    assert with_retry_published(run, later).next_retry == RetryPlan(
        later, PLAN.attempt, PLAN.placement_index, PLAN.reason
    )
    assert with_waiting_cancelled(run).status is RunStatus.CANCELLED


def test_status_shows_a_budget_wait_under_its_run() -> None:
    waiting = _run(RunStatus.WAITING_BUDGET, ENDED, plan=PLAN)
    lines = status_table([waiting], NOW).splitlines()
    assert "WAITING_BUDGET" in lines[1]
    assert "#2 in 600s (budget)" in lines[1]
    assert lines[2] == "  waits for its GPU-hour budget: template t's budget: 90.0 spent"
    assert lines[3].startswith(f"  attempt 2 is retried from {PLAN.at.isoformat()} (then every")
    assert lines[-1] == "1 run, 1 waiting for a GPU-hour budget"
