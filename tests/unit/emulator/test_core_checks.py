"""Server-side checks on CreateCustomJob: one broken rule per case, with the real codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from core_builders import (
    PARENT,
    RESOURCE_ID,
    RESOURCE_NAME,
    new_emulator,
    persistent_resource_config,
    pool,
)
from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import EmulatorError

INVALID = grpc.StatusCode.INVALID_ARGUMENT
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
H100_POOL = pool("a3-highgpu-8g", "NVIDIA_H100_80GB", 8)


def valid_body() -> dict[str, Any]:
    return {
        "displayName": "train",
        "labels": {"run-key": "imagenet_2025-01-01", "attempt": "1"},
        "jobSpec": {"workerPoolSpecs": [pool()]},
    }


def flex(body: dict[str, Any]) -> dict[str, Any]:
    body["jobSpec"]["scheduling"] = {"strategy": "FLEX_START", "maxWaitDuration": "3600s"}
    return body


def on_resource(body: dict[str, Any]) -> dict[str, Any]:
    body["jobSpec"]["persistentResourceId"] = RESOURCE_ID
    return body


Change = Callable[[dict[str, Any]], object]

BROKEN_RULES: list[tuple[str, Change, grpc.StatusCode, str]] = [
    ("no display_name", lambda b: b.pop("displayName"), INVALID, "custom_job.display_name"),
    ("display_name too long", lambda b: b.update(displayName="x" * 129), INVALID, "display_name"),
    (
        "no worker pool",
        lambda b: b["jobSpec"].update(workerPoolSpecs=[]),
        INVALID,
        "custom_job.job_spec.worker_pool_specs",
    ),
    (
        "no image and no python package",
        lambda b: b["jobSpec"]["workerPoolSpecs"][0].pop("containerSpec"),
        INVALID,
        "worker_pool_specs[0].container_spec.image_uri",
    ),
    (
        "empty first pool",
        lambda b: b["jobSpec"].update(workerPoolSpecs=[{}]),
        INVALID,
        "worker_pool_specs[0].machine_spec.machine_type",
    ),
    (
        "no machine type",
        lambda b: b["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].pop("machineType"),
        INVALID,
        "worker_pool_specs[0].machine_spec.machine_type",
    ),
    (
        "first pool with two replicas",
        lambda b: b["jobSpec"]["workerPoolSpecs"][0].update(replicaCount=2),
        INVALID,
        "worker_pool_specs[0].replica_count",
    ),
    (
        "second pool without image",
        lambda b: b["jobSpec"]["workerPoolSpecs"].append({"machineSpec": {"machineType": "n1"}}),
        INVALID,
        "worker_pool_specs[1].container_spec.image_uri",
    ),
    ("label key uppercase", lambda b: b["labels"].update(Team="x"), INVALID, "labels['Team']"),
    ("label key digit first", lambda b: b["labels"].update({"1st": "x"}), INVALID, "labels['1st']"),
    ("label key too long", lambda b: b["labels"].update({"k" * 64: "x"}), INVALID, "labels"),
    ("label value too long", lambda b: b["labels"].update(team="v" * 64), INVALID, "labels"),
    ("label value with dot", lambda b: b["labels"].update(team="a.b"), INVALID, "labels['team']"),
    (
        "65 labels",
        lambda b: b["labels"].update({f"k{i}": "v" for i in range(63)}),
        INVALID,
        "At most 64 labels",
    ),
    (
        "flex start on a T4",
        lambda b: flex(b)["jobSpec"]["workerPoolSpecs"][0].update(
            machineSpec={
                "machineType": "n1-standard-8",
                "acceleratorType": "NVIDIA_TESLA_T4",
                "acceleratorCount": 1,
            }
        ),
        INVALID,
        "FLEX_START does not support accelerator type NVIDIA_TESLA_T4",
    ),
    (
        "flex start on CPUs",
        lambda b: flex(b)["jobSpec"].update(workerPoolSpecs=[pool("n1-standard-4", None)]),
        INVALID,
        "accelerator_type",
    ),
    (
        "flex start timeout over 7 days",
        lambda b: flex(b)["jobSpec"]["scheduling"].update(timeout=f"{7 * 86400 + 1}s"),
        INVALID,
        "custom_job.job_spec.scheduling.timeout",
    ),
    (
        "flex start with mixed machines",
        lambda b: flex(b)["jobSpec"]["workerPoolSpecs"].append(pool("a2-highgpu-2g", count=2)),
        INVALID,
        "same machine configuration",
    ),
    (
        "unknown persistent resource",
        lambda b: b["jobSpec"].update(persistentResourceId="nope"),
        INVALID,
        "persistentResources/nope does not exist",
    ),
    (
        "machine type unlike any resource pool",
        lambda b: on_resource(b)["jobSpec"].update(
            workerPoolSpecs=[pool("a2-highgpu-2g", count=2)]
        ),
        INVALID,
        "No resource pool of persistent resource",
    ),
    (
        "disk unlike the resource pool's default",
        lambda b: on_resource(b)["jobSpec"]["workerPoolSpecs"][0].update(
            diskSpec={"bootDiskType": "pd-standard", "bootDiskSizeGb": 100}
        ),
        INVALID,
        "boot_disk_type=pd-standard",
    ),
    (
        "more replicas than the resource pool has",
        lambda b: on_resource(b)["jobSpec"]["workerPoolSpecs"].append(pool(replicas=2)),
        INVALID,
        "worker_pool_specs[1].replica_count",
    ),
]


def create(emulator: object, body: dict[str, Any]) -> aiplatform_v1.CustomJob:
    return emulator.create_custom_job(PARENT, aiplatform_v1.CustomJob.from_json(json.dumps(body)))


@pytest.mark.parametrize(
    ("change", "code", "fragment"),
    [
        pytest.param(change, code, fragment, id=case)
        for case, change, code, fragment in BROKEN_RULES
    ],
)
def test_each_broken_rule_is_refused(change: Change, code: grpc.StatusCode, fragment: str) -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config(replicas=2)])
    body = valid_body()
    change(body)
    with pytest.raises(EmulatorError) as raised:
        create(emulator, body)
    assert raised.value.code == code
    assert fragment in raised.value.message


VALID_VARIANTS: list[tuple[str, Change]] = [
    ("as built", lambda b: None),
    ("128-character name", lambda b: b.update(displayName="x" * 128)),
    ("64 labels", lambda b: b["labels"].update({f"k{i}": "v" for i in range(62)})),
    ("international lowercase label", lambda b: b["labels"].update(équipe="données")),
    ("empty value label", lambda b: b["labels"].update(flag="")),
    (
        "empty placeholder pools in a distributed job",
        lambda b: b["jobSpec"]["workerPoolSpecs"].extend([{}, pool(replicas=4)]),
    ),
    (
        "python package instead of a container",
        lambda b: b["jobSpec"]["workerPoolSpecs"][0].update(
            containerSpec=None,
            pythonPackageSpec={"executorImageUri": "x", "packageUris": ["gs://b/p.tar.gz"]},
        ),
    ),
    (
        "flex start, 7 days timeout",
        lambda b: flex(b)["jobSpec"]["scheduling"].update(timeout=f"{7 * 86400}s"),
    ),
    (
        "flex start, H100 workers like the primary",
        lambda b: flex(b)["jobSpec"].update(
            workerPoolSpecs=[H100_POOL, {**H100_POOL, "replicaCount": 3}]
        ),
    ),
    ("on the persistent resource, disk left unset", on_resource),
    (
        "on the persistent resource, default disk given",
        lambda b: on_resource(b)["jobSpec"]["workerPoolSpecs"][0].update(
            diskSpec={"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
        ),
    ),
    (
        "on the persistent resource, filling the pool",
        lambda b: on_resource(b)["jobSpec"]["workerPoolSpecs"].append(pool(replicas=1)),
    ),
]


@pytest.mark.parametrize(
    "change", [pytest.param(change, id=case) for case, change in VALID_VARIANTS]
)
def test_valid_jobs_are_accepted(change: Change) -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config(replicas=2)])
    body = valid_body()
    change(body)
    if body["jobSpec"]["workerPoolSpecs"][0].get("containerSpec", {}) is None:
        del body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert create(emulator, body).state == aiplatform_v1.JobState.JOB_STATE_QUEUED


def test_resource_not_running_is_a_failed_precondition() -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config(state="STOPPING")])
    with pytest.raises(EmulatorError) as raised:
        create(emulator, on_resource(valid_body()))
    assert raised.value.code == PRECONDITION
    assert RESOURCE_NAME in raised.value.message
    assert "STOPPING" in raised.value.message


def test_all_field_errors_are_listed_together_in_the_service_format() -> None:
    emulator = new_emulator()
    body = valid_body()
    body.pop("displayName")
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].pop("machineType")
    with pytest.raises(EmulatorError) as raised:
        create(emulator, body)
    assert raised.value.message == (
        "List of found errors:\t"
        "1.Field: custom_job.display_name; Message: Required field is not set.\t"
        "2.Field: custom_job.job_spec.worker_pool_specs[0].machine_spec.machine_type; "
        "Message: Required field is not set.\t"
    )


def test_the_emulator_and_the_library_agree_on_the_flex_start_rules() -> None:
    from shared.model.accelerators import FLEX_START_GPUS
    from shared.validation.flex_start import FLEX_START_MAX_TIMEOUT
    from vertex_ai_emulator import checks

    assert checks.FLEX_START_ACCELERATORS == FLEX_START_GPUS
    assert checks.FLEX_START_MAX_TIMEOUT == FLEX_START_MAX_TIMEOUT


def test_the_emulator_and_the_library_agree_on_the_spot_gpus() -> None:
    from shared.model.accelerators import SPOT_GPUS
    from vertex_ai_emulator import checks

    assert checks.SPOT_ACCELERATORS == SPOT_GPUS


def test_a_spot_job_on_a_gpu_spot_vms_do_not_offer_is_refused() -> None:
    from vertex_ai_emulator import checks

    job = aiplatform_v1.CustomJob(
        display_name="spot-k80",
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[
                aiplatform_v1.WorkerPoolSpec(
                    machine_spec=aiplatform_v1.MachineSpec(
                        machine_type="n1-standard-8",
                        accelerator_type=aiplatform_v1.AcceleratorType.NVIDIA_TESLA_K80,
                        accelerator_count=1,
                    ),
                    replica_count=1,
                    container_spec=aiplatform_v1.ContainerSpec(image_uri="gcr.io/p/t:1"),
                )
            ],
            scheduling=aiplatform_v1.Scheduling(strategy=aiplatform_v1.Scheduling.Strategy.SPOT),
        ),
    )
    with pytest.raises(
        EmulatorError, match="Spot VMs do not support accelerator type NVIDIA_TESLA_K80"
    ):
        checks.check_new_job(job, None, lambda _: None, region="us-central1")
