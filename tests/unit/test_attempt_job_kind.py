"""The kind of job an attempt creates (``Attempt.job_kind``): stored, defaulted, refused."""

from __future__ import annotations

from dataclasses import replace

import pytest
from run_builders import a_run, an_attempt

from shared.model.job_kinds import JobKind
from shared.model.runs import (
    RunStatus,
    UnreadableRun,
    job_ids,
    run_from_document,
    run_to_document,
)


@pytest.mark.parametrize("kind", list(JobKind))
def test_every_kind_round_trips_through_the_ledger_document(kind: JobKind) -> None:
    run = a_run(RunStatus.SUBMITTING, replace(an_attempt(1), job_kind=kind))

    document = run_to_document(run)

    assert document["attempts"][0]["job_kind"] == kind.value
    assert run_from_document(document).attempts[0].job_kind is kind


def test_an_attempt_written_before_kinds_existed_is_a_custom_job() -> None:
    document = run_to_document(a_run(RunStatus.SUBMITTING, an_attempt(1)))
    del document["attempts"][0]["job_kind"]

    assert run_from_document(document).attempts[0].job_kind is JobKind.CUSTOM_JOB


def test_an_unknown_stored_kind_is_a_clear_error_not_a_custom_job() -> None:
    document = run_to_document(a_run(RunStatus.SUBMITTING, an_attempt(1)))
    document["attempts"][0]["job_kind"] = "batch_prediction_job"

    with pytest.raises(UnreadableRun, match=r"attempt 1 has job_kind 'batch_prediction_job'"):
        run_from_document(document)


def test_job_ids_keep_every_kinds_numeric_id() -> None:
    parent = "projects/p/locations/us-central1"
    first = replace(
        an_attempt(1),
        job_name=f"{parent}/hyperparameterTuningJobs/11",
        job_kind=JobKind.HYPERPARAMETER_TUNING_JOB,
        state="JOB_STATE_FAILED",
    )
    second = replace(
        an_attempt(2),
        job_name=f"{parent}/trainingPipelines/12",
        job_kind=JobKind.TRAINING_PIPELINE,
        state="JOB_STATE_RUNNING",
    )

    assert job_ids(a_run(RunStatus.SUBMITTED, first, second)) == ["11", "12"]
