"""A small valid config as plain data, and a way to change one value in it by key path.

Cases name the value to break with the same key path the error message must report, e.g.
``templates.resnet.worker_pools[0].accelerator.count``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from shared.config.loader import parse_config
from shared.config.model import Config

SOURCE = "tests/config.yaml"
SERVICE_ACCOUNT = "trainer@acme-ml.iam.gserviceaccount.com"
DELETE = object()  # as a value: remove the key


def base_config() -> dict[str, Any]:
    return {
        "project": "acme-ml",
        "region": "us-central1",
        "alerts_topic": "training-alerts",
        "guards": {
            "image_prefixes": ["us-docker.pkg.dev/acme-ml/train/"],
            "service_accounts": [SERVICE_ACCOUNT],
            "regions": ["us-central1", "us-east4"],
            "max_gpus_per_job": 8,
            "max_gpu_hours_per_job": 100,
        },
        "routes": [
            {
                "name": "daily",
                "gcs": {"bucket": "acme-datasets", "match": "imagenet/*/_SUCCESS"},
                "template": "resnet",
                "params": {"dataset_uri": "gs://{bucket}/{dirname}/"},
            },
            {"name": "requests", "pubsub": {"attributes": {"kind": "train"}}},
            {
                "name": "nightly",
                "schedule": "nightly-retrain",
                "template": "resnet",
                "params": {"dataset_uri": "gs://acme-datasets/imagenet/latest/"},
            },
        ],
        "templates": {
            "resnet": {
                "params": ["dataset_uri"],
                "worker_pools": [
                    {
                        "machine_type": "a2-highgpu-1g",
                        "accelerator": {"type": "NVIDIA_TESLA_A100", "count": 1},
                        "image": "us-docker.pkg.dev/acme-ml/train/resnet:1.4",
                        "args": ["--data={dataset_uri}", "--epochs=90"],
                    }
                ],
                "timeout": "48h",
                "service_account": SERVICE_ACCOUNT,
                "placement": [
                    {"persistent_resource": "a100-pool"},
                    {"flex_start": {"max_wait": "2h"}},
                ],
            }
        },
    }


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def with_value(config: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of ``config`` with the value at key ``path`` replaced (or removed for DELETE)."""
    changed = copy.deepcopy(config)
    steps = [int(index) if index else key for key, index in _STEP.findall(path)]
    parent: Any = changed
    for step in steps[:-1]:
        parent = parent[step]
    if value is DELETE:
        del parent[steps[-1]]
    else:
        parent[steps[-1]] = value
    return changed


def parse(config: dict[str, Any], **kwargs: Any) -> Config:
    return parse_config(yaml.safe_dump(config, sort_keys=False), SOURCE, **kwargs)
