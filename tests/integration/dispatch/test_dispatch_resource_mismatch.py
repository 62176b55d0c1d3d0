"""A persistent resource that can never take the job (another CMEK key, another network, no pool
of the job's machine) is one placement that cannot take it, not a bad template: dispatch moves on
to the next placement of the chain, as for a full or stopped resource, recording an `unsuitable`
skip, and nothing is rejected or alerted. When it is the only placement, no wait can help: the run
is rejected at once with one alert; when another placement may take the job later, the run waits
for it and the unsuitable one is alerted once. Through on_request, against the Vertex AI
emulator's persistent resource.
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
    [skip] = attempt.skips
    assert (skip.placement, skip.skip_class) == ({"persistent_resource": "a100-pool"}, "unsuitable")
    assert alerts.pull() == []


CMEK_RESOURCE = _with(encryptionSpec={"kmsKeyName": KMS_KEY})


def test_a_run_whose_only_placement_can_never_take_it_is_rejected_at_once(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.put_persistent_resource(CMEK_RESOURCE)
    request = job_request(fresh_name("request"), "pool-only", {"dataset_uri": DATASET})

    assert deliver_push(functions.request, request) == 200

    the_run_id = run_id(request_run_key(request.message_id, None))
    assert vertex.created_jobs(the_run_id) == []
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.REJECTED
    assert run.next_retry is None
    [alert] = alerts.pull()
    assert alert["attributes"]["reason"] == "invalid_spec"
    assert "can ever take the job" in alert["body"]["message"]
    assert KMS_KEY in alert["body"]["message"]  # what would make the resource take it


def test_a_run_waiting_for_one_placement_is_told_at_once_of_one_that_never_fits(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.put_persistent_resource(CMEK_RESOURCE)  # a100-pool never fits; spare-pool is missing
    request = job_request(fresh_name("request"), "two-pools", {"dataset_uri": DATASET})

    assert deliver_push(functions.request, request) == 200
    assert deliver_push(functions.request, request) == 200  # a redelivery: no second alert

    the_run_id = run_id(request_run_key(request.message_id, None))
    assert vertex.created_jobs(the_run_id) == []
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.WAITING_RETRY
    assert [s.skip_class for s in run.no_placement_skips] == ["unsuitable", "unavailable"]
    [alert] = alerts.pull()
    assert alert["attributes"]["reason"] == "no_placement"
    assert "a100-pool" in alert["body"]["message"]
    assert "spare-pool" not in alert["body"]["message"]
    assert "no_placement@unsuitable" in run.alerts
