"""Resume: every attempt of a run shares its output directory, and a retry is told where the last
attempt that ran left its checkpoints (docs/architecture.md, "Resume").

Tables: which earlier attempt a new one resumes from (``policy.run_history``); the env
``VERTEX_DISPATCH_PREVIOUS_OUTPUT`` and the ``{previous_output}`` placeholder in the job that runs,
for each kind (a CustomJob, a sweep's trial job, a pipeline's training task). The load error for
a per-attempt base output directory: tests/unit/config/test_output_dir.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.config.model import (
    FlexStartPlacement,
    HyperparameterTuning,
    MetricGoal,
    ParameterType,
    Template,
    TrainingPipelineSpec,
    TuningParameter,
)
from shared.config.placeholders import RENDER_FIELDS
from shared.model.jobstates import JobStateName
from shared.model.runs import CREATED_EVENT, Attempt, AttemptEvent
from shared.policy import run_history
from shared.policy.job_views import view_of
from shared.policy.jobspec import PREVIOUS_OUTPUT_ENV, RenderedJob, render_job

RUN_ID = "r-3f2a9c0d1e4b5a6978877665"
OUT = f"gs://acme-out/{RUN_ID}/"
T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
IMAGE = "us-docker.pkg.dev/acme-ml/train/resnet:1.4"
MACHINE = {
    "machineType": "a2-highgpu-1g",
    "acceleratorType": "NVIDIA_TESLA_A100",
    "acceleratorCount": 1,
}
SPEC: dict[str, Any] = {
    "workerPoolSpecs": [
        {
            "machineSpec": MACHINE,
            "replicaCount": 1,
            "containerSpec": {
                "imageUri": IMAGE,
                "args": ["--resume-from={previous_output}", "--out={run_id}"],
                # A template's own value of the name is replaced: the run's history decides it.
                "env": [{"name": PREVIOUS_OUTPUT_ENV, "value": "forged"}],
            },
        },
        {},  # a skipped pool runs nothing: no program to tell
        {
            "machineSpec": MACHINE,
            "replicaCount": 2,
            "pythonPackageSpec": {
                "executorImageUri": IMAGE,
                "packageUris": ["gs://acme-pkgs/trainer.tar.gz"],
                "pythonModule": "trainer.task",
                "env": [{"name": "EPOCHS", "value": "90"}],
            },
        },
    ],
    "baseOutputDirectory": {"outputUriPrefix": "gs://acme-out/{run_id}/"},
}
SWEEP = HyperparameterTuning(
    metrics=(("accuracy", MetricGoal.MAXIMIZE),),
    parameters=(TuningParameter("lr", ParameterType.DOUBLE, min=0.01, max=0.1),),
    max_trials=4,
)
KINDS = {
    "custom_job": {},
    "sweep": {"hyperparameter_tuning": SWEEP},
    "pipeline": {"training_pipeline": TrainingPipelineSpec()},
}


def _attempt(number: int, state: str, **fields: Any) -> Attempt:
    return Attempt(
        number=number,
        placement={"flex_start": {"max_wait": "3600s"}},
        region="us-central1",
        parent="projects/acme-ml/locations/us-central1",
        intent_at=T0,
        state=state,
        output_dir=fields.pop("output_dir", OUT),
        **fields,
    )


QUEUED, RUNNING, FAILED, SUCCEEDED = (
    JobStateName.QUEUED,
    JobStateName.RUNNING,
    JobStateName.FAILED,
    JobStateName.SUCCEEDED,
)
RAN = {"events": (AttemptEvent(CREATED_EVENT, T0), AttemptEvent(RUNNING, T0))}


@pytest.mark.parametrize(
    ("attempts", "number", "expected"),
    [
        pytest.param([], 1, None, id="first-attempt"),
        pytest.param([_attempt(1, FAILED)], 2, None, id="never-ran-expired-wait"),
        pytest.param(
            [_attempt(1, FAILED, started_at=T0)], 2, OUT, id="ran-then-preempted-start-recorded"
        ),
        pytest.param([_attempt(1, FAILED, **RAN)], 2, OUT, id="ran-per-its-events"),
        pytest.param([_attempt(1, RUNNING)], 2, OUT, id="running-now"),
        pytest.param(
            [_attempt(1, FAILED, started_at=T0, output_dir="gs://a/1/"), _attempt(2, FAILED)],
            3,
            "gs://a/1/",
            id="the-latest-that-ran-not-the-latest",
        ),
        pytest.param(
            [
                _attempt(1, FAILED, started_at=T0, output_dir="gs://a/1/"),
                _attempt(2, FAILED, started_at=T0 + timedelta(hours=1), output_dir="gs://a/2/"),
            ],
            3,
            "gs://a/2/",
            id="the-latest-of-several-that-ran",
        ),
        pytest.param(
            [_attempt(1, FAILED, started_at=T0), _attempt(2, QUEUED, started_at=T0)],
            2,
            OUT,
            id="only-earlier-attempts-count",
        ),
        pytest.param(
            [_attempt(1, FAILED, started_at=T0, output_dir=None)],
            2,
            None,
            id="no-output-directory-recorded",
        ),
    ],
)
def test_a_retry_resumes_from_the_latest_earlier_attempt_that_started(
    attempts: list[Attempt], number: int, expected: str | None
) -> None:
    assert run_history.previous_output(attempts, number) == expected


@pytest.mark.parametrize(
    ("attempt", "started"),
    [
        (_attempt(1, QUEUED), False),
        (_attempt(1, JobStateName.PENDING), False),
        (_attempt(1, FAILED), False),
        (_attempt(1, JobStateName.CANCELLED), False),
        (_attempt(1, RUNNING), True),
        (_attempt(1, SUCCEEDED), True),
        (_attempt(1, FAILED, started_at=T0), True),
        (_attempt(1, FAILED, **RAN), True),
        (_attempt(1, FAILED, events=(AttemptEvent(QUEUED, T0), AttemptEvent(FAILED, T0))), False),
    ],
)
def test_what_counts_as_started(attempt: Attempt, started: bool) -> None:
    assert run_history.started(attempt) is started


def _render(kind: str, previous_output: str | None) -> RenderedJob:
    template = Template(
        name="resnet",
        display_name="resnet-{run_id}",
        job_spec=SPEC,
        placements=(FlexStartPlacement(max_wait=timedelta(hours=2)),),
        timeout=timedelta(hours=6),
        **KINDS[kind],
    )
    return render_job(
        template,
        {},
        template.placements[0],
        project="acme-ml",
        default_region="us-central1",
        run_id=RUN_ID,
        attempt=2,
        previous_output=previous_output,
    )


def _programs(rendered: RenderedJob) -> list[dict[str, Any]]:
    """The program of every pool of the job that runs, read back from what is created (a
    sweep's trial job spec, a pipeline's training task inputs)."""
    job = view_of(rendered.resource)
    body = json.loads(type(job).to_json(job))
    pools = body["jobSpec"]["workerPoolSpecs"]
    return [pool.get("containerSpec") or pool.get("pythonPackageSpec") or {} for pool in pools]


def _env(program: dict[str, Any]) -> dict[str, str]:
    return {variable["name"]: variable.get("value", "") for variable in program.get("env", [])}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_retry_of_a_run_that_ran_tells_every_program_where_to_resume(kind: str) -> None:
    rendered = _render(kind, OUT)
    container, skipped, package = _programs(rendered)
    assert skipped == {}
    assert _env(container) == {PREVIOUS_OUTPUT_ENV: OUT}
    assert _env(package) == {"EPOCHS": "90", PREVIOUS_OUTPUT_ENV: OUT}
    assert container["args"] == [f"--resume-from={OUT}", f"--out={RUN_ID}"]
    job = view_of(rendered.resource)
    assert job.job_spec.base_output_directory.output_uri_prefix == OUT


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_first_attempt_gets_an_empty_placeholder_and_no_env_of_ours(kind: str) -> None:
    container, _, package = _programs(_render(kind, None))
    assert _env(container) == {PREVIOUS_OUTPUT_ENV: "forged"}  # the template's, left as written
    assert _env(package) == {"EPOCHS": "90"}
    assert container["args"] == ["--resume-from=", f"--out={RUN_ID}"]


def test_previous_output_is_a_built_in_a_request_cannot_set() -> None:
    assert "previous_output" in RENDER_FIELDS
