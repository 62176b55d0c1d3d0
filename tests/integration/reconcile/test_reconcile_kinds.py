"""The reconciler over every kind of job, on the emulators: one List call per page of each
(parent, kind) it watches, never one per job nor a kind it does not watch; and a CustomJob
carrying a pipeline's labels (as the real service's backing job of a TrainingPipeline may) is
neither the pipeline's job nor a duplicate: never cancelled, never recorded.

The jobs are created directly in the Vertex AI emulator (``vertex.create_job``) and their runs
opened in the ledger as dispatch leaves them (``SUBMITTED``, the job recorded).
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, cast

from google.cloud.aiplatform_v1 import CustomJob, HyperparameterTuningJob, TrainingPipeline
from reconcile_test_support import REGION, World
from run_builders import a_run, an_attempt

from emulator_stack import LOCAL_PROJECT
from shared.adapters import vertex
from shared.adapters.ledger import RunStatus
from shared.model.job_kinds import JobKind

PARENT = f"projects/{LOCAL_PROJECT}/locations/{REGION}"
PAGE_SIZE = vertex.LIST_PAGE_SIZE
SWEEPS = PAGE_SIZE + 20  # two pages of tuning jobs
PIPELINES = 30  # one page of pipelines
TRIAL_SPEC: dict[str, Any] = {
    "workerPoolSpecs": [
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "1",
            "containerSpec": {"imageUri": "us-docker.pkg.dev/local-project/train/probe:1"},
        }
    ]
}
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"


def _job(
    kind: JobKind, labels: dict[str, str]
) -> CustomJob | HyperparameterTuningJob | TrainingPipeline:
    """A small job of ``kind`` labelled ``labels``, as render makes one (CPU only: it runs)."""
    if kind is JobKind.CUSTOM_JOB:
        body: dict[str, Any] = {"displayName": "probe", "jobSpec": TRIAL_SPEC, "labels": labels}
        return cast(CustomJob, CustomJob.from_json(json.dumps(body)))
    if kind is JobKind.HYPERPARAMETER_TUNING_JOB:
        body = {
            "displayName": "probe-sweep",
            "studySpec": {
                "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                "parameters": [
                    {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1}}
                ],
            },
            "maxTrialCount": 2,
            "parallelTrialCount": 1,
            "trialJobSpec": TRIAL_SPEC,
            "labels": labels,
        }
        return cast(HyperparameterTuningJob, HyperparameterTuningJob.from_json(json.dumps(body)))
    body = {
        "displayName": "probe-pipeline",
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": TRIAL_SPEC,
        "labels": labels,
    }
    return cast(TrainingPipeline, TrainingPipeline.from_json(json.dumps(body)))


def _run_id(kind: JobKind, index: int) -> str:
    return f"r-{kind.value[:8].replace('_', '')}{index:016x}"


def _open_run(world: World, kind: JobKind, index: int) -> str:
    """A SUBMITTED run of ``kind`` whose attempt 1 records a real job; the job's name."""
    run_id = _run_id(kind, index)
    intent_at = world.services.now()
    created = vertex.create_job(PARENT, _job(kind, {"vd-run": run_id, "vd-attempt": "1"}))
    attempt = replace(
        an_attempt(
            1,
            region=REGION,
            parent=PARENT,
            intent_at=intent_at,
            job_name=created.name,
            state=created.state.name,
        ),
        job_kind=kind,
    )
    world.services.ledger.open_run(
        a_run(
            RunStatus.SUBMITTED,
            attempt,
            run_id=run_id,
            run_key=f"request:kinds-{kind.value}-{index}",
            route="on-request",
            template="flex-a100",
            trigger={"kind": "JobRequest"},
        )
    )
    return created.name


def test_a_tick_lists_each_kind_it_watches_by_pages_never_by_jobs(world: World) -> None:
    kinds = [JobKind.HYPERPARAMETER_TUNING_JOB] * SWEEPS + [JobKind.TRAINING_PIPELINE] * PIPELINES
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda pair: _open_run(world, *pair), [(k, i) for i, k in enumerate(kinds)]))
    world.vertex.forget_requests()

    report = world.reconcile()

    sweeps = world.vertex.requests("ListHyperparameterTuningJobs")
    pipelines = world.vertex.requests("ListTrainingPipelines")
    assert report.runs_read == len(kinds)
    assert report.jobs_not_listed == ()
    assert report.listings == 2  # one parent, two kinds: no customJobs listing, none watched
    assert world.vertex.requests("ListCustomJobs") == []
    assert len(sweeps) == math.ceil(SWEEPS / PAGE_SIZE)  # pages, not jobs
    assert len(pipelines) == math.ceil(PIPELINES / PAGE_SIZE)
    assert report.list_calls == len(sweeps) + len(pipelines)
    for method in ("GetCustomJob", "GetHyperparameterTuningJob", "GetTrainingPipeline"):
        assert world.vertex.requests(method) == []  # never one Get per job


def test_a_custom_job_with_a_pipelines_labels_is_neither_its_job_nor_a_duplicate(
    world: World,
) -> None:
    pipeline = _open_run(world, JobKind.TRAINING_PIPELINE, 1)
    # A CustomJob run in the same parent, so the tick lists customJobs there too.
    _open_run(world, JobKind.CUSTOM_JOB, 2)
    run_id = _run_id(JobKind.TRAINING_PIPELINE, 1)
    labels = {"vd-run": run_id, "vd-attempt": "1"}
    backing = vertex.create_job(PARENT, _job(JobKind.CUSTOM_JOB, labels))
    world.vertex.forget_requests()

    first = world.reconcile()
    second = world.reconcile()

    assert first.duplicate_jobs_cancelled == second.duplicate_jobs_cancelled == 0
    cancelled = [
        entry["resource"]
        for method in ("CancelCustomJob", "CancelTrainingPipeline")
        for entry in world.vertex.requests(method)
    ]
    assert cancelled == []
    attempt = world.run(run_id).last_attempt
    assert attempt.job_name == pipeline
    assert attempt.duplicate_jobs == ()
    assert vertex.get_job(backing.name).state.name != "JOB_STATE_CANCELLED"
