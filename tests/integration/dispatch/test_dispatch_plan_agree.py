"""``vertex-dispatch plan`` and dispatch run the same pipeline: for the same event and config, the
job plan prints is the job dispatch creates, field for field.

Dispatch runs for real (the functions under functions-framework, the Vertex AI emulator); the plan
is computed in this process from the same config file and the same CloudEvent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cloudevents.conversion import to_structured
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
from shared.adapters.ledger import Ledger
from shared.model.runs import Attempt, Run, RunStatus
from shared.policy.records import placement_record
from tooling import main
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


def a_finished_run(name: str, index: int, waited: timedelta) -> Run:
    """A run of template learned-flex whose job on placement ``index`` started ``waited`` after
    its create, two hours ago, and succeeded."""
    placement = load_config(str(CONFIG)).templates["learned-flex"].placements[index]
    region = placement.region or "us-central1"
    created = datetime.now(UTC) - timedelta(hours=2)
    attempt = Attempt(
        number=1,
        placement=placement_record(placement),
        region=region,
        parent=f"projects/local-project/locations/{region}",
        intent_at=created,
        job_name=f"projects/local-project/locations/{region}/customJobs/{name}",
        state="JOB_STATE_SUCCEEDED",
        job_created_at=created,
        started_at=created + waited,
        ended_at=created + waited + timedelta(hours=1),
        machine="a2-highgpu-1g+NVIDIA_TESLA_A100x1",
        gpus=1,
    )
    return Run(
        name, f"history:{name}", "on-request", "learned-flex", {},
        status=RunStatus.SUCCEEDED, attempts=(attempt,),
    )  # fmt: skip


def test_plan_from_the_ledger_shows_the_learned_order_dispatch_walks(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    alerts: AlertsReader,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # us-central1 took 50 and 40 minutes to start; us-east4 4 and 6.
    for index, minutes in ((0, 50), (0, 40), (1, 4), (1, 6)):
        ledger.open_run(a_finished_run(fresh_name("history"), index, timedelta(minutes=minutes)))
    event = message_published(
        job_request(fresh_name("learned"), "learned-flex", {"dataset_uri": DATASET})
    )
    event_file = tmp_path / "event.json"
    event_file.write_bytes(to_structured(event)[1])
    plan_args = ["plan", "--config", str(CONFIG), "--event", str(event_file), "--json"]

    assert main([*plan_args]) == 0
    written = json.loads(capsys.readouterr().out)
    assert main([*plan_args, "--history-from-ledger"]) == 0
    learned = json.loads(capsys.readouterr().out)
    assert deliver_binary(functions.request, event) == 200

    assert (written["placement_order"]["order"], written["placement_order"]["learned"]) == (
        [0, 1],
        False,
    )
    order = learned["placement_order"]
    assert (order["order"], order["learned"]) == ([1, 0], True)
    assert "median time-to-start 5m" in order["reasons"]["1"]
    [created] = vertex.created_jobs(learned["run_id"])
    assert learned["placements"][0]["index"] == 1
    assert learned["placements"][0]["job"] == created
    snapshot = ledger.get_run(learned["run_id"])
    assert snapshot is not None and snapshot.run.placement_order == (1, 0)
    assert alerts.pull() == []
