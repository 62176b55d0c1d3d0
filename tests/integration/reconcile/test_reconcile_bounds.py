"""One tick's Vertex AI calls are bounded, two ticks at once double nothing, the watchdog acts."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from google.cloud.aiplatform_v1 import CustomJob
from reconcile_test_support import EAST_REGION, REGION, World, of_run
from run_builders import a_run, an_attempt

from emulator_stack import LOCAL_PROJECT
from shared.adapters import vertex
from shared.adapters.ledger import CancelReason, RunStatus
from shared.handlers.reconcile import WatchdogReason, reconcile
from shared.model.results import DispatchOutcome

PAGE_SIZE = vertex.LIST_PAGE_SIZE
OVERDUE_CLAIM = f"{WatchdogReason.OVERDUE_WAIT.value}@attempt1"  # once per attempt
RUNS_PER_REGION = 150
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


def _open_run_with_job(world: World, region: str, index: int) -> None:
    """A SUBMITTED run whose attempt 1 has a real job in the emulator, as dispatch leaves it."""
    run_id = f"r-{region.replace('-', '')[:8]}{index:016x}"
    parent = f"projects/{LOCAL_PROJECT}/locations/{region}"
    job = CustomJob.from_json(json.dumps(CPU_JOB))
    job.labels = {"vd-run": run_id, "vd-attempt": "1"}
    intent_at = world.services.now()
    created = vertex.create_custom_job(parent, job)
    attempt = an_attempt(
        1,
        region=region,
        parent=parent,
        intent_at=intent_at,
        job_name=created.name,
        state=created.state.name,
    )
    world.services.ledger.open_run(
        a_run(
            RunStatus.SUBMITTED,
            attempt,
            run_id=run_id,
            run_key=f"request:probe-{region}-{index}",
            route="on-request",
            template="flex-a100",
            trigger={"kind": "JobRequest"},
        )
    )


def test_vertex_calls_per_tick_stay_within_the_bound(world: World) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda i: _open_run_with_job(world, (REGION, EAST_REGION)[i % 2], i),
                range(2 * RUNS_PER_REGION),
            )
        )
    world.vertex.forget_requests()

    report = world.reconcile()

    lists = world.vertex.requests("ListCustomJobs")
    runs = 2 * RUNS_PER_REGION
    assert report.runs_read == runs
    assert report.jobs_not_listed == ()
    assert len(lists) == report.list_calls
    assert len(lists) <= 2 * math.ceil(runs / PAGE_SIZE) + 2
    assert {entry["resource"].split("/")[3] for entry in lists} == {REGION, EAST_REGION}
    assert world.vertex.requests("GetCustomJob") == []  # never one Get per job


def test_the_watchdog_cancels_a_job_waiting_past_its_max_wait_and_alerts_once(
    world: World,
) -> None:
    starved = world.request_run("flex-l4-starved")  # no L4s in the region: it stays queued
    assert starved.outcome is DispatchOutcome.SUBMITTED
    # Vertex AI should end it at its 2 h max wait; the watchdog acts if it has not by + 30 min.
    later = world.services.now() + timedelta(hours=2, minutes=31)

    first = reconcile(world.services, later)
    second = reconcile(world.services, later)

    assert first.watchdog_cancels == 1
    [cancel] = world.vertex.requests("CancelCustomJob")
    assert cancel["resource"] == starved.job_name
    [alert] = of_run(world.alerts.pull(), starved.run_id)
    assert alert.body()["reason"] == WatchdogReason.OVERDUE_WAIT.value
    assert "is cancelling it" in alert.body()["message"]
    assert second.alerts_sent == 0
    assert OVERDUE_CLAIM in world.run(starved.run_id).alerts
    # Noted on the attempt: however the job now ends, its end is read as the watchdog's cancel.
    last = world.run(starved.run_id).last_attempt
    assert last.cancel_requested_at is not None
    assert last.cancel_reason == CancelReason.QUEUE_TIMEOUT


def test_two_reconciles_at_once_make_no_duplicate_jobs_or_alerts(world: World) -> None:
    world.vertex.call(
        "POST", "outcomes", {"result": "internal_error", "duration": "1m", "times": 1}
    )
    failing = world.request_run("flex-a100")
    starved = world.request_run("flex-l4-starved")
    world.vertex.advance(3 * 60 + 1)  # the first job fails with INTERNAL
    world.reconcile()
    assert world.run(failing.run_id).status is RunStatus.WAITING_RETRY
    world.vertex.advance(11 * 60)  # its backoff has passed
    later = world.services.now() + timedelta(hours=2, minutes=31)

    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda _: reconcile(world.services, later), range(2)))

    retries = world.retries.pull()
    alerts = world.alerts.pull()
    assert sum(r.actions_taken.get("backoff_retries", 0) for r in reports) >= 1
    results = world.deliver_retries(retries) + world.deliver_retries(retries)  # and redelivered
    assert [r.outcome for r in results].count(DispatchOutcome.SUBMITTED) == 1
    assert len(world.creates(failing.run_id)) == 2  # attempt 1, and one attempt 2
    assert [a.body()["reason"] for a in of_run(alerts, starved.run_id)] == [
        WatchdogReason.OVERDUE_WAIT.value
    ]
    assert world.run(starved.run_id).alerts.count(OVERDUE_CLAIM) == 1
