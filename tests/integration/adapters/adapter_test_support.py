"""Constants and the admin-API helper shared by the adapter tests and their fixtures."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from emulator_stack import LOCAL_PROJECT

REGION = "us-central1"
PARENT = f"projects/{LOCAL_PROJECT}/locations/{REGION}"
POOL_ID = "a100-pool"
POOL_NAME = f"{PARENT}/persistentResources/{POOL_ID}"

VERTEX_WORLD: dict[str, Any] = {
    "project_numbers": {LOCAL_PROJECT: "123456789012"},
    "capacity": {REGION: {"NVIDIA_TESLA_A100": 8}},
    "persistent_resources": [
        {
            "name": POOL_NAME,
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


class VertexAdmin:
    """The emulator's ``/emulator/v1/`` admin API over plain HTTP."""

    def __init__(self, rest_url: str) -> None:
        self._base_url = f"{rest_url}/emulator/v1/"

    def call(self, http_method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            self._base_url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=http_method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def add_fault(self, **rule: Any) -> None:
        self.call("POST", "faults", rule)

    def requests(self, method: str) -> list[dict[str, Any]]:
        return self.call("GET", f"requests?method={method}")["requests"]
