"""The Vertex adapter's kind-generic calls: each kind reaches its own service's methods, and
what cannot be a job's name or a job's message is refused before any call."""

from __future__ import annotations

import pytest

from shared.adapters import vertex
from shared.aiplatform import (
    CustomJob,
    HyperparameterTuningJob,
    JobServiceClient,
    Model,
    PipelineServiceClient,
    TrainingPipeline,
)
from shared.model.job_kinds import JobKind

SERVICE_OF = {
    JobKind.CUSTOM_JOB: JobServiceClient,
    JobKind.HYPERPARAMETER_TUNING_JOB: JobServiceClient,
    JobKind.TRAINING_PIPELINE: PipelineServiceClient,
}


@pytest.mark.parametrize("kind", list(JobKind))
@pytest.mark.parametrize("verb", ["Create", "Get", "List", "Cancel"])
def test_every_kinds_calls_exist_on_its_service_and_name_their_permission(
    kind: JobKind, verb: str
) -> None:
    calls = vertex._CALLS[kind]
    method = f"{verb.lower()}_{calls.listed if verb == 'List' else calls.snake}"
    rpc = calls.rpc(verb, kind)

    assert callable(getattr(SERVICE_OF[kind], method))
    assert vertex._PERMISSION_BY_METHOD[rpc] == (f"aiplatform.{kind.collection}.{verb.lower()}")


@pytest.mark.parametrize(
    ("job", "kind"),
    [
        (CustomJob(), JobKind.CUSTOM_JOB),
        (HyperparameterTuningJob(), JobKind.HYPERPARAMETER_TUNING_JOB),
        (TrainingPipeline(), JobKind.TRAINING_PIPELINE),
    ],
)
def test_a_jobs_kind_is_its_messages_type(job: object, kind: JobKind) -> None:
    assert vertex.kind_of_job(job) is kind  # type: ignore[arg-type]


def test_a_message_of_no_job_kind_is_refused() -> None:
    with pytest.raises(vertex.VertexRejected, match="Model is not a job"):
        vertex.kind_of_job(Model())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call", [vertex.get_job, vertex.cancel_job, vertex.job_result], ids=lambda c: c.__name__
)
def test_a_name_of_no_training_job_is_refused_before_any_call(call: object) -> None:
    name = "projects/p/locations/us-central1/batchPredictionJobs/7"
    with pytest.raises(vertex.VertexRejected, match="not the name of a Vertex AI training job"):
        call(name)  # type: ignore[operator]


def test_a_custom_jobs_result_is_none_without_a_call() -> None:
    # No emulator and no credentials here: a call would fail, so None proves none was made.
    assert vertex.job_result("projects/p/locations/us-central1/customJobs/7") is None


def test_a_label_filter_names_the_kinds_list_method() -> None:
    with pytest.raises(vertex.VertexRejected, match="ListTrainingPipelines filter"):
        vertex.find_jobs_by_label(
            "projects/p/locations/us-central1", "vd-run", "Bad Value", JobKind.TRAINING_PIPELINE
        )
