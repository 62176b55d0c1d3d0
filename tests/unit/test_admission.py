"""What dispatch does with a retry message (``admission.admit_retry``), as a table of runs."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from run_builders import a_retry_plan, a_run, an_attempt

from shared.config.model import FlexStartPlacement, RetryPolicy, Template
from shared.model.runs import INTENT_STATE, Attempt, Run, RunStatus
from shared.policy.admission import RetryVerdict, admit_retry

TEMPLATE = Template(
    name="resnet-a100",
    display_name="tpl-{run_id}",
    job_spec={},
    placements=(
        FlexStartPlacement(max_wait=timedelta(hours=2)),
        FlexStartPlacement(max_wait=timedelta(hours=2), region="us-east4"),
    ),
    retry=RetryPolicy(attempts=3),
)


def _attempt(number: int, job: str | None = "jobs/1", state: str = "JOB_STATE_FAILED") -> Attempt:
    return an_attempt(number, job_name=job, state=state if job else INTENT_STATE)


def _run(
    status: RunStatus, *attempts: Attempt, waits_for: int | None = None, **extra: object
) -> Run:
    plan = a_retry_plan(waits_for) if waits_for else None
    return replace(a_run(status, *attempts, next_retry=plan), **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("run", "template", "attempt", "placement", "verdict"),
    [
        pytest.param(_run(RunStatus.ACCEPTED), TEMPLATE, 1, 0, RetryVerdict.START, id="first"),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(1), waits_for=2),
            TEMPLATE,
            2,
            1,
            RetryVerdict.START,
            id="the planned retry",
        ),
        pytest.param(
            _run(RunStatus.SUBMITTING, _attempt(1, job=None)),
            TEMPLATE,
            1,
            0,
            RetryVerdict.RESUME,
            id="a claimed attempt resumes",
        ),
        pytest.param(
            _run(RunStatus.RUNNING, _attempt(1, state="JOB_STATE_RUNNING")),
            TEMPLATE,
            2,
            0,
            RetryVerdict.NOT_AWAITED,
            id="never a second job beside a live one",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(1), waits_for=2),
            TEMPLATE,
            2,
            2,
            RetryVerdict.REFUSED,
            id="a placement the chain does not have",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(3), waits_for=4),
            TEMPLATE,
            4,
            0,
            RetryVerdict.REFUSED,
            id="over the attempt budget",
        ),
        pytest.param(
            _run(RunStatus.FAILED, _attempt(3), operator_grant=4),
            TEMPLATE,
            4,
            0,
            RetryVerdict.REOPEN,
            id="an operator's grant lifts the budget and reopens an ended run",
        ),
        pytest.param(
            _run(RunStatus.WAITING_RETRY, _attempt(1), waits_for=2),
            None,
            2,
            0,
            RetryVerdict.END_RUN,
            id="a waiting run whose template left the config ends",
        ),
        pytest.param(
            _run(RunStatus.FAILED, _attempt(1)),
            None,
            2,
            0,
            RetryVerdict.NOT_AWAITED,
            id="an ended run whose template left: nothing to do",
        ),
        pytest.param(
            _run(RunStatus.SUBMITTING, _attempt(1, job=None)),
            None,
            1,
            0,
            RetryVerdict.NOT_AWAITED,
            id="a claimed attempt whose template left is the job-state function's",
        ),
    ],
)
def test_admit_retry(
    run: Run, template: Template | None, attempt: int, placement: int, verdict: RetryVerdict
) -> None:
    admission = admit_retry(run, template, attempt, placement)
    assert admission.verdict is verdict
    needs_reason = verdict in {
        RetryVerdict.NOT_AWAITED,
        RetryVerdict.REFUSED,
        RetryVerdict.END_RUN,
    }
    assert bool(admission.reason) is needs_reason
