"""Builders of HyperparameterTuningJobs and TrainingPipelines for the emulator core's unit tests:
real protos, built from REST JSON as a client would send them."""

from __future__ import annotations

import json
from typing import Any

from core_builders import pool
from google.cloud import aiplatform_v1

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
STUDY_SPEC: dict[str, Any] = {
    "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
    "parameters": [
        {
            "parameterId": "learning_rate",
            "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
            "scaleType": "UNIT_LOG_SCALE",
        },
        {"parameterId": "batch_size", "discreteValueSpec": {"values": [32, 64, 128]}},
        {"parameterId": "layers", "integerValueSpec": {"minValue": "2", "maxValue": "8"}},
        {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
    ],
}


def job_spec(
    pools: list[dict[str, Any]] | None = None, flex_start: bool = True, **fields: Any
) -> dict[str, Any]:
    """A CustomJobSpec in REST JSON (FLEX_START with a 30-minute max wait by default)."""
    spec: dict[str, Any] = {"workerPoolSpecs": pools if pools is not None else [pool()], **fields}
    if flex_start:
        spec.setdefault("scheduling", {"strategy": "FLEX_START", "maxWaitDuration": "1800s"})
    return spec


def sweep(
    display_name: str = "resnet-sweep",
    max_trials: int = 4,
    parallel: int = 2,
    max_failed: int = 0,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    study: dict[str, Any] | None = None,
    **fields: Any,
) -> aiplatform_v1.HyperparameterTuningJob:
    """A HyperparameterTuningJob whose trials run `spec` (default: one A100, FLEX_START)."""
    body = {
        "displayName": display_name,
        "labels": labels or {},
        "studySpec": study if study is not None else STUDY_SPEC,
        "maxTrialCount": max_trials,
        "parallelTrialCount": parallel,
        "maxFailedTrialCount": max_failed,
        "trialJobSpec": spec if spec is not None else job_spec(),
        **fields,
    }
    return aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(body))


def pipeline(
    display_name: str = "resnet-pipeline",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
    **fields: Any,
) -> aiplatform_v1.TrainingPipeline:
    """A TrainingPipeline of the custom task running `spec`, uploading `model` if given."""
    body: dict[str, Any] = {
        "displayName": display_name,
        "labels": labels or {},
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": spec if spec is not None else job_spec(),
        **fields,
    }
    if model is not None:
        body["modelToUpload"] = model
    return aiplatform_v1.TrainingPipeline.from_json(json.dumps(body))


MODEL = {
    "displayName": "resnet",
    "containerSpec": {"imageUri": "us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-1:latest"},
    "artifactUri": "gs://acme-ml-models/resnet/run-1",
}
