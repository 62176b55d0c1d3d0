"""The completion message of each kind: its kind, and what a sweep or a pipeline produced."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from run_builders import JOB_PARENT, a_run, an_attempt

from shared.adapters.completions import SCHEMA, completion_message
from shared.model.job_kinds import JobKind
from shared.model.runs import RunStatus

SWEEP_RESULT = {
    "best_trial": {"id": "7", "metrics": {"accuracy": 0.93}, "parameters": {"lr": 0.01}},
    "trials": {"succeeded": 17, "infeasible": 0},
}
PIPELINE_RESULT = {"model": f"{JOB_PARENT}/models/789", "model_version": "1"}


def _succeeded(kind: JobKind) -> tuple[Any, Any]:
    attempt = replace(
        an_attempt(
            1,
            job_name=f"{JOB_PARENT}/{kind.collection}/42",
            state="JOB_STATE_SUCCEEDED",
            decision={"output_directory": "gs://out/r/"},
        ),
        job_kind=kind,
    )
    return a_run(RunStatus.SUCCEEDED, attempt), attempt


@pytest.mark.parametrize(
    ("kind", "result", "added"),
    [
        (JobKind.CUSTOM_JOB, None, {}),
        (JobKind.HYPERPARAMETER_TUNING_JOB, SWEEP_RESULT, SWEEP_RESULT),
        (JobKind.TRAINING_PIPELINE, PIPELINE_RESULT, PIPELINE_RESULT),
        # Nothing produced (no trial succeeded, no model uploaded): the kind's keys are null.
        (JobKind.HYPERPARAMETER_TUNING_JOB, None, {"best_trial": None, "trials": None}),
        (JobKind.TRAINING_PIPELINE, None, {"model": None, "model_version": None}),
    ],
)
def test_the_message_carries_the_kind_and_the_kinds_result(
    kind: JobKind, result: dict[str, Any] | None, added: dict[str, Any]
) -> None:
    run, attempt = _succeeded(kind)

    message = completion_message(run, attempt, result)

    assert message == {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "run_key": run.run_key,
        "template": run.template,
        "job_name": f"{JOB_PARENT}/{kind.collection}/42",
        "output_directory": "gs://out/r/",
        "state": "JOB_STATE_SUCCEEDED",
        "job_kind": kind.value,
        **added,
    }


def test_a_custom_jobs_message_ignores_a_result() -> None:
    run, attempt = _succeeded(JobKind.CUSTOM_JOB)
    assert "model" not in completion_message(run, attempt, PIPELINE_RESULT)
