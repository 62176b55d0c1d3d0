"""The watchdogs on the real emulators: a job queued past max_queue falls back to the next
placement; a run no placement takes is alerted after no_placement_alert, at most daily, and is
given up after no_placement_give_up. The emulator's clock is the only clock (``advance``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from reconcile_test_support import REGION, World, of_run

from emulator_stack import LOCAL_PROJECT
from shared.adapters import vertex
from shared.adapters.config_source import load_config
from shared.adapters.ledger import CancelReason, RunStatus
from shared.handlers.reconcile import WatchdogReason
from shared.handlers.services import Services
from shared.model.alerts import AlertReason
from shared.model.results import DispatchOutcome

CONFIG = Path(__file__).parent / "configs" / "watchdogs.yaml"
PARENT = f"projects/{LOCAL_PROJECT}/locations/{REGION}"
POOL = f"{PARENT}/persistentResources/a100-pool"
MACHINE = {
    "machineType": "a2-highgpu-1g",
    "acceleratorType": "NVIDIA_TESLA_A100",
    "acceleratorCount": 1,
}
DISK = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
HOUR = 3600


@pytest.fixture
def watched(world: World) -> World:
    """The reconcile world, running dispatch and the reconciler with the watchdogs' config."""
    services = Services(
        load_config(str(CONFIG)), now=world.vertex.now, _ledger=world.services.ledger
    )
    return replace(world, services=services)


def _pool_job(name: str, replicas: int) -> CustomJob:
    """A job of another system on the pool (no vd-run label: the reconciler never lists it):
    a chief, and ``replicas - 1`` workers on the same machine."""
    pool = {
        "machineSpec": MACHINE,
        "diskSpec": DISK,
        "replicaCount": "1",
        "containerSpec": {"imageUri": "us-docker.pkg.dev/other/job:1"},
    }
    workers = [{**pool, "replicaCount": str(replicas - 1)}] if replicas > 1 else []
    return CustomJob.from_json(
        json.dumps(
            {
                "displayName": name,
                "jobSpec": {
                    "persistentResourceId": "a100-pool",
                    "workerPoolSpecs": [pool, *workers],
                },
            }
        )
    )


def _keep_the_pools_queue_blocked(world: World) -> None:
    """A 2-replica pool where a 2-day job holds one replica and a 2-replica job waits at the head
    of the pool's FIFO: dispatch sees a free replica, yet a job created now stays QUEUED."""
    world.vertex.call(
        "PUT",
        "persistentResources",
        {
            "name": POOL,
            "resourcePools": [{"machineSpec": MACHINE, "diskSpec": DISK, "replicaCount": "2"}],
        },
    )
    world.vertex.call(
        "POST", "outcomes", {"display_name": "^blocker$", "result": "succeeded", "duration": "2d"}
    )
    vertex.create_custom_job(PARENT, _pool_job("blocker", 1))
    vertex.create_custom_job(PARENT, _pool_job("head-of-queue", 2))


def test_a_job_queued_past_max_queue_is_cancelled_alerted_once_and_falls_back(
    watched: World,
) -> None:
    _keep_the_pools_queue_blocked(watched)
    started = watched.request_run("pool-then-flex")
    assert started.outcome is DispatchOutcome.SUBMITTED
    watched.vertex.advance(59 * 60)
    assert watched.reconcile().watchdog_cancels == 0  # within max_queue (1h)
    assert vertex.get_custom_job(started.job_name).state.name == "JOB_STATE_QUEUED"

    watched.vertex.advance(2 * 60)
    overdue = watched.reconcile()
    again = watched.reconcile()  # the job is CANCELLING: neither cancelled nor alerted again

    assert overdue.watchdog_cancels == 1
    assert again.alerts_sent == 0
    [alert] = of_run(watched.alerts.pull(), started.run_id)
    assert alert.body()["reason"] == WatchdogReason.OVERDUE_WAIT.value
    assert "max_queue" in alert.body()["message"]
    attempt = watched.run(started.run_id).last_attempt
    assert attempt.cancel_reason == CancelReason.QUEUE_TIMEOUT

    watched.vertex.advance(10)  # the cancel takes effect
    decided = watched.reconcile()
    run = watched.run(started.run_id)

    assert decided.decisions_made == 1
    assert run.attempts[0].state == "JOB_STATE_CANCELLED"
    assert run.attempts[0].error["class"] == "capacity"  # never read as an operator's cancel
    assert run.status is RunStatus.WAITING_RETRY
    assert (run.next_retry.attempt, run.next_retry.placement_index) == (2, 1)
    [retried] = watched.deliver_retries(of_run(watched.retries.pull(), started.run_id))
    assert retried.outcome is DispatchOutcome.SUBMITTED
    creates = watched.creates(started.run_id)
    assert [c["request"]["customJob"]["jobSpec"].get("persistentResourceId") for c in creates] == [
        "a100-pool",
        None,
    ]
    assert creates[1]["request"]["customJob"]["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"
    assert of_run(watched.alerts.pull(), started.run_id) == []  # the fallback alerts nothing


def test_a_job_queued_on_a_persistent_resource_is_cancelled_after_a_day_by_default(
    watched: World,
) -> None:
    _keep_the_pools_queue_blocked(watched)
    started = watched.request_run("pool-default-limit")  # no max_queue
    watched.vertex.advance(24 * HOUR - 60)
    assert watched.reconcile().watchdog_cancels == 0

    watched.vertex.advance(2 * 60)
    assert watched.reconcile().watchdog_cancels == 1
    [alert] = of_run(watched.alerts.pull(), started.run_id)
    assert "default max_queue" in alert.body()["message"]
    watched.vertex.advance(10)
    watched.reconcile()
    assert watched.run(started.run_id).next_retry.placement_index == 1  # on to FLEX_START


def _retry_once(world: World, run_id: str) -> list[str]:
    """One reconcile tick publishes the run's due retry and dispatch handles it; the reasons of
    the alerts that were sent."""
    world.reconcile()
    results = world.deliver_retries(of_run(world.retries.pull(), run_id))
    assert len(results) == 1, results
    return [m.body()["reason"] for m in of_run(world.alerts.pull(), run_id)]


def test_a_run_no_placement_takes_alerts_after_a_while_at_most_daily_and_is_given_up(
    watched: World,
) -> None:
    waiting = watched.request_run("pool-missing")
    assert waiting.outcome is DispatchOutcome.WAITING
    began = watched.services.now()
    assert watched.run(waiting.run_id).no_placement_since == began
    assert of_run(watched.alerts.pull(), waiting.run_id) == []  # not at the first miss

    watched.vertex.advance(5 * HOUR)
    assert _retry_once(watched, waiting.run_id) == []  # before no_placement_alert (6h)
    watched.vertex.advance(1 * HOUR + 60)
    assert _retry_once(watched, waiting.run_id) == [AlertReason.NO_PLACEMENT]
    watched.vertex.advance(3 * HOUR)
    assert _retry_once(watched, waiting.run_id) == []  # not again within the day
    watched.vertex.advance(20 * HOUR)
    assert _retry_once(watched, waiting.run_id) == []
    watched.vertex.advance(1 * HOUR)  # a day after the first alert
    assert _retry_once(watched, waiting.run_id) == [AlertReason.NO_PLACEMENT]
    run = watched.run(waiting.run_id)
    assert run.status is RunStatus.WAITING_RETRY
    assert run.no_placement_since == began  # kept across every retry

    watched.vertex.advance(3 * 24 * HOUR - 30 * HOUR)  # no_placement_give_up (3d) has passed
    watched.reconcile()
    [given_up] = watched.deliver_retries(of_run(watched.retries.pull(), waiting.run_id))
    [alert] = of_run(watched.alerts.pull(), waiting.run_id)

    assert given_up.outcome is DispatchOutcome.REJECTED
    assert watched.run(waiting.run_id).status is RunStatus.FAILED
    assert alert.body()["reason"] == AlertReason.NO_PLACEMENT
    assert "given up" in alert.body()["message"]
    assert "absent-pool" in alert.body()["message"]  # each placement, with its reason
    assert watched.creates(waiting.run_id) == []
    watched.vertex.advance(HOUR)
    watched.reconcile()  # an ended run is not retried
    assert of_run(watched.retries.pull(), waiting.run_id) == []
