"""Which retry messages may start or resume an attempt: never a second job beside a live one."""

from __future__ import annotations

import pytest
from run_builders import a_retry_plan, a_run, an_attempt, job_name

from shared.adapters.ledger import INTENT_STATE, Attempt, Run, RunStatus
from shared.policy.admission import retry_awaited


def _attempt(number: int, job: str | None = job_name(1), decided: bool = False) -> Attempt:
    return an_attempt(
        number,
        job_name=job,
        state="JOB_STATE_RUNNING" if job else INTENT_STATE,
        decision={"action": "retry"} if decided else None,
    )


def _run(status: RunStatus, *attempts: Attempt, next_attempt: int | None = None) -> Run:
    plan = a_retry_plan(next_attempt) if next_attempt else None
    return a_run(status, *attempts, next_retry=plan)


@pytest.mark.parametrize(
    ("run", "attempt", "by_operator", "awaited"),
    [
        pytest.param(_run(RunStatus.ACCEPTED), 1, False, True, id="first attempt never claimed"),
        pytest.param(_run(RunStatus.ACCEPTED), 2, False, False, id="accepted: not attempt 2"),
        pytest.param(
            _run(RunStatus.SUBMITTING, _attempt(1, job=None)),
            1,
            False,
            True,
            id="stale intent: the same attempt resumes",
        ),
        pytest.param(
            _run(RunStatus.RUNNING, _attempt(1)), 2, False, False, id="attempt 1 runs: no 2"
        ),
        pytest.param(
            _run(RunStatus.SUBMITTED, _attempt(1)),
            2,
            True,
            False,
            id="not even an operator's beside a live job",
        ),
        pytest.param(
            _run(RunStatus.SUBMITTING, _attempt(1, job=None)),
            2,
            True,
            False,
            id="an intent may be creating its job",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(1, decided=True), next_attempt=2),
            2,
            False,
            True,
            id="the planned retry",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(1, decided=True), next_attempt=2),
            3,
            False,
            False,
            id="not the planned attempt",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, next_attempt=1),
            1,
            False,
            True,
            id="no placement took attempt 1: tried again",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(1, decided=True)),
            2,
            True,
            True,
            id="an operator's grant while waiting",
        ),
        pytest.param(
            _run(RunStatus.FAILED, _attempt(1, decided=True)),
            2,
            True,
            True,
            id="an operator reopens a failed run",
        ),
        pytest.param(
            _run(RunStatus.FAILED, _attempt(1, decided=True)),
            2,
            False,
            False,
            id="a message alone reopens nothing",
        ),
        pytest.param(
            _run(RunStatus.RUNNING, _attempt(1, decided=True), _attempt(2)),
            1,
            False,
            True,
            id="an old attempt: submit_attempt answers duplicate",
        ),
    ],
)
def test_retry_awaited(run: Run, attempt: int, by_operator: bool, awaited: bool) -> None:
    assert retry_awaited(run, attempt, by_operator=by_operator) is awaited
