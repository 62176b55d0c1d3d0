"""THE BASELINE, not vertex-dispatch: the function a user writes from the seed pages.

The high-level SDK imported at module top, ``aiplatform.init(...)``, then ``aiplatform.CustomJob``
and ``submit(...)`` with ``scheduling_strategy=FLEX_START`` and ``max_wait_duration``; a job-state
handler that reads the job with ``CustomJob.get``; and a sweep's twin, ``on_sweep_finalized``,
that creates a FLEX_START ``HyperparameterTuningJob`` the way Google's samples do
(``aiplatform.gapic.JobServiceClient`` and ``create_hyperparameter_tuning_job`` with the job as a
dict: the high-level ``aiplatform.HyperparameterTuningJob`` has no ``submit``, only ``run``,
whose ``sync=False`` form polls in a thread until the job ends; see docs/performance.md). No
ledger, no validation, no dedup: it is here only to be measured against. It points at the local
Vertex AI emulator over REST (the SDK's ``api_transport="rest"`` with an ``http://`` endpoint and
anonymous credentials), because the SDK's default gRPC channel needs TLS, which the emulator does
not speak; against Google it would use gRPC.
"""

from __future__ import annotations

import base64
import json
import os

import functions_framework
from cloudevents.http import CloudEvent
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform
from google.cloud.aiplatform_v1 import Scheduling

PROJECT = "local-project"
REGION = "us-central1"
MARKER_SUFFIX = "/_SUCCESS"
MAX_WAIT_SECONDS = 2 * 3600
TIMEOUT_SECONDS = 48 * 3600
SWEEP_TIMEOUT_SECONDS = 12 * 3600


def _init() -> None:
    aiplatform.init(
        project=PROJECT,
        location=REGION,
        staging_bucket="gs://bench-staging",
        api_endpoint=f"http://{os.environ['VERTEX_AI_EMULATOR_HOST']}",
        api_transport="rest",
        credentials=AnonymousCredentials(),
    )


@functions_framework.cloud_event
def on_object_finalized(cloud_event: CloudEvent) -> None:
    """Start a FLEX_START job when a dataset's ``_SUCCESS`` marker lands; ignore other objects."""
    data = cloud_event.data
    name: str = data["name"]
    if not name.endswith(MARKER_SUFFIX):
        return
    _init()
    dataset_uri = f"gs://{data['bucket']}/{name.removesuffix(MARKER_SUFFIX)}/"
    job = aiplatform.CustomJob(
        display_name=f"resnet-{data['generation']}",
        worker_pool_specs=[
            {
                "machine_spec": {
                    "machine_type": "a2-highgpu-1g",
                    "accelerator_type": "NVIDIA_TESLA_A100",
                    "accelerator_count": 1,
                },
                "replica_count": 1,
                "disk_spec": {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100},
                "container_spec": {
                    "image_uri": "us-docker.pkg.dev/local-project/train/resnet:1.4",
                    "args": [f"--data={dataset_uri}", "--epochs=90"],
                },
            }
        ],
    )
    job.submit(
        service_account="trainer@local-project.iam.gserviceaccount.com",
        timeout=TIMEOUT_SECONDS,
        scheduling_strategy=Scheduling.Strategy.FLEX_START,
        max_wait_duration=MAX_WAIT_SECONDS,
    )


@functions_framework.cloud_event
def on_sweep_finalized(cloud_event: CloudEvent) -> None:
    """Start a FLEX_START hyperparameter tuning job when a sweep's ``_SUCCESS`` marker lands."""
    data = cloud_event.data
    name: str = data["name"]
    if not name.endswith(MARKER_SUFFIX):
        return
    dataset_uri = f"gs://{data['bucket']}/{name.removesuffix(MARKER_SUFFIX)}/"
    client = aiplatform.gapic.JobServiceClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options={"api_endpoint": f"http://{os.environ['VERTEX_AI_EMULATOR_HOST']}"},
    )
    client.create_hyperparameter_tuning_job(
        parent=f"projects/{PROJECT}/locations/{REGION}",
        hyperparameter_tuning_job={
            "display_name": f"resnet-sweep-{data['generation']}",
            "study_spec": {
                "metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
                "parameters": [
                    {
                        "parameter_id": "learning_rate",
                        "double_value_spec": {"min_value": 0.0001, "max_value": 0.1},
                        "scale_type": "UNIT_LOG_SCALE",
                    },
                    {
                        "parameter_id": "batch_size",
                        "discrete_value_spec": {"values": [64, 128, 256]},
                    },
                ],
            },
            "max_trial_count": 16,
            "parallel_trial_count": 4,
            "trial_job_spec": {
                "worker_pool_specs": [
                    {
                        "machine_spec": {
                            "machine_type": "a2-highgpu-1g",
                            "accelerator_type": "NVIDIA_TESLA_A100",
                            "accelerator_count": 1,
                        },
                        "replica_count": 1,
                        "disk_spec": {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100},
                        "container_spec": {
                            "image_uri": "us-docker.pkg.dev/local-project/train/resnet:1.4",
                            "args": [f"--data={dataset_uri}", "--epochs=90"],
                        },
                    }
                ],
                "service_account": "trainer@local-project.iam.gserviceaccount.com",
                "scheduling": {
                    "timeout": {"seconds": SWEEP_TIMEOUT_SECONDS},
                    "strategy": Scheduling.Strategy.FLEX_START,
                    "max_wait_duration": {"seconds": MAX_WAIT_SECONDS},
                },
            },
        },
    )


@functions_framework.cloud_event
def on_job_event(cloud_event: CloudEvent) -> None:
    """Read the job a job-state message names and log its state."""
    body = json.loads(base64.b64decode(cloud_event.data["message"]["data"]))
    _init()
    job = aiplatform.CustomJob.get(body["job_name"])
    print(f"{job.resource_name}: {job.state.name}")
