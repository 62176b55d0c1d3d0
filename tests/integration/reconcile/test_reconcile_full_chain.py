"""The whole placement chain on the emulators: every kind refuses or stocks out in turn, and the
run ends in exactly one successful job on the last; a reservation that stocks out at run time
cools down; a CMEK mismatch moves on.

Dispatch, the job-state function and the reconciler run in this process (the reconcile world:
the emulator's clock is the only clock). The chain (configs/fullchain.yaml, ``every-kind``) is a
named reservation, a persistent resource, Spot, FLEX_START in us-central1, then on-demand in
us-east4. The first two are full: jobs of another system hold the reservation's one VM and the
pool's one replica, so the live rules (Compute Engine's reservations.get, GetPersistentResource)
pass them over in the first delivery. The Spot job is preempted (or stocks out), and the
FLEX_START wait expires with no A100s left in us-central1; each end is capacity, so the chain
moves on. One end is read from a hint (on_job_event), the other by a reconcile tick (no event),
and the retries are the messages the functions published, each delivered twice (at least once).
Assertions read state only: the ledger (attempts, skips, cooldowns), the emulator's jobs and
request log, the alerts topic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from reconcile_test_support import EAST_REGION, REGION, Message, World, of_run

from emulator_stack import LOCAL_PROJECT
from shared.adapters import clients, vertex
from shared.adapters.config_source import load_config
from shared.adapters.ledger import RunStatus
from shared.decode.hints import job_state_message
from shared.handlers.jobstate import JobStateOutcome
from shared.handlers.services import Services
from shared.model.results import DispatchOutcome
from vertex_ai_emulator.server import EmulatorServer

CONFIG = Path(__file__).parent / "configs" / "fullchain.yaml"
PARENT = f"projects/{LOCAL_PROJECT}/locations/{REGION}"
EAST_PARENT = f"projects/{LOCAL_PROJECT}/locations/{EAST_REGION}"
POOL = f"{PARENT}/persistentResources/a100-pool"
RESERVATION = f"projects/{LOCAL_PROJECT}/zones/us-central1-a/reservations/a100-res"
A100 = "NVIDIA_TESLA_A100"
MACHINE = {"machineType": "a2-highgpu-1g", "acceleratorType": A100, "acceleratorCount": 1}
DISK = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
JOB_KEY = "projects/local-project/locations/us-central1/keyRings/ml/cryptoKeys/train-key"
OTHER_KEY = "projects/local-project/locations/us-central1/keyRings/ml/cryptoKeys/pool-key"
PROVISIONING = 2 * 60  # the world's PENDING time on new machines
RUNS = 10 * 60  # the world's default outcome: succeeded after 10 minutes RUNNING
PREEMPT_AFTER = 5 * 60
MAX_WAIT = 60 * 60  # the FLEX_START placement's max_wait

RESERVATION_RECORD = {"reservation": {"name": RESERVATION, "region": REGION}}
POOL_RECORD = {"persistent_resource": "a100-pool"}
SPOT_RECORD: dict[str, Any] = {"spot": {}}
FLEX_RECORD = {"flex_start": {"max_wait": "3600s"}}
ON_DEMAND_RECORD = {"on_demand": {"region": EAST_REGION}}


@pytest.fixture
def chained(
    world: World, vertex_server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    """The reconcile world with configs/fullchain.yaml, and Compute Engine reads going to the
    emulator (as the local stack points them)."""
    monkeypatch.setenv(
        clients.COMPUTE_EMULATOR_VARIABLE, vertex_server.rest_url.removeprefix("http://")
    )
    services = Services(
        load_config(str(CONFIG)), now=world.vertex.now, _ledger=world.services.ledger
    )
    yield replace(world, services=services)


def _other_systems_job(name: str, **job_spec: Any) -> CustomJob:
    """A two-day job of another system (no vd-run label: the reconciler never lists it)."""
    pool = {
        "machineSpec": {**MACHINE, **job_spec.pop("machine_spec", {})},
        "diskSpec": DISK,
        "replicaCount": "1",
        "containerSpec": {"imageUri": "us-docker.pkg.dev/other/job:1"},
    }
    return CustomJob.from_json(
        json.dumps({"displayName": name, "jobSpec": {**job_spec, "workerPoolSpecs": [pool]}})
    )


def _fill_the_reservation_and_the_pool(world: World) -> None:
    """A one-VM reservation and a one-replica pool, each held by another system's job."""
    world.vertex.call(
        "PUT",
        "reservations",
        {
            "name": RESERVATION,
            "machine_type": "a2-highgpu-1g",
            "accelerator_type": A100,
            "accelerator_count": 1,
            "count": 1,
        },
    )
    world.vertex.call(
        "PUT",
        "persistentResources",
        {
            "name": POOL,
            "resourcePools": [{"machineSpec": MACHINE, "diskSpec": DISK, "replicaCount": "1"}],
        },
    )
    world.vertex.call(
        "POST", "outcomes", {"display_name": "^blocker-", "result": "succeeded", "duration": "2d"}
    )
    affinity = {
        "reservationAffinity": {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [RESERVATION],
        }
    }
    vertex.create_custom_job(PARENT, _other_systems_job("blocker-res", machine_spec=affinity))
    vertex.create_custom_job(
        PARENT, _other_systems_job("blocker-pool", persistentResourceId="a100-pool")
    )
    world.vertex.advance(60)  # both hold their VM / replica
    [reservation] = world.vertex.call("GET", "reservations")["reservations"]
    assert (reservation["in_use"], reservation["free"]) == (1, 0)


def _hint(job_name: str) -> Message:
    """The hint a log sink or the reconciler would publish for the job, with its state now."""
    state = vertex.get_custom_job(job_name).state.name
    return Message(*job_state_message(job_name, state), f"hint-{job_name}-{state}")


def _deliver_due_retry(world: World, run_id: str) -> None:
    """The retry the functions published for the run (at the decision, or by a tick), dispatched
    twice, as an at-least-once delivery may: one job."""
    world.reconcile()
    [message] = of_run(world.retries.pull(), run_id)
    retried, again = world.deliver_retries([message, message])
    assert retried.outcome is DispatchOutcome.SUBMITTED, retried
    assert again.outcome is DispatchOutcome.DUPLICATE, again


def _run_jobs(run_id: str) -> list[CustomJob]:
    """Every job the emulator holds for the run, in both regions."""
    return [
        job
        for parent in (PARENT, EAST_PARENT)
        for job in vertex.find_jobs_by_label(parent, "vd-run", run_id)
    ]


@pytest.mark.parametrize("spot_ends", ["preempted", "stocked out"])
def test_every_placement_kind_refuses_in_turn_and_the_last_runs_exactly_one_job(
    chained: World, spot_ends: str
) -> None:
    world = chained
    _fill_the_reservation_and_the_pool(world)
    if spot_ends == "preempted":
        world.vertex.call("PUT", "spot", {"preempt_after": f"{PREEMPT_AFTER}s"})
    else:  # no A100 left in us-central1 for Spot (nor, later, for FLEX_START)
        world.vertex.call(
            "PUT", "capacity", {"region": REGION, "acceleratorType": A100, "count": 0}
        )
    world.vertex.forget_requests()

    # The first delivery: the reservation and the pool are read and passed over; Spot is created.
    started = world.request_run("every-kind")

    assert started.outcome is DispatchOutcome.SUBMITTED
    [spot] = world.run(started.run_id).attempts
    assert (spot.placement, spot.region) == (SPOT_RECORD, REGION)
    assert [(s.placement, s.region, s.skip_class) for s in spot.skips] == [
        (RESERVATION_RECORD, REGION, "unavailable"),
        (POOL_RECORD, REGION, "unavailable"),
    ]
    assert "has 0 free (1 of 1 in use)" in spot.skips[0].reason
    assert "other jobs use 1 of 1" in spot.skips[1].reason
    assert [r["request"]["reservation"] for r in world.vertex.requests("GetReservation")] == [
        "a100-res"
    ]
    assert [r["resource"] for r in world.vertex.requests("GetPersistentResource")] == [POOL]

    # Spot ends for capacity; its end comes as a hint to on_job_event.
    world.vertex.advance(PROVISIONING + PREEMPT_AFTER + 30)
    assert vertex.get_custom_job(spot.job_name or "").state.name == "JOB_STATE_FAILED"
    hint = _hint(spot.job_name or "")
    decided, again = world.deliver_hints([hint, hint])
    assert (decided.outcome, again.outcome) == (JobStateOutcome.DECIDED, JobStateOutcome.DROPPED)
    waiting = world.run(started.run_id)
    assert waiting.status is RunStatus.WAITING_RETRY
    spot_error = waiting.attempts[0].error
    assert spot_error is not None and spot_error["class"] == "capacity"
    assert "Resources are insufficient in region: us-central1" in spot_error["message"]
    assert ("preempted" in spot_error["message"]) is (spot_ends == "preempted")
    assert waiting.next_retry is not None
    assert (waiting.next_retry.attempt, waiting.next_retry.placement_index) == (2, 3)

    # FLEX_START waits in us-central1, which has no A100 now, until its max wait expires.
    world.vertex.call("PUT", "capacity", {"region": REGION, "acceleratorType": A100, "count": 0})
    _deliver_due_retry(world, started.run_id)
    flex = world.run(started.run_id).attempts[1]
    assert (flex.placement, flex.region, flex.skips) == (FLEX_RECORD, REGION, ())
    world.vertex.advance(MAX_WAIT + 60)
    # No event: the reconcile tick reads the end from its listing and decides it.
    tick = world.reconcile()
    assert tick.decisions_made == 1
    moved = world.run(started.run_id)
    assert moved.attempts[1].state == "JOB_STATE_FAILED"
    flex_error = moved.attempts[1].error
    assert flex_error is not None and flex_error["class"] == "capacity"
    assert "max wait duration" in flex_error["message"]
    assert moved.next_retry is not None
    assert (moved.next_retry.attempt, moved.next_retry.placement_index) == (3, 4)

    # On-demand in us-east4 runs the job to its end.
    _deliver_due_retry(world, started.run_id)
    on_demand = world.run(started.run_id).attempts[2]
    assert (on_demand.placement, on_demand.region, on_demand.skips) == (
        ON_DEMAND_RECORD,
        EAST_REGION,
        (),
    )
    world.vertex.advance(PROVISIONING + RUNS + 60)
    [done] = world.deliver_hints([_hint(on_demand.job_name or "")])
    assert done.outcome is JobStateOutcome.DECIDED

    run = world.run(started.run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert [(a.placement, a.state) for a in run.attempts] == [
        (SPOT_RECORD, "JOB_STATE_FAILED"),
        (FLEX_RECORD, "JOB_STATE_FAILED"),
        (ON_DEMAND_RECORD, "JOB_STATE_SUCCEEDED"),
    ]
    # Exactly one successful job, on the last placement; one job per attempt, none refused.
    jobs = _run_jobs(started.run_id)
    assert sorted(job.name for job in jobs) == sorted(a.job_name or "" for a in run.attempts)
    [succeeded] = [job for job in jobs if job.state.name == "JOB_STATE_SUCCEEDED"]
    assert succeeded.name == run.attempts[2].job_name
    assert f"/locations/{EAST_REGION}/" in succeeded.name  # the project as its number
    creates = world.creates(started.run_id)
    assert [c["status"] for c in creates] == ["OK", "OK", "OK"]
    specs = [c["request"]["customJob"]["jobSpec"] for c in creates]
    assert [s["scheduling"]["strategy"] for s in specs] == ["SPOT", "FLEX_START", "STANDARD"]
    for spec in specs:
        assert "persistentResourceId" not in spec
        assert all("reservationAffinity" not in p["machineSpec"] for p in spec["workerPoolSpecs"])
    # The first attempt's walk was the only one to read the reservation and the pool.
    assert len(world.vertex.requests("GetReservation")) == 1
    assert len(world.vertex.requests("GetPersistentResource")) == 1
    # Spot and FLEX_START in us-central1 cool down; the other systems' jobs are untouched.
    cooling = world.services.ledger.placement_cooldowns()
    assert sorted(cooling) == [
        "flex_start|us-central1|a2-highgpu-1g+NVIDIA_TESLA_A100x1",
        "spot|us-central1|a2-highgpu-1g+NVIDIA_TESLA_A100x1",
    ]
    assert {c.run_id for c in cooling.values()} == {started.run_id}
    [reservation] = world.vertex.call("GET", "reservations")["reservations"]
    assert reservation["in_use"] == 1
    assert of_run(world.alerts.pull(), started.run_id) == []


@pytest.mark.parametrize("pool_key", [OTHER_KEY, JOB_KEY], ids=["another key", "the same key"])
def test_a_persistent_resource_with_another_cmek_key_moves_on_to_the_next_placement(
    chained: World, pool_key: str
) -> None:
    world = chained
    world.vertex.call(
        "PUT",
        "persistentResources",
        {
            "name": POOL,
            "encryptionSpec": {"kmsKeyName": pool_key},
            "resourcePools": [{"machineSpec": MACHINE, "diskSpec": DISK, "replicaCount": "1"}],
        },
    )

    started = world.request_run("cmek")

    assert started.outcome is DispatchOutcome.SUBMITTED
    run = world.run(started.run_id)
    assert run.status is RunStatus.SUBMITTED
    [attempt] = run.attempts
    [create] = world.creates(started.run_id)
    assert create["status"] == "OK"
    created = create["request"]["customJob"]
    assert created["encryptionSpec"] == {"kmsKeyName": JOB_KEY}
    assert vertex.get_custom_job(attempt.job_name or "").encryption_spec.kms_key_name == JOB_KEY
    if pool_key == JOB_KEY:  # the control: the resource takes the job
        assert (attempt.placement, attempt.skips) == (POOL_RECORD, ())
        assert created["jobSpec"]["persistentResourceId"] == "a100-pool"
    else:
        assert (attempt.placement, attempt.region) == ({"on_demand": {}}, REGION)
        [skip] = attempt.skips
        assert (skip.placement, skip.skip_class) == (POOL_RECORD, "unsuitable")
        assert JOB_KEY in skip.reason and OTHER_KEY in skip.reason
        assert "persistentResourceId" not in created["jobSpec"]
        assert created["jobSpec"]["scheduling"]["strategy"] == "STANDARD"
    assert of_run(world.alerts.pull(), started.run_id) == []
    # A mismatch is no capacity failure: the resource does not cool down.
    assert world.services.ledger.placement_cooldowns() == {}


def test_a_reservation_that_fills_after_its_read_stocks_out_cools_down_and_is_passed_over(
    chained: World,
) -> None:
    # The reservation has a free VM when the first run reads it, and none when its job is made
    # (its create answers late; meanwhile the reservation shrinks): a runtime stockout of the
    # reservation, which is capacity, like a Spot or FLEX_START one. No persistent resource.
    world = chained
    world.vertex.call(
        "PUT",
        "reservations",
        {
            "name": RESERVATION,
            "machine_type": "a2-highgpu-1g",
            "accelerator_type": A100,
            "accelerator_count": 1,
            "count": 1,
        },
    )
    world.vertex.call(
        "POST", "faults", {"method": "CreateCustomJob", "latency_ms": 5000, "count": 1}
    )
    with ThreadPoolExecutor(1) as pool:
        dispatching = pool.submit(world.request_run, "every-kind")
        _wait_for(lambda: world.vertex.requests("GetReservation") != [])
        world.vertex.call("PUT", "reservations", {"name": RESERVATION, "count": 0})
        first = dispatching.result()

    assert first.outcome is DispatchOutcome.SUBMITTED
    [on_reservation] = world.run(first.run_id).attempts
    assert (on_reservation.placement, on_reservation.skips) == (RESERVATION_RECORD, ())
    world.vertex.advance(PROVISIONING + 30)
    assert world.reconcile().decisions_made == 1
    failed = world.run(first.run_id).attempts[0]
    assert failed.error is not None and failed.error["class"] == "capacity"
    assert "Reservation" in failed.error["message"]
    assert "insufficient capacity" in failed.error["message"]
    cooling = world.services.ledger.placement_cooldowns()
    key = f"reservation|{REGION}|{RESERVATION}"
    assert list(cooling) == [key]
    assert cooling[key].run_id == first.run_id

    # The retry goes on from the next placement: no persistent resource, so Spot.
    _deliver_due_retry(world, first.run_id)
    spot = world.run(first.run_id).attempts[1]
    assert (spot.placement, [(s.placement, s.skip_class) for s in spot.skips]) == (
        SPOT_RECORD,
        [(POOL_RECORD, "unavailable")],
    )

    # The reservation has room again, but it cools down: a new run tries the others first and
    # records it as passed over (after the skips of the placements it reached), without reading
    # it.
    world.vertex.call("PUT", "reservations", {"name": RESERVATION, "count": 1})
    second = world.request_run("every-kind")
    [attempt] = world.run(second.run_id).attempts
    assert attempt.placement == SPOT_RECORD
    assert [(s.placement, s.skip_class) for s in attempt.skips] == [
        (POOL_RECORD, "unavailable"),
        (RESERVATION_RECORD, "cooldown"),
    ]
    assert len(world.vertex.requests("GetReservation")) == 1  # the first run's read only

    world.vertex.advance(PROVISIONING + RUNS + 60)
    world.reconcile()
    alerts = world.alerts.pull()
    for run_id in (first.run_id, second.run_id):
        assert world.run(run_id).status is RunStatus.SUCCEEDED
        states = [job.state.name for job in _run_jobs(run_id)]
        assert states.count("JOB_STATE_SUCCEEDED") == 1
        assert of_run(alerts, run_id) == []


def _wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)
