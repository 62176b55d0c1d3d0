"""The reconciler is fair above ``reconcile_max_runs`` and backs off when Vertex AI throttles it.

- 5,000 active runs, ``reconcile_max_runs: 1000``: every run's job is RUNNING in the emulator
  while the ledger still says QUEUED, and a run stays active once its RUNNING is recorded. An
  unordered query would read the same 1,000 runs every tick; the round-robin records all 5,000
  in 5 ticks, and after 4 a thousand are still unrecorded.
- A ListCustomJobs refused with RESOURCE_EXHAUSTED stops the tick's Vertex AI calls; the next tick
  within the pause makes none (its ledger work goes on); the first tick after it lists again,
  records the states and ends the backoff.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from google.cloud.aiplatform_v1 import CustomJob, JobState
from reconcile_test_support import EAST_REGION, REGION, World
from run_builders import a_run, an_attempt

from emulator_stack import LOCAL_PROJECT
from shared.adapters import clients, vertex
from shared.adapters.ledger import RetryPlan, Run, RunStatus, run_to_document
from shared.handlers.reconcile import ReconcileReport, reconcile
from shared.policy.reconcile_pace import VertexPace

ACTIVE_RUNS = 5000
MAX_RUNS = 1000
FIRESTORE_BATCH = 500  # Firestore's limit of writes per batch
RUNNING = JobState.JOB_STATE_RUNNING.name
CPU_JOB = {
    "displayName": "cpu-probe",
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "containerSpec": {"imageUri": "us-docker.pkg.dev/local-project/train/probe:1"},
            }
        ]
    },
}
THROTTLED = {
    "method": "ListCustomJobs",
    "code": "RESOURCE_EXHAUSTED",
    "message": "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit "
    "'Resource management (CRUD) requests per minute per region'",
    "count": 1,
}


@pytest.fixture
def fair_world(world: World) -> Iterator[World]:
    """The world with ``reconcile_max_runs: 1000``, and jobs that run for a day."""
    config = dataclasses.replace(world.services.config, reconcile_max_runs=MAX_RUNS)
    world.vertex.call("POST", "outcomes", {"result": "succeeded", "duration": "24h"})
    yield dataclasses.replace(world, services=dataclasses.replace(world.services, config=config))


def _create_job(run_id: str, region: str) -> CustomJob:
    job = CustomJob.from_json(json.dumps(CPU_JOB))
    job.labels = {"vd-run": run_id, "vd-attempt": "1"}
    return vertex.create_custom_job(f"projects/{LOCAL_PROJECT}/locations/{region}", job)


def _seed(world: World, count: int) -> list[str]:
    """``count`` SUBMITTED runs, each with a real job in the emulator (half per region), as
    dispatch leaves them; written to the ledger in batches. The run ids."""
    now = world.services.now()
    run_ids = [f"r-{index:024x}" for index in range(count)]
    regions = [(REGION, EAST_REGION)[index % 2] for index in range(count)]
    with ThreadPoolExecutor(16) as pool:
        jobs = list(pool.map(_create_job, run_ids, regions))
    runs = [
        a_run(
            RunStatus.SUBMITTED,
            an_attempt(
                1,
                region=region,
                parent=f"projects/{LOCAL_PROJECT}/locations/{region}",
                intent_at=now,
                job_name=job.name,
                state=job.state.name,
            ),
            run_id=run_id,
            run_key=f"request:fair-{run_id}",
            route="on-request",
            template="flex-a100",
            trigger={"kind": "JobRequest"},
            created_at=now,  # all in one instant: only the run id orders them
            updated_at=now,
        )
        for run_id, region, job in zip(run_ids, regions, jobs, strict=True)
    ]
    _write(world, runs)
    return run_ids


def _write(world: World, runs: list[Run]) -> None:
    firestore = clients.firestore_client(LOCAL_PROJECT)
    collection = firestore.collection(world.services.ledger._collection)
    for start in range(0, len(runs), FIRESTORE_BATCH):
        batch = firestore.batch()
        for run in runs[start : start + FIRESTORE_BATCH]:
            batch.set(collection.document(run.run_id), run_to_document(run))
        batch.commit()


def _recorded_running(world: World) -> int:
    """How many runs the ledger records as RUNNING (one count query, no document read)."""
    from google.cloud.firestore_v1 import FieldFilter

    firestore = clients.firestore_client(LOCAL_PROJECT)
    query = firestore.collection(world.services.ledger._collection).where(
        filter=FieldFilter("status", "==", RunStatus.RUNNING.value)
    )
    [[count]] = query.count().get()
    return int(count.value)


def test_5000_active_runs_are_all_checked_within_5_ticks_of_1000(fair_world: World) -> None:
    world = fair_world
    started = time.perf_counter()
    run_ids = _seed(world, ACTIVE_RUNS)
    print(f"seeded {ACTIVE_RUNS} runs in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    world.vertex.advance(5 * 60)  # every job is RUNNING now; the ledger still says QUEUED
    assert {job.state.name for job in _all_jobs()} == {RUNNING}

    reports: list[ReconcileReport] = []
    recorded: list[int] = []
    for _tick in range(5):
        tick_started = time.perf_counter()
        reports.append(world.reconcile())
        recorded.append(_recorded_running(world))
        print(f"tick: {time.perf_counter() - tick_started:.1f} s", file=sys.stderr)

    assert [r.runs_read for r in reports] == [MAX_RUNS] * 5
    assert [r.states_recorded for r in reports] == [MAX_RUNS] * 5
    assert recorded == [1000, 2000, 3000, 4000, 5000]  # after 4 ticks, 1,000 still unchecked
    assert {world.run(run_id).last_attempt.state for run_id in run_ids[::97]} == {RUNNING}
    assert [r.cursor_run_id for r in reports] == [run_ids[999 + 1000 * i] for i in range(5)]
    assert not any(r.round_wrapped for r in reports)
    assert all(r.errors == () and r.jobs_not_listed == () for r in reports)

    sixth = world.reconcile()  # the round goes on from the oldest run, nothing left to record

    assert sixth.round_wrapped
    assert sixth.runs_read == MAX_RUNS
    assert sixth.states_recorded == 0
    assert sixth.cursor_run_id == run_ids[999]


def _all_jobs() -> list[CustomJob]:
    return [
        job
        for region in (REGION, EAST_REGION)
        for page in vertex.list_custom_jobs(f"projects/{LOCAL_PROJECT}/locations/{region}")
        for job in page
    ]


def test_a_throttled_list_backs_off_without_a_vertex_call_then_recovers(world: World) -> None:
    run_ids = _seed(world, 20)
    world.vertex.advance(5 * 60)  # the jobs are RUNNING: the ledger has their state to record
    waiting = a_run(
        RunStatus.WAITING_RETRY,
        an_attempt(1, region=REGION, parent=f"projects/{LOCAL_PROJECT}/locations/{REGION}"),
        run_id="r-ffffffffffffffffffffffff",
        run_key="request:fair-waiting",
        route="on-request",
        template="flex-a100",
        trigger={"kind": "JobRequest"},
        next_retry=RetryPlan(world.services.now(), 2, 0, "capacity"),
        created_at=world.services.now(),
    )
    world.vertex.call("POST", "faults", THROTTLED)
    world.vertex.forget_requests()
    now = world.services.now()

    throttled = reconcile(world.services, now)

    assert throttled.vertex_pace == VertexPace.THROTTLED
    assert throttled.vertex_calls == 1  # the refused page: the other region was not listed
    assert len(world.vertex.requests("ListCustomJobs")) == 1
    assert throttled.states_recorded == 0
    assert throttled.vertex_throttles == 1
    assert throttled.vertex_paused_until == (now + timedelta(minutes=1)).isoformat()
    assert any("throttled" in error for error in throttled.errors)

    _write(world, [waiting])  # a retry falls due: ledger work the pause must not stop
    world.vertex.forget_requests()
    paused = reconcile(world.services, now + timedelta(seconds=30))

    assert world.vertex.requests("ListCustomJobs") == []
    assert paused.vertex_pace == VertexPace.PAUSED
    assert paused.vertex_calls == 0
    assert paused.vertex_throttles == 1
    assert paused.actions_taken.get("backoff_retries") == 1
    assert [m.body()["run_id"] for m in world.retries.pull()] == [waiting.run_id]

    recovered = reconcile(world.services, now + timedelta(minutes=1, seconds=1))

    assert recovered.vertex_pace == VertexPace.CALLED
    assert recovered.vertex_calls == len(world.vertex.requests("ListCustomJobs")) == 2
    assert recovered.states_recorded == 20
    assert recovered.vertex_throttles == 0
    assert recovered.vertex_paused_until is None
    assert {world.run(run_id).last_attempt.state for run_id in run_ids} == {RUNNING}


def test_throttled_again_after_the_pause_doubles_it(world: World) -> None:
    _seed(world, 4)
    world.vertex.call("POST", "faults", {**THROTTLED, "count": 2})
    now = world.services.now()

    first = reconcile(world.services, now)
    second = reconcile(world.services, now + timedelta(minutes=1))

    assert (first.vertex_throttles, second.vertex_throttles) == (1, 2)
    assert second.vertex_paused_until == (now + timedelta(minutes=3)).isoformat()


def test_a_throttled_watchdog_cancel_waits_for_the_pause_then_cancels(world: World) -> None:
    starved = world.request_run("flex-l4-starved")  # no L4s in the region: it stays queued
    later = world.services.now() + timedelta(hours=2, minutes=31)  # past max wait + grace
    world.vertex.call("POST", "faults", {**THROTTLED, "method": "CancelCustomJob"})
    world.vertex.forget_requests()

    throttled = reconcile(world.services, later)
    paused = reconcile(world.services, later + timedelta(seconds=30))
    cancels_while_paused = len(world.vertex.requests("CancelCustomJob"))
    recovered = reconcile(world.services, later + timedelta(minutes=1, seconds=1))

    assert throttled.vertex_pace == VertexPace.THROTTLED
    assert (throttled.watchdog_cancels, throttled.alerts_sent) == (0, 1)  # alerted, not cancelled
    assert paused.vertex_pace == VertexPace.PAUSED
    assert cancels_while_paused == 1  # the throttled one only
    assert recovered.vertex_pace == VertexPace.CALLED
    assert (recovered.watchdog_cancels, recovered.alerts_sent) == (1, 0)  # alerted once in all
    assert [c["resource"] for c in world.vertex.requests("CancelCustomJob")] == [
        starved.job_name
    ] * 2
    assert world.run(starved.run_id).last_attempt.cancel_requested_at is not None
