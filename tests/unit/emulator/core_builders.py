"""Builders for the emulator core's unit tests: real protos, an emulator on a frozen clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from google.cloud import aiplatform_v1

from vertex_ai_emulator.clock import SimulatedClock
from vertex_ai_emulator.config import EmulatorConfig
from vertex_ai_emulator.core import Emulator

START = datetime(2025, 1, 1, tzinfo=UTC)
PROJECT_NUMBER = "123456789012"
PARENT = "projects/acme-ml/locations/us-central1"
CANONICAL_PARENT = f"projects/{PROJECT_NUMBER}/locations/us-central1"
RESOURCE_ID = "a100-pool"
RESOURCE_NAME = f"{CANONICAL_PARENT}/persistentResources/{RESOURCE_ID}"

SEED_BODY = (
    '{"displayName": "MyDwsJob", "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType":'
    ' "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1},'
    ' "replicaCount": 1, "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},'
    ' "containerSpec": {"imageUri": "python:3.10", "command": ["sleep"], "args": ["100"]}}],'
    ' "scheduling": {"maxWaitDuration": "1800s", "strategy": "FLEX_START"}}}'
)


def new_emulator(**config: Any) -> Emulator:
    """An emulator whose clock only moves when a test advances it; `config` as in a file."""
    raw = {"project_numbers": {"acme-ml": PROJECT_NUMBER}, **config}
    clock = SimulatedClock(time_scale=0, start=START)
    return Emulator(EmulatorConfig.from_dict(raw), clock)


def at(seconds: float) -> datetime:
    """The simulated instant `seconds` after START."""
    return START + timedelta(seconds=seconds)


def pool(
    machine_type: str = "a2-highgpu-1g",
    accelerator: str | None = "NVIDIA_TESLA_A100",
    count: int = 1,
    replicas: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    """One worker pool, in REST JSON."""
    machine: dict[str, Any] = {"machineType": machine_type}
    if accelerator:
        machine |= {"acceleratorType": accelerator, "acceleratorCount": count}
    return {
        "machineSpec": machine,
        "replicaCount": replicas,
        "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4"},
        **extra,
    }


def job(
    display_name: str = "train",
    pools: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    **job_spec: Any,
) -> aiplatform_v1.CustomJob:
    """A CustomJob built from REST JSON, as a client would send it."""
    body = {
        "displayName": display_name,
        "labels": labels or {},
        "jobSpec": {"workerPoolSpecs": pools if pools is not None else [pool()], **job_spec},
    }
    return aiplatform_v1.CustomJob.from_json(json.dumps(body))


def flex_job(max_wait: str | None = "1800s", **kwargs: Any) -> aiplatform_v1.CustomJob:
    """A FLEX_START job (max_wait None leaves scheduling.maxWaitDuration unset)."""
    scheduling = {"strategy": "FLEX_START"}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    return job(scheduling=scheduling, **kwargs)


def persistent_resource_config(
    replicas: int = 2, state: str = "RUNNING", **pool_fields: Any
) -> dict[str, Any]:
    """A `persistent_resources:` config entry with one A100 pool of `replicas` machines."""
    return {
        "name": f"projects/acme-ml/locations/us-central1/persistentResources/{RESOURCE_ID}",
        "state": state,
        "resourcePools": [
            {
                "id": "a100",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": replicas,
                **pool_fields,
            }
        ],
    }


def state_of(emulator: Emulator, name: str) -> str:
    """The job's state name now."""
    return emulator.get_custom_job(name).state.name
