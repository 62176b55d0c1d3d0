"""``vertex-dispatch plan`` and dispatch run the same pipeline: for the same event and config, the
job plan prints is the job dispatch creates, field for field.

Dispatch runs for real (the functions under functions-framework, the Vertex AI emulator); the plan
is computed in this process from the same config file and the same CloudEvent.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from dispatch_test_support import (
    CONFIG,
    DATASETS_BUCKET,
    AlertsReader,
    FunctionUrls,
    VertexAdmin,
    deliver_binary,
    job_request,
    message_published,
    object_finalized,
    persistent_resource,
)

from shared.adapters.config_source import load_config
from tooling.planning import PlanVerdict, plan_event

DATASET = "gs://dispatch-it-datasets/datasets/requested/"


@pytest.mark.parametrize(
    ("template", "pool_state", "placement_used"),
    [
        pytest.param("flex-a100", None, 0, id="FLEX_START"),
        pytest.param("pool-then-flex", "RUNNING", 0, id="a persistent resource with room"),
        pytest.param("pool-then-flex", "STOPPING", 1, id="a stopped pool: the next placement"),
        pytest.param("spot-a100", None, 0, id="SPOT in us-east4 with its region's CMEK key"),
        pytest.param("on-demand-a100", None, 0, id="STANDARD"),
        pytest.param("any-reservation-a100", None, 0, id="ANY_RESERVATION"),
    ],
)
def test_plan_shows_the_job_dispatch_creates_for_a_request(
    template: str,
    pool_state: str | None,
    placement_used: int,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    if pool_state is not None:
        vertex.put_persistent_resource(persistent_resource(state=pool_state, replicas=1))
    event = message_published(job_request(fresh_name("agree"), template, {"dataset_uri": DATASET}))

    plan = plan_event(load_config(str(CONFIG)), event)
    assert deliver_binary(functions.request, event) == 200

    assert plan.verdict is PlanVerdict.VALID
    [created] = vertex.created_jobs(plan.run_id)
    planned = plan.placements[placement_used].job_json
    assert planned is not None
    assert json.loads(planned) == created
    assert alerts.pull() == []


def test_the_new_kinds_reach_vertex_ai_as_rendered(
    functions: FunctionUrls, vertex: VertexAdmin, fresh_name: Callable[[str], str]
) -> None:
    """What the create call carries for each new kind, read from the emulator's request log."""
    sent = {}
    for template in ("spot-a100", "on-demand-a100", "any-reservation-a100"):
        event = message_published(
            job_request(fresh_name(template), template, {"dataset_uri": DATASET})
        )
        plan = plan_event(load_config(str(CONFIG)), event)
        assert deliver_binary(functions.request, event) == 200
        [sent[template]] = vertex.created_jobs(plan.run_id)
    spot, on_demand, reservation = sent.values()
    assert spot["jobSpec"]["scheduling"]["strategy"] == "SPOT"
    assert spot["encryptionSpec"] == {
        "kmsKeyName": "projects/local-project/locations/us-east4/keyRings/train/cryptoKeys/jobs"
    }
    assert on_demand["jobSpec"]["scheduling"]["strategy"] == "STANDARD"
    assert "strategy" not in reservation["jobSpec"]["scheduling"]
    [pool] = reservation["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"]["reservationAffinity"] == {
        "reservationAffinityType": "ANY_RESERVATION"
    }


def test_plan_shows_the_job_dispatch_creates_for_a_dataset_marker(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    marker = f"datasets/{fresh_name('agree')}/_SUCCESS"
    event = object_finalized(DATASETS_BUCKET, marker, generation=1733100000000001)

    plan = plan_event(load_config(str(CONFIG)), event)
    assert deliver_binary(functions.object_finalized, event) == 200

    assert plan.verdict is PlanVerdict.VALID
    [created] = vertex.created_jobs(plan.run_id)
    assert json.loads(plan.placements[0].job_json or "{}") == created
    assert alerts.pull() == []
