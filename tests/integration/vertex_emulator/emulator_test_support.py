"""Constants, builders and plain-HTTP helpers shared by the Vertex AI emulator tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import grpc
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.cloud.aiplatform_v1.services.job_service.transports import JobServiceGrpcTransport
from google.cloud.aiplatform_v1.services.persistent_resource_service.transports import (
    PersistentResourceServiceGrpcTransport,
)
from google.cloud.aiplatform_v1.services.pipeline_service.transports import (
    PipelineServiceGrpcTransport,
)

PROJECT = "local-project"
PROJECT_NUMBER = "123456789012"
REGION = "us-central1"
PARENT = f"projects/{PROJECT}/locations/{REGION}"
A100_POOL = "a100-pool"

PROVISIONING_SECONDS = 120
PERSISTENT_START_SECONDS = 5
CANCEL_SECONDS = 5
RUN_SECONDS = 600

TEST_CONFIG: dict[str, Any] = {
    "project_numbers": {PROJECT: PROJECT_NUMBER},
    # No A100 at all to begin with: FLEX_START jobs queue until a test adds some.
    "capacity": {REGION: {"NVIDIA_TESLA_A100": 0}},
    "timings": {
        "provisioning": PROVISIONING_SECONDS,
        "persistent_start": PERSISTENT_START_SECONDS,
        "cancel": CANCEL_SECONDS,
    },
    "default_outcome": {"result": "succeeded", "duration": RUN_SECONDS},
    "persistent_resources": [
        {
            "name": f"projects/{PROJECT}/locations/{REGION}/persistentResources/{A100_POOL}",
            "state": "RUNNING",
            "resourcePools": [
                {
                    "id": "a100-x1",
                    "machineSpec": {
                        "machineType": "a2-highgpu-1g",
                        "acceleratorType": "NVIDIA_TESLA_A100",
                        "acceleratorCount": 1,
                    },
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                    "replicaCount": 2,
                }
            ],
        }
    ],
}

TRANSPORTS = ("rest", "grpc")


class AdminApi:
    """The emulator's `/emulator/v1/` admin API, over plain HTTP."""

    def __init__(self, rest_url: str) -> None:
        self.base_url = f"{rest_url}/emulator/v1/"

    def call(self, http_method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=http_method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def advance_clock(self, seconds: float) -> None:
        self.call("POST", "clock:advance", {"seconds": seconds})

    def set_capacity(self, accelerator_type: str, count: int, region: str = REGION) -> None:
        self.call(
            "PUT",
            "capacity",
            {"region": region, "acceleratorType": accelerator_type, "count": count},
        )

    def add_fault(self, **rule: Any) -> None:
        self.call("POST", "faults", rule)

    def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        path = "requests" if method is None else f"requests?method={method}"
        return self.call("GET", path)["requests"]


def build_clients(
    transport: str, rest_url: str, grpc_target: str
) -> tuple[aiplatform_v1.JobServiceClient, aiplatform_v1.PersistentResourceServiceClient]:
    """Real clients on `transport` ("rest" or "grpc"), pointed at an emulator."""
    if transport == "rest":
        options = {"api_endpoint": rest_url}
        credentials = AnonymousCredentials()
        return (
            aiplatform_v1.JobServiceClient(
                transport="rest", client_options=options, credentials=credentials
            ),
            aiplatform_v1.PersistentResourceServiceClient(
                transport="rest", client_options=options, credentials=credentials
            ),
        )
    channel = grpc.insecure_channel(grpc_target)
    return (
        aiplatform_v1.JobServiceClient(transport=JobServiceGrpcTransport(channel=channel)),
        aiplatform_v1.PersistentResourceServiceClient(
            transport=PersistentResourceServiceGrpcTransport(channel=channel)
        ),
    )


def build_pipeline_client(
    transport: str, rest_url: str, grpc_target: str
) -> aiplatform_v1.PipelineServiceClient:
    """A real PipelineServiceClient on `transport` ("rest" or "grpc"), pointed at an emulator."""
    if transport == "rest":
        return aiplatform_v1.PipelineServiceClient(
            transport="rest",
            client_options={"api_endpoint": rest_url},
            credentials=AnonymousCredentials(),
        )
    return aiplatform_v1.PipelineServiceClient(
        transport=PipelineServiceGrpcTransport(channel=grpc.insecure_channel(grpc_target))
    )


def raw_rest_call(rest_url: str, http_method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """Call the REST API without a client library; returns (HTTP status, decoded JSON)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        rest_url + path,
        data=data,
        method=http_method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# The request body of the seed page's example, verbatim.
SEED_REST_BODY: dict[str, Any] = {
    "displayName": "MyDwsJob",
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                "containerSpec": {
                    "imageUri": "python:3.10",
                    "command": ["sleep"],
                    "args": ["100"],
                },
            }
        ],
        "scheduling": {"maxWaitDuration": "1800s", "strategy": "FLEX_START"},
    },
}


def a100_worker_pool(replica_count: int = 1) -> aiplatform_v1.WorkerPoolSpec:
    """The seed's worker pool: one a2-highgpu-1g (one A100) per replica."""
    return aiplatform_v1.WorkerPoolSpec(
        machine_spec=aiplatform_v1.MachineSpec(
            machine_type="a2-highgpu-1g",
            accelerator_type=aiplatform_v1.AcceleratorType.NVIDIA_TESLA_A100,
            accelerator_count=1,
        ),
        replica_count=replica_count,
        disk_spec=aiplatform_v1.DiskSpec(boot_disk_type="pd-ssd", boot_disk_size_gb=100),
        container_spec=aiplatform_v1.ContainerSpec(image_uri="python:3.10", command=["sleep"]),
    )


def flex_start_job(
    display_name: str = "flex-job",
    max_wait_seconds: int = 1800,
    labels: dict[str, str] | None = None,
) -> aiplatform_v1.CustomJob:
    """A FLEX_START (Dynamic Workload Scheduler) job asking for one A100."""
    return aiplatform_v1.CustomJob(
        display_name=display_name,
        labels=labels or {},
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[a100_worker_pool()],
            scheduling=aiplatform_v1.Scheduling(
                strategy=aiplatform_v1.Scheduling.Strategy.FLEX_START,
                max_wait_duration={"seconds": max_wait_seconds},
            ),
        ),
    )


def persistent_resource_job(
    display_name: str = "pooled-job", resource_id: str = A100_POOL
) -> aiplatform_v1.CustomJob:
    """A job on one replica of the persistent resource `resource_id`."""
    return aiplatform_v1.CustomJob(
        display_name=display_name,
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[a100_worker_pool()], persistent_resource_id=resource_id
        ),
    )
