"""HyperparameterTuningJobs (JobService) and TrainingPipelines (PipelineService) through the real
aiplatform_v1 clients, on REST and gRPC: create, get, list (filters, paging), cancel, delete,
the create-time checks on the job that runs, trials under FLEX_START, the uploaded model, faults
and the request log."""

from __future__ import annotations

import json
from typing import Any

import pytest
from emulator_test_support import (
    A100_POOL,
    CANCEL_SECONDS,
    PARENT,
    PROJECT_NUMBER,
    PROVISIONING_SECONDS,
    REGION,
    RUN_SECONDS,
    SEED_REST_BODY,
)
from google.api_core import exceptions
from google.cloud import aiplatform_v1

CANONICAL_PARENT = f"projects/{PROJECT_NUMBER}/locations/{REGION}"
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
STUDY_SPEC: dict[str, Any] = {
    "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
    "parameters": [
        {
            "parameterId": "learning_rate",
            "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
            "scaleType": "UNIT_LOG_SCALE",
        },
        {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
    ],
}
MODEL = {
    "displayName": "resnet",
    "containerSpec": {"imageUri": "us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-1:latest"},
    "artifactUri": "gs://acme-ml-models/resnet/run-1",
}
# One trial: provisioning, then the run.
TRIAL_SECONDS = PROVISIONING_SECONDS + RUN_SECONDS


def seed_spec(**changes: Any) -> dict[str, Any]:
    """The seed page's CustomJobSpec (one A100, FLEX_START, 30-minute max wait), REST JSON."""
    spec = json.loads(json.dumps(SEED_REST_BODY["jobSpec"]))
    spec.update(changes)
    return spec


def sweep(
    display_name: str = "resnet-sweep",
    max_trials: int = 4,
    parallel: int = 2,
    max_failed: int = 0,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> aiplatform_v1.HyperparameterTuningJob:
    body = {
        "displayName": display_name,
        "labels": labels or {},
        "studySpec": STUDY_SPEC,
        "maxTrialCount": max_trials,
        "parallelTrialCount": parallel,
        "maxFailedTrialCount": max_failed,
        "trialJobSpec": spec if spec is not None else seed_spec(),
    }
    return aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(body))


def pipeline(
    display_name: str = "resnet-pipeline",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    model: dict[str, Any] | None = MODEL,
) -> aiplatform_v1.TrainingPipeline:
    body: dict[str, Any] = {
        "displayName": display_name,
        "labels": labels or {},
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": spec if spec is not None else seed_spec(),
    }
    if model is not None:
        body["modelToUpload"] = model
    return aiplatform_v1.TrainingPipeline.from_json(json.dumps(body))


def on_persistent_resource() -> dict[str, Any]:
    spec = seed_spec(persistentResourceId=A100_POOL)
    del spec["scheduling"]
    return spec


def job_id(name: str) -> int:
    return int(name.rsplit("/", 1)[-1])


# -- HyperparameterTuningJob ------------------------------------------------------------------


def test_a_sweep_is_created_with_the_project_number_and_read_back(job_client):
    created = job_client.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=sweep(labels={"vd-run": "r1"})
    )

    assert created.name.startswith(f"{CANONICAL_PARENT}/hyperparameterTuningJobs/")
    assert created.state == aiplatform_v1.JobState.JOB_STATE_QUEUED
    assert created.labels["vd-run"] == "r1"
    read = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert read.trial_job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.FLEX_START
    assert read.max_trial_count == 4


def test_ids_are_unique_across_kinds(job_client, pipeline_client):
    custom = job_client.create_custom_job(
        parent=PARENT, custom_job=aiplatform_v1.CustomJob.from_json(json.dumps(SEED_REST_BODY))
    )
    tuning = job_client.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=sweep()
    )
    training = pipeline_client.create_training_pipeline(parent=PARENT, training_pipeline=pipeline())

    ids = [job_id(custom.name), job_id(tuning.name), job_id(training.name)]
    assert len(set(ids)) == 3
    # The jobs a sweep or a pipeline runs are not CustomJobs a client sees.
    listed = job_client.list_custom_jobs(parent=PARENT)
    assert [job.name for job in listed] == [custom.name]


def test_flex_start_trials_wait_for_gpus_then_the_sweep_succeeds_with_every_trial(
    job_client, admin
):
    created = job_client.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=sweep(max_trials=3, parallel=2)
    )
    admin.advance_clock(600)  # no A100 at all: every trial waits
    waiting = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert waiting.state == aiplatform_v1.JobState.JOB_STATE_QUEUED
    assert [trial.state for trial in waiting.trials] == [aiplatform_v1.Trial.State.ACTIVE] * 2

    admin.set_capacity("NVIDIA_TESLA_A100", 2)
    admin.advance_clock(PROVISIONING_SECONDS)
    assert (
        job_client.get_hyperparameter_tuning_job(name=created.name).state
        == aiplatform_v1.JobState.JOB_STATE_RUNNING
    )
    admin.advance_clock(2 * TRIAL_SECONDS)

    done = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert done.state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    assert [trial.id for trial in done.trials] == ["1", "2", "3"]
    for trial in done.trials:
        assert trial.state == aiplatform_v1.Trial.State.SUCCEEDED
        assert {p.parameter_id for p in trial.parameters} == {"learning_rate", "optimizer"}
        assert 0.0001 <= trial.parameters[0].value <= 0.1
        assert trial.parameters[1].value in ("adam", "sgd")
        assert [m.metric_id for m in trial.final_measurement.metrics] == ["accuracy"]


def test_three_of_twenty_trials_fail_and_the_sweep_still_succeeds(job_client, admin):
    admin.set_capacity("NVIDIA_TESLA_A100", 20)
    admin.call("POST", "outcomes", {"trials": [3, 7, 12], "result": "user_error"})
    created = job_client.create_hyperparameter_tuning_job(
        parent=PARENT,
        hyperparameter_tuning_job=sweep(max_trials=20, parallel=5, max_failed=3),
    )
    admin.advance_clock(4 * TRIAL_SECONDS + 60)

    done = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert done.state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    infeasible = [t.id for t in done.trials if t.state == aiplatform_v1.Trial.State.INFEASIBLE]
    assert infeasible == ["3", "7", "12"]
    assert "exited with a non-zero status of 1" in done.trials[6].infeasible_reason


def test_one_failure_more_than_allowed_fails_the_sweep_with_the_trials_error(job_client, admin):
    admin.set_capacity("NVIDIA_TESLA_A100", 4)
    admin.call("POST", "outcomes", {"trials": [2, 3], "result": "user_error", "exit_code": 2})
    created = job_client.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=sweep(max_trials=4, parallel=1, max_failed=1)
    )
    admin.advance_clock(4 * TRIAL_SECONDS)

    failed = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert failed.state == aiplatform_v1.JobState.JOB_STATE_FAILED
    assert failed.error.code == 3
    assert failed.error.message.startswith("2 trials failed, more than the 1 allowed. Trial 3: ")
    assert "exited with a non-zero status of 2" in failed.error.message
    assert len(failed.trials) == 3  # trial 4 never started


def test_a_trial_whose_flex_start_wait_runs_out_fails_the_sweep_as_capacity(job_client, admin):
    created = job_client.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=sweep(max_trials=2, parallel=1, max_failed=2)
    )
    admin.advance_clock(1800)

    failed = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert failed.state == aiplatform_v1.JobState.JOB_STATE_FAILED
    assert failed.error.code == 8
    assert failed.error.message.startswith("A trial could not get its resources. Trial 1: ")
    assert "Resources are insufficient in region: us-central1" in failed.error.message


def test_cancelling_a_sweep_cancels_its_trials_then_it_can_be_deleted(job_client, admin):
    admin.set_capacity("NVIDIA_TESLA_A100", 2)
    created = job_client.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=sweep()
    )
    admin.advance_clock(PROVISIONING_SECONDS + 10)
    job_client.cancel_hyperparameter_tuning_job(name=created.name)
    cancelling = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert cancelling.state == aiplatform_v1.JobState.JOB_STATE_CANCELLING
    with pytest.raises(exceptions.BadRequest, match="only one in a terminal state"):
        job_client.delete_hyperparameter_tuning_job(name=created.name)

    admin.advance_clock(CANCEL_SECONDS)
    cancelled = job_client.get_hyperparameter_tuning_job(name=created.name)
    assert cancelled.state == aiplatform_v1.JobState.JOB_STATE_CANCELLED
    assert cancelled.error.code == 1
    held = admin.call("GET", "state")["capacity"][REGION]["NVIDIA_TESLA_A100"]["held"]
    assert held == 0  # the cancelled trials gave their GPUs back
    with pytest.raises(exceptions.BadRequest, match="already in the terminal state"):
        job_client.cancel_hyperparameter_tuning_job(name=created.name)

    operation = job_client.delete_hyperparameter_tuning_job(name=created.name)
    operation.result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        job_client.get_hyperparameter_tuning_job(name=created.name)


def test_sweeps_are_listed_by_label_and_state_a_page_at_a_time(job_client, admin):
    names = [
        job_client.create_hyperparameter_tuning_job(
            parent=PARENT,
            hyperparameter_tuning_job=sweep(display_name=f"sweep-{n}", labels={"vd-run": f"r{n}"}),
        ).name
        for n in range(3)
    ]

    by_label = job_client.list_hyperparameter_tuning_jobs(
        request={"parent": PARENT, "filter": 'labels.vd-run="r1"'}
    )
    assert [job.name for job in by_label] == [names[1]]
    pager = job_client.list_hyperparameter_tuning_jobs(
        request={
            "parent": PARENT,
            "filter": "labels.vd-run:* AND state=JOB_STATE_QUEUED",
            "page_size": 2,
        }
    )
    pages = list(pager.pages)
    assert [len(page.hyperparameter_tuning_jobs) for page in pages] == [2, 1]
    assert [job.name for page in pages for job in page.hyperparameter_tuning_jobs] == names[::-1]


def test_a_sweep_breaking_a_flex_start_rule_names_the_trial_job_spec_field(job_client):
    spec = seed_spec()
    spec["workerPoolSpecs"][0]["machineSpec"] |= {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_T4",
    }
    with pytest.raises(exceptions.BadRequest) as raised:
        job_client.create_hyperparameter_tuning_job(
            parent=PARENT, hyperparameter_tuning_job=sweep(spec=spec)
        )
    assert (
        "hyperparameter_tuning_job.trial_job_spec.worker_pool_specs[0].machine_spec"
        ".accelerator_type" in raised.value.message
    )
    assert (
        job_client.list_hyperparameter_tuning_jobs(parent=PARENT).hyperparameter_tuning_jobs == []
    )


def test_a_sweep_without_metrics_is_refused(job_client):
    body = json.loads(aiplatform_v1.HyperparameterTuningJob.to_json(sweep()))
    body["studySpec"]["metrics"] = []
    with pytest.raises(exceptions.BadRequest, match=r"study_spec\.metrics"):
        job_client.create_hyperparameter_tuning_job(
            parent=PARENT,
            hyperparameter_tuning_job=aiplatform_v1.HyperparameterTuningJob.from_json(
                json.dumps(body)
            ),
        )


# -- TrainingPipeline ---------------------------------------------------------------------------


def test_a_pipeline_on_a_persistent_resource_trains_then_uploads_its_model(pipeline_client, admin):
    created = pipeline_client.create_training_pipeline(
        parent=PARENT,
        training_pipeline=pipeline(spec=on_persistent_resource(), labels={"vd-run": "r1"}),
    )
    assert created.name.startswith(f"{CANONICAL_PARENT}/trainingPipelines/")
    assert created.state == aiplatform_v1.PipelineState.PIPELINE_STATE_QUEUED
    assert created.model_to_upload.name == ""

    admin.advance_clock(10)
    running = pipeline_client.get_training_pipeline(name=created.name)
    assert running.state == aiplatform_v1.PipelineState.PIPELINE_STATE_RUNNING
    admin.advance_clock(RUN_SECONDS)

    done = pipeline_client.get_training_pipeline(name=created.name)
    assert done.state == aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
    assert done.model_to_upload.name.startswith(f"{CANONICAL_PARENT}/models/")
    assert done.model_to_upload.version_id == "1"
    assert done.training_task_inputs["persistentResourceId"] == A100_POOL


def test_a_failed_training_task_fails_the_pipeline_with_its_error(pipeline_client, admin):
    admin.call("POST", "outcomes", {"job_kind": "training_pipeline", "result": "user_error"})
    created = pipeline_client.create_training_pipeline(
        parent=PARENT, training_pipeline=pipeline(spec=on_persistent_resource())
    )
    admin.advance_clock(10 + RUN_SECONDS)

    failed = pipeline_client.get_training_pipeline(name=created.name)
    assert failed.state == aiplatform_v1.PipelineState.PIPELINE_STATE_FAILED
    assert failed.error.code == 3
    assert "exited with a non-zero status of 1" in failed.error.message
    assert failed.model_to_upload.name == ""


def test_cancelling_a_pipeline_cancels_its_task_then_it_can_be_deleted(pipeline_client, admin):
    created = pipeline_client.create_training_pipeline(parent=PARENT, training_pipeline=pipeline())
    pipeline_client.cancel_training_pipeline(name=created.name)
    assert (
        pipeline_client.get_training_pipeline(name=created.name).state
        == aiplatform_v1.PipelineState.PIPELINE_STATE_CANCELLING
    )
    admin.advance_clock(CANCEL_SECONDS)
    assert (
        pipeline_client.get_training_pipeline(name=created.name).state
        == aiplatform_v1.PipelineState.PIPELINE_STATE_CANCELLED
    )
    pipeline_client.delete_training_pipeline(name=created.name).result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        pipeline_client.get_training_pipeline(name=created.name)


def test_pipelines_are_listed_by_label_and_pipeline_state(pipeline_client, admin):
    first = pipeline_client.create_training_pipeline(
        parent=PARENT, training_pipeline=pipeline(labels={"vd-run": "r1"})
    )
    second = pipeline_client.create_training_pipeline(
        parent=PARENT, training_pipeline=pipeline(labels={"vd-run": "r2"})
    )
    pipeline_client.cancel_training_pipeline(name=second.name)
    admin.advance_clock(CANCEL_SECONDS)

    queued = pipeline_client.list_training_pipelines(
        request={"parent": PARENT, "filter": "labels.vd-run:* AND state=PIPELINE_STATE_QUEUED"}
    )
    assert [p.name for p in queued] == [first.name]
    with pytest.raises(exceptions.BadRequest, match="PIPELINE_STATE_RUNNING"):
        list(
            pipeline_client.list_training_pipelines(
                request={"parent": PARENT, "filter": "state=JOB_STATE_RUNNING"}
            )
        )


def test_a_pipeline_whose_task_does_not_match_its_resource_names_the_task_field(pipeline_client):
    spec = on_persistent_resource()
    spec["workerPoolSpecs"][0]["replicaCount"] = 1
    spec["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 2
    with pytest.raises(exceptions.BadRequest) as raised:
        pipeline_client.create_training_pipeline(
            parent=PARENT, training_pipeline=pipeline(spec=spec)
        )
    assert "training_pipeline.training_task_inputs.worker_pool_specs[0]" in raised.value.message


def test_a_pipeline_of_another_task_is_refused(pipeline_client):
    other = pipeline()
    other.training_task_definition = (
        "gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tables_1.0.0.yaml"
    )
    with pytest.raises(exceptions.BadRequest, match="training_task_definition"):
        pipeline_client.create_training_pipeline(parent=PARENT, training_pipeline=other)


# -- faults and the request log -----------------------------------------------------------------


def test_faults_and_the_request_log_cover_the_new_methods(
    job_client, pipeline_client, transport, admin
):
    admin.call("DELETE", "requests")
    admin.add_fault(method="CreateTrainingPipeline", code="UNAVAILABLE", count=1)
    with pytest.raises(exceptions.ServiceUnavailable):
        pipeline_client.create_training_pipeline(parent=PARENT, training_pipeline=pipeline())
    assert pipeline_client.list_training_pipelines(parent=PARENT).training_pipelines == []
    created = pipeline_client.create_training_pipeline(parent=PARENT, training_pipeline=pipeline())
    job_client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=sweep())

    records = admin.requests()
    assert [(r["method"], r["status"], r["injectedFault"]) for r in records] == [
        ("CreateTrainingPipeline", "UNAVAILABLE", True),
        ("ListTrainingPipelines", "OK", False),
        ("CreateTrainingPipeline", "OK", False),
        ("CreateHyperparameterTuningJob", "OK", False),
    ]
    assert {r["transport"] for r in records} == {transport}
    assert records[2]["request"]["trainingPipeline"]["displayName"] == "resnet-pipeline"
    assert admin.requests("GetTrainingPipeline") == []
    pipeline_client.get_training_pipeline(name=created.name)
    assert [r["resource"] for r in admin.requests("GetTrainingPipeline")] == [created.name]
