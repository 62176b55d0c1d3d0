"""shared.adapters.vertex's kind-generic calls against the Vertex AI emulator, over gRPC and REST:
a HyperparameterTuningJob (JobService) and a TrainingPipeline (PipelineService) created, read,
listed, found by label and cancelled through the real clients, each returned as its view."""

from __future__ import annotations

import json

import pytest
from adapter_test_support import PARENT, REGION, VertexAdmin
from google.cloud import aiplatform_v1

from shared.adapters import clients, vertex
from shared.model.errors import BackendUnavailable, PermanentError
from shared.model.job_kinds import JobKind, kind_of_job_name
from shared.policy.job_views import AnyJob

pytestmark = pytest.mark.integration

RUN_LABEL = "vd-run"
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
LIVE_STATES = (
    aiplatform_v1.JobState.JOB_STATE_QUEUED,
    aiplatform_v1.JobState.JOB_STATE_PENDING,
    aiplatform_v1.JobState.JOB_STATE_RUNNING,
)
CANCEL_STATES = (
    aiplatform_v1.JobState.JOB_STATE_CANCELLING,
    aiplatform_v1.JobState.JOB_STATE_CANCELLED,
)


def trial_job(run_id: str) -> aiplatform_v1.CustomJob:
    """The seed page's FLEX_START job (a2-highgpu-1g, one A100): a trial, a training task."""
    return aiplatform_v1.CustomJob.from_json(
        """{
          "displayName": "resnet-flex",
          "labels": {"vd-run": "RUN", "vd-attempt": "1", "vd-template": "resnet-kinds"},
          "jobSpec": {
            "workerPoolSpecs": [{
              "machineSpec": {"machineType": "a2-highgpu-1g",
                              "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1},
              "replicaCount": "1",
              "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
              "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4",
                                "args": ["--epochs=10"]}
            }],
            "scheduling": {"timeout": "7200s", "strategy": "FLEX_START",
                           "maxWaitDuration": "1800s"}
          }
        }""".replace("RUN", run_id)
    )


def sweep(run_id: str) -> aiplatform_v1.HyperparameterTuningJob:
    trial = trial_job(run_id)
    study = aiplatform_v1.StudySpec
    return aiplatform_v1.HyperparameterTuningJob(
        display_name="resnet-sweep",
        labels=dict(trial.labels),
        study_spec=study(
            metrics=[
                study.MetricSpec(metric_id="accuracy", goal=study.MetricSpec.GoalType.MAXIMIZE)
            ],
            parameters=[
                study.ParameterSpec(
                    parameter_id="learning_rate",
                    double_value_spec=study.ParameterSpec.DoubleValueSpec(
                        min_value=0.0001, max_value=0.1
                    ),
                    scale_type=study.ParameterSpec.ScaleType.UNIT_LOG_SCALE,
                )
            ],
        ),
        max_trial_count=4,
        parallel_trial_count=2,
        trial_job_spec=trial.job_spec,
    )


def pipeline(run_id: str) -> aiplatform_v1.TrainingPipeline:
    trial = trial_job(run_id)
    return aiplatform_v1.TrainingPipeline(
        display_name="resnet-pipeline",
        labels=dict(trial.labels),
        training_task_definition=CUSTOM_TASK,
        training_task_inputs=json.loads(aiplatform_v1.CustomJobSpec.to_json(trial.job_spec)),
        model_to_upload=aiplatform_v1.Model(
            display_name="resnet",
            artifact_uri="gs://acme-runs/resnet/model/",
            container_spec=aiplatform_v1.ModelContainerSpec(
                image_uri="us-docker.pkg.dev/acme-ml/train/resnet-serve:1.4"
            ),
        ),
    )


MAKERS = {JobKind.HYPERPARAMETER_TUNING_JOB: sweep, JobKind.TRAINING_PIPELINE: pipeline}
NEW_KINDS = list(MAKERS)


def a_job(kind: JobKind, run_id: str) -> AnyJob:
    return MAKERS[kind](run_id)


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_create_returns_the_view_of_the_job_of_its_kind(
    vertex_transport: str, kind: JobKind
) -> None:
    created = vertex.create_job(PARENT, a_job(kind, "r-aaaaaaaaaaaaaaaaaaaaaaaa"))

    assert kind_of_job_name(created.name) is kind
    assert isinstance(created, aiplatform_v1.CustomJob)
    assert created.labels["vd-run"] == "r-aaaaaaaaaaaaaaaaaaaaaaaa"
    assert created.state in LIVE_STATES
    # The view's spec is the job that runs: the trial job / the training task, FLEX_START.
    scheduling = created.job_spec.scheduling
    assert scheduling.strategy == aiplatform_v1.Scheduling.Strategy.FLEX_START
    assert created.job_spec.worker_pool_specs[0].machine_spec.machine_type == "a2-highgpu-1g"
    read = vertex.get_job(created.name)
    assert (read.name, read.labels, read.job_spec) == (
        created.name,
        created.labels,
        created.job_spec,
    )


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_find_by_label_finds_only_the_jobs_of_the_kind_asked_for(
    vertex_transport: str, kind: JobKind
) -> None:
    run_id = "r-bbbbbbbbbbbbbbbbbbbbbbbb"
    created = vertex.create_job(PARENT, a_job(kind, run_id))
    # Same labels, another kind (a pipeline's backing CustomJob carries them on the service).
    custom = vertex.create_job(PARENT, trial_job(run_id))

    found = vertex.find_jobs_by_label(PARENT, RUN_LABEL, run_id, kind=kind)

    assert [job.name for job in found] == [created.name]
    assert [job.name for job in vertex.find_jobs_by_label(PARENT, RUN_LABEL, run_id)] == [
        custom.name
    ]


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_list_jobs_yields_one_list_of_views_per_page(vertex_transport: str, kind: JobKind) -> None:
    for index in range(5):
        vertex.create_job(PARENT, a_job(kind, f"r-page{index}"))

    pages = list(
        vertex.list_jobs(PARENT, kind, filter='labels.vd-template="resnet-kinds"', page_size=2)
    )

    assert [len(page) for page in pages] == [2, 2, 1]
    assert all(kind_of_job_name(job.name) is kind for page in pages for job in page)


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_cancel_job_moves_the_job_towards_cancelled(vertex_transport: str, kind: JobKind) -> None:
    created = vertex.create_job(PARENT, a_job(kind, "r-cccccccccccccccccccccccc"))

    vertex.cancel_job(created.name)

    assert vertex.get_job(created.name).state in CANCEL_STATES


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_a_missing_job_of_a_kind_is_not_found(vertex_transport: str, kind: JobKind) -> None:
    name = f"{PARENT}/{kind.collection}/999999"
    with pytest.raises(vertex.VertexNotFound, match=kind.collection):
        vertex.get_job(name)


def test_a_finished_sweeps_result_is_its_best_trial(
    vertex_transport: str, vertex_admin: VertexAdmin
) -> None:
    created = vertex.create_job(PARENT, sweep("r-dddddddddddddddddddddddd"))

    vertex_admin.call(
        "POST", "clock:advance", {"seconds": 6 * 3600}
    )  # 4 trials of <= 2h, 2 at once

    assert vertex.get_job(created.name).state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    result = vertex.job_result(created.name)
    assert result is not None
    assert result["trials"] == {"succeeded": 4, "infeasible": 0}
    best = result["best_trial"]
    assert set(best["metrics"]) == {"accuracy"} and set(best["parameters"]) == {"learning_rate"}
    # The best is the highest accuracy among the trials, as the service reported them.
    raw = clients.job_service_client(REGION).get_hyperparameter_tuning_job(name=created.name)
    accuracies = {t.id: t.final_measurement.metrics[0].value for t in raw.trials}
    assert best["id"] == max(accuracies, key=lambda trial_id: accuracies[trial_id])


def test_a_finished_pipelines_result_is_its_uploaded_model(
    vertex_transport: str, vertex_admin: VertexAdmin
) -> None:
    created = vertex.create_job(PARENT, pipeline("r-dddddddddddddddddddddddd"))
    assert vertex.job_result(created.name) is None  # nothing uploaded yet

    vertex_admin.call("POST", "clock:advance", {"seconds": 3 * 3600})

    assert vertex.get_job(created.name).state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    result = vertex.job_result(created.name)
    assert result is not None
    assert result["model"].startswith("projects/123456789012/locations/us-central1/models/")
    assert result["model_version"]


def test_a_custom_jobs_result_is_none(vertex_transport: str) -> None:
    created = vertex.create_job(PARENT, trial_job("r-dddddddddddddddddddddddd"))
    assert vertex.job_result(created.name) is None


@pytest.mark.parametrize(
    ("kind", "verb", "permission"),
    [
        (JobKind.HYPERPARAMETER_TUNING_JOB, "Create", "aiplatform.hyperparameterTuningJobs.create"),
        (JobKind.TRAINING_PIPELINE, "Create", "aiplatform.trainingPipelines.create"),
        (JobKind.HYPERPARAMETER_TUNING_JOB, "Get", "aiplatform.hyperparameterTuningJobs.get"),
        (JobKind.TRAINING_PIPELINE, "Cancel", "aiplatform.trainingPipelines.cancel"),
    ],
)
def test_permission_denied_names_the_kinds_permission(
    vertex_transport: str, vertex_admin: VertexAdmin, kind: JobKind, verb: str, permission: str
) -> None:
    created = vertex.create_job(PARENT, a_job(kind, "r-eeeeeeeeeeeeeeeeeeeeeeee"))
    method = f"{verb}{kind.resource}"
    vertex_admin.add_fault(method=method, code="PERMISSION_DENIED", count=1)
    call = {
        "Create": lambda: vertex.create_job(PARENT, a_job(kind, "r-eeeeeeeeeeeeeeeeeeeeeeee")),
        "Get": lambda: vertex.get_job(created.name),
        "Cancel": lambda: vertex.cancel_job(created.name),
    }[verb]

    with pytest.raises(PermanentError, match=rf"{permission}.*roles/aiplatform\.user"):
        call()


@pytest.mark.parametrize("kind", NEW_KINDS)
@pytest.mark.parametrize(
    ("code", "message", "expected_error"),
    [
        (
            "RESOURCE_EXHAUSTED",
            "The following quota metrics exceed quota limits: "
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus",
            vertex.QuotaExceeded,
        ),
        (
            "INVALID_ARGUMENT",
            "Accelerator type NVIDIA_TESLA_A100 is not supported in location us-central1.",
            vertex.AcceleratorNotOffered,
        ),
        ("UNAVAILABLE", "The service is currently unavailable.", BackendUnavailable),
        ("INTERNAL", "Internal error encountered.", vertex.OutcomeUnknown),
    ],
)
def test_a_kinds_create_errors_map_as_a_custom_jobs_and_are_never_retried(
    vertex_transport: str,
    vertex_admin: VertexAdmin,
    kind: JobKind,
    code: str,
    message: str,
    expected_error: type[Exception],
) -> None:
    method = f"Create{kind.resource}"
    vertex_admin.add_fault(method=method, code=code, message=message, count=1)

    with pytest.raises(expected_error) as raised:
        vertex.create_job(PARENT, a_job(kind, "r-ffffffffffffffffffffffff"))

    assert type(raised.value) is expected_error
    assert method in str(raised.value)
    assert len(vertex_admin.requests(method)) == 1


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_a_persistent_resource_refusal_is_read_from_the_job_that_runs(
    vertex_transport: str, vertex_admin: VertexAdmin, kind: JobKind
) -> None:
    resource = f"{PARENT}/persistentResources/a100-pool"
    vertex_admin.add_fault(
        method=f"Create{kind.resource}",
        code="FAILED_PRECONDITION",
        message=f"Persistent resource {resource} is in state STOPPING; it must be RUNNING to "
        "run jobs.",
        count=1,
    )
    job = a_job(kind, "r-gggggggggggggggggggggggg")
    spec = aiplatform_v1.CustomJobSpec(trial_job("r-gggggggggggggggggggggggg").job_spec)
    spec.persistent_resource_id = "a100-pool"
    spec.scheduling = aiplatform_v1.Scheduling(timeout={"seconds": 7200})
    if isinstance(job, aiplatform_v1.HyperparameterTuningJob):
        job.trial_job_spec = spec
    else:
        job.training_task_inputs = json.loads(aiplatform_v1.CustomJobSpec.to_json(spec))

    with pytest.raises(vertex.PersistentResourceRefused):
        vertex.create_job(PARENT, job)
