"""A persistent resource that can never take the job (another CMEK key, another network, no pool
of the job's machine) is one placement that cannot take it, not a bad template: dispatch moves on
to the next placement of the chain, exactly as for a full or stopped resource, and nothing is
rejected or alerted. Through on_request, against the Vertex AI emulator's persistent resource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from dispatch_test_support import (
    AlertsReader,
    FunctionUrls,
    VertexAdmin,
    deliver_push,
    job_request,
    persistent_resource,
)

from shared.adapters.ledger import Ledger, RunStatus
from shared.model.runkeys import request_run_key, run_id

DATASET = "gs://dispatch-it-datasets/datasets/requested/"
KMS_KEY = "projects/local-project/locations/us-central1/keyRings/ml/cryptoKeys/pool-key"


def _with(**changes: Any) -> dict[str, Any]:
    resource = persistent_resource(state="RUNNING", replicas=1)
    pool_changes = changes.pop("pool", {})
    resource["resourcePools"][0].update(pool_changes)
    return {**resource, **changes}


@pytest.mark.parametrize(
    "resource",
    [
        # The template sets no key: the resource's CMEK differs from the job's (none).
        pytest.param(_with(encryptionSpec={"kmsKeyName": KMS_KEY}), id="a CMEK resource"),
        pytest.param(
            _with(network="projects/123456789012/global/networks/other-vpc"),
            id="another network",
        ),
        pytest.param(
            _with(
                pool={
                    "machineSpec": {
                        "machineType": "a2-highgpu-2g",
                        "acceleratorType": "NVIDIA_TESLA_A100",
                        "acceleratorCount": 2,
                    }
                }
            ),
            id="no pool of the job's machine",
        ),
    ],
)
def test_a_mismatched_persistent_resource_moves_to_the_next_placement(
    resource: dict[str, Any],
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.put_persistent_resource(resource)
    request = job_request(fresh_name("request"), "pool-then-flex", {"dataset_uri": DATASET})

    assert deliver_push(functions.request, request) == 200

    the_run_id = run_id(request_run_key(request.message_id, None))
    [created] = vertex.created_jobs(the_run_id)
    assert "persistentResourceId" not in created["jobSpec"]
    assert created["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.SUBMITTED
    [attempt] = run.attempts
    assert attempt.placement == {"flex_start": {"max_wait": "7200s"}}
    assert alerts.pull() == []
