"""A sweep's and a pipeline's ends classified into the same classes as a CustomJob's.

Each job is built as Vertex AI returns it (a ``HyperparameterTuningJob``, a ``TrainingPipeline``)
and read through its view (``policy.job_views.view_of``), as the state machine reads it. A
sweep's error embeds the failing trial's own error (the emulator's wording, docs/
vertex-ai-emulator.md: "N of M trials failed. Trial 7: <the trial's error>"), so the rows that
read a CustomJob's error read the trial's: user code, capacity, quota, infrastructure.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob, HyperparameterTuningJob, TrainingPipeline

from shared.config.model import FailureClass
from shared.model.runs import CancelReason
from shared.policy.classify import classify
from shared.policy.job_views import view_of

CREATED = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
NAME = "projects/123456789012/locations/us-central1/{collection}/1000000000000000001"
USER_CODE = (
    "The replica workerpool0-0 exited with a non-zero status of 1. To find out more about why "
    "your job exited please check the logs: https://console.cloud.google.com/logs/viewer"
)
STOCKOUT = (
    "Resources are insufficient in region: us-central1. Please try a different region. "
    "If you use K80, please consider using P100 or V100 instead."
)
WAIT_EXPIRED = (
    "The job could not be scheduled within its max wait duration of 2h. Resources are "
    "insufficient in region: us-central1. Please try a different region, or a longer "
    "scheduling.max_wait_duration."
)
QUOTA = (
    "The following quota metrics exceed quota limits: "
    "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"
)


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def sweep(state: str, code: int = 0, message: str = "", **times: datetime) -> CustomJob:
    body: dict[str, Any] = {
        "name": NAME.format(collection="hyperparameterTuningJobs"),
        "displayName": "resnet-sweep",
        "state": state,
        "maxTrialCount": 20,
        "parallelTrialCount": 4,
        "createTime": _stamp(CREATED),
        "trialJobSpec": {
            "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "7200s"},
            "workerPoolSpecs": [{"machineSpec": {"machineType": "a2-highgpu-1g"}}],
        },
    }
    if code or message:
        body["error"] = {"code": code, "message": message}
    body.update({key: _stamp(value) for key, value in times.items()})
    return view_of(HyperparameterTuningJob.from_json(json.dumps(body)))


def pipeline(state: str, code: int = 0, message: str = "", **times: datetime) -> CustomJob:
    body: dict[str, Any] = {
        "name": NAME.format(collection="trainingPipelines"),
        "displayName": "resnet-pipeline",
        "state": state,
        "createTime": _stamp(CREATED),
        "trainingTaskDefinition": "gs://google-cloud-aiplatform/schema/trainingjob/definition/"
        "custom_task_1.0.0.yaml",
        "trainingTaskInputs": {
            "workerPoolSpecs": [{"machineSpec": {"machineType": "a2-highgpu-1g"}}],
            "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "7200s"},
        },
    }
    if code or message:
        body["error"] = {"code": code, "message": message}
    body.update({key: _stamp(value) for key, value in times.items()})
    return view_of(TrainingPipeline.from_json(json.dumps(body)))


def trials_failed(trial_error: str, failed: int = 3, of: int = 20, trial: int = 7) -> str:
    return f"{failed} of {of} trials failed. Trial {trial}: {trial_error}"


STARTED = {"startTime": CREATED + timedelta(minutes=5)}
ENDED = {**STARTED, "endTime": CREATED + timedelta(hours=3)}


@pytest.mark.parametrize(
    ("job", "succeeded", "failure"),
    [
        pytest.param(sweep("JOB_STATE_SUCCEEDED", **ENDED), True, None, id="sweep-succeeded"),
        pytest.param(
            sweep("JOB_STATE_FAILED", 3, trials_failed(USER_CODE), **ENDED),
            False,
            FailureClass.USER_CODE,
            id="sweep-trials-failed-in-user-code",
        ),
        pytest.param(
            sweep("JOB_STATE_FAILED", 8, trials_failed(STOCKOUT, failed=1), **ENDED),
            False,
            FailureClass.CAPACITY,
            id="sweep-a-trial-stocked-out",
        ),
        pytest.param(
            sweep("JOB_STATE_FAILED", 8, trials_failed(WAIT_EXPIRED, failed=1), **ENDED),
            False,
            FailureClass.CAPACITY,
            id="sweep-a-trials-flex-start-wait-ran-out",
        ),
        pytest.param(
            sweep("JOB_STATE_FAILED", 8, trials_failed(QUOTA, failed=1), **ENDED),
            False,
            FailureClass.QUOTA,
            id="sweep-a-trial-over-quota",
        ),
        pytest.param(
            sweep(
                "JOB_STATE_FAILED",
                13,
                trials_failed("Internal error occurred for the current attempt."),
                **ENDED,
            ),
            False,
            FailureClass.INFRASTRUCTURE,
            id="sweep-trials-internal-error",
        ),
        pytest.param(
            sweep("JOB_STATE_CANCELLED", 1, "HyperparameterTuningJob was cancelled.", **ENDED),
            False,
            FailureClass.CANCELLED,
            id="sweep-cancelled",
        ),
        pytest.param(
            sweep("JOB_STATE_FAILED", 0, "3 of 20 trials failed.", **ENDED),
            False,
            FailureClass.UNKNOWN,
            id="sweep-without-the-trials-error-is-unknown",
        ),
        pytest.param(
            pipeline("PIPELINE_STATE_SUCCEEDED", **ENDED), True, None, id="pipeline-succeeded"
        ),
        pytest.param(
            pipeline("PIPELINE_STATE_FAILED", 3, USER_CODE, **ENDED),
            False,
            FailureClass.USER_CODE,
            id="pipeline-training-task-failed-in-user-code",
        ),
        pytest.param(
            pipeline("PIPELINE_STATE_FAILED", 8, STOCKOUT, **ENDED),
            False,
            FailureClass.CAPACITY,
            id="pipeline-stockout",
        ),
        pytest.param(
            pipeline(
                "PIPELINE_STATE_FAILED",
                8,
                "Resources are insufficient in persistent resource projects/p/locations/"
                "us-central1/persistentResources/a100-pool: the job needs 8 GPUs but only 0 are "
                "free in its resource pools.",
                **ENDED,
            ),
            False,
            FailureClass.CAPACITY,
            id="pipeline-persistent-resource-full",
        ),
        pytest.param(
            pipeline("PIPELINE_STATE_CANCELLED", 1, "TrainingPipeline was cancelled.", **ENDED),
            False,
            FailureClass.CANCELLED,
            id="pipeline-cancelled",
        ),
    ],
)
def test_a_sweep_or_pipeline_ends_in_the_classes_of_a_custom_job(
    job: CustomJob, succeeded: bool, failure: FailureClass | None
) -> None:
    verdict = classify(job)

    assert (verdict.succeeded, verdict.failure) == (succeeded, failure)
    assert verdict.state.startswith("JOB_STATE_")  # a pipeline's state as a job state


@pytest.mark.parametrize("make", [sweep, pipeline])
def test_a_flex_start_wait_that_ran_out_is_capacity_for_every_kind(make: Any) -> None:
    # Never started, failed past its 2 h max wait (read from the trial job / training task).
    state = "JOB_STATE_FAILED" if make is sweep else "PIPELINE_STATE_FAILED"
    job = make(state, 9, "an undocumented text", endTime=CREATED + timedelta(hours=2, minutes=1))

    assert classify(job, max_wait=timedelta(hours=2)).failure is FailureClass.CAPACITY
    assert classify(job, max_wait=timedelta(hours=3)).failure is FailureClass.INVALID_SPEC


@pytest.mark.parametrize("make", [sweep, pipeline])
def test_the_queue_watchdogs_cancel_is_capacity_for_every_kind(make: Any) -> None:
    state = "JOB_STATE_CANCELLED" if make is sweep else "PIPELINE_STATE_CANCELLED"
    job = make(state, 1, "cancelled", endTime=CREATED + timedelta(hours=3))

    watchdog = classify(job, cancel_requested=True, cancel_reason=CancelReason.QUEUE_TIMEOUT)
    operator = classify(job, cancel_requested=True)

    assert watchdog.failure is FailureClass.CAPACITY
    assert operator.failure is FailureClass.CANCELLED
