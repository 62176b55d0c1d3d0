"""Deadlines (``start_by``) on the real emulators: a FLEX_START job is created with its max wait
cut to the run's deadline; a run whose chain cannot start by the deadline ends FAILED with one
``deadline_missed`` alert (after its job's cut wait ran out, or while it waits for a placement);
a request may shorten the template's deadline, and one that would lengthen it is rejected and
alerted once. The emulator's clock is the only clock (``advance``); each request is published at
that clock's time, so its deadline runs from there."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cloudevents.http import CloudEvent
from reconcile_test_support import World, of_run, topic

from emulator_stack import LOCAL_PROJECT
from shared.adapters.config_source import load_config
from shared.adapters.ledger import RunStatus
from shared.handlers.dispatch import dispatch_event
from shared.handlers.services import Services
from shared.model.alerts import AlertReason
from shared.model.results import DispatchOutcome, DispatchResult

CONFIG = Path(__file__).parent / "configs" / "deadlines.yaml"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
MINUTE = 60


@pytest.fixture
def timed(world: World) -> World:
    """The reconcile world, running dispatch and the reconciler with the deadlines' config."""
    services = Services(
        load_config(str(CONFIG)), now=world.vertex.now, _ledger=world.services.ledger
    )
    return replace(world, services=services)


def _request(world: World, template: str, message_id: str = "", **body: Any) -> CloudEvent:
    """A job request for ``template`` published now by the emulator's clock."""
    message_id = message_id or f"deadline-{time.time_ns()}"
    data = json.dumps({"template": template, "params": {"dataset_uri": "gs://a/d/"}, **body})
    published = world.vertex.now().isoformat().replace("+00:00", "Z")
    return CloudEvent(
        {
            "type": PUBSUB_PUBLISHED,
            "source": f"//pubsub.googleapis.com/{topic('requests')}",
            "id": message_id,
        },
        {
            "message": {
                "data": base64.b64encode(data.encode()).decode(),
                "attributes": {"kind": "train"},
                "messageId": message_id,
                "publishTime": published,
            },
            "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/eventarc-deadlines-it",
        },
    )


def _dispatch(world: World, event: CloudEvent) -> DispatchResult:
    return dispatch_event(event, world.services)


def _scheduling(world: World, run_id: str) -> list[dict[str, Any]]:
    return [c["request"]["customJob"]["jobSpec"]["scheduling"] for c in world.creates(run_id)]


def test_a_flex_start_job_is_created_with_its_max_wait_cut_to_the_deadline(timed: World) -> None:
    opened_at = timed.vertex.now()
    started = _dispatch(timed, _request(timed, "l4-by-1h"))

    assert started.outcome is DispatchOutcome.SUBMITTED
    run = timed.run(started.run_id)
    assert run.start_deadline == opened_at + timedelta(hours=1)
    assert _scheduling(timed, started.run_id) == [
        {"strategy": "FLEX_START", "maxWaitDuration": "3600s", "timeout": "7200s"}
    ]
    # Recorded beside the chain's own wait: the job-state function and the watchdog read it.
    assert run.last_attempt.placement["flex_start"] == {
        "max_wait": "7200s",
        "deadline_max_wait": "3600s",
    }


def test_a_request_may_shorten_the_deadline(timed: World) -> None:
    started = _dispatch(timed, _request(timed, "l4-by-1h", start_by="30m"))

    assert started.outcome is DispatchOutcome.SUBMITTED
    [scheduling] = _scheduling(timed, started.run_id)
    assert scheduling["maxWaitDuration"] == "1800s"


def test_a_run_that_cannot_start_by_its_deadline_fails_with_one_deadline_missed_alert(
    timed: World,
) -> None:
    started = _dispatch(timed, _request(timed, "l4-by-1h"))
    timed.vertex.advance(30 * MINUTE)
    assert timed.reconcile().decisions_made == 0  # still queued, within its cut wait

    timed.vertex.advance(31 * MINUTE)  # the service ends the job when its cut wait runs out
    decided = timed.reconcile()
    again = timed.reconcile()

    assert decided.decisions_made == 1
    run = timed.run(started.run_id)
    assert run.status is RunStatus.FAILED
    assert run.attempts[0].error["class"] == "capacity"
    assert run.next_retry is None
    assert len(timed.creates(started.run_id)) == 1  # no fallback that would start too late
    [alert] = of_run(timed.alerts.pull(), started.run_id)
    body = alert.body()
    assert body["reason"] == AlertReason.DEADLINE_MISSED.value
    assert "start_by" in body["message"]
    assert "flex_start (max wait 7200s, cut to 3600s by the deadline): capacity" in body["message"]
    assert again.alerts_sent == 0


def test_a_run_waiting_for_a_placement_past_its_deadline_is_ended_by_the_reconciler(
    timed: World,
) -> None:
    started = _dispatch(timed, _request(timed, "pool-missing-by-1h"))
    assert started.outcome is DispatchOutcome.WAITING
    assert timed.run(started.run_id).status is RunStatus.WAITING_RETRY

    timed.vertex.advance(40 * MINUTE)
    assert timed.reconcile().deadlines_missed == 0  # 20 minutes left: it may still start
    timed.vertex.advance(15 * MINUTE)  # 5 minutes left: too close to start by
    ended = timed.reconcile()
    again = timed.reconcile()

    assert ended.deadlines_missed == 1
    assert again.deadlines_missed == 0
    assert timed.run(started.run_id).status is RunStatus.FAILED
    missed = [
        m.body()
        for m in of_run(timed.alerts.pull(), started.run_id)
        if m.body()["reason"] == AlertReason.DEADLINE_MISSED.value
    ]
    assert len(missed) == 1
    assert "absent-pool" in missed[0]["message"]


@pytest.mark.parametrize(
    ("delivered_after", "why"),
    [
        pytest.param(45, "would be too late", id="its-next-wait-would-pass-the-deadline"),
        pytest.param(55, "its deadline has come", id="delivered-too-close-to-the-deadline"),
    ],
)
def test_a_retry_that_cannot_start_by_the_deadline_ends_the_run_in_dispatch(
    timed: World, delivered_after: int, why: str
) -> None:
    started = _dispatch(timed, _request(timed, "pool-missing-by-1h"))
    timed.vertex.advance(21 * MINUTE)
    timed.reconcile()  # publishes the planned retry (due after backoff.base, 20m)
    [retry] = of_run(timed.retries.pull(), started.run_id)
    timed.vertex.advance((delivered_after - 21) * MINUTE)

    [result] = timed.deliver_retries([retry])

    assert result.outcome is DispatchOutcome.REJECTED
    assert why in (result.detail or "")
    assert timed.run(started.run_id).status is RunStatus.FAILED
    reasons = [m.body()["reason"] for m in of_run(timed.alerts.pull(), started.run_id)]
    assert reasons.count(AlertReason.DEADLINE_MISSED.value) == 1
    assert timed.reconcile().deadlines_missed == 0  # ended: not read as waiting any more


def test_a_job_queued_at_its_deadline_is_cancelled_and_the_run_fails_with_one_alert(
    timed: World,
) -> None:
    from test_reconcile_watchdogs import _keep_the_pools_queue_blocked

    _keep_the_pools_queue_blocked(timed)
    started = _dispatch(timed, _request(timed, "pool-then-flex-by-2h"))
    assert started.outcome is DispatchOutcome.SUBMITTED
    timed.vertex.advance(110 * MINUTE)
    assert timed.reconcile().watchdog_cancels == 0  # queued, and the deadline is 10 minutes away

    timed.vertex.advance(11 * MINUTE)
    cancelled = timed.reconcile()
    assert cancelled.watchdog_cancels == 1
    assert of_run(timed.alerts.pull(), started.run_id) == []  # the watchdog's alert is not sent
    timed.vertex.advance(10)  # the cancel takes effect
    decided = timed.reconcile()

    assert decided.decisions_made == 1
    run = timed.run(started.run_id)
    assert run.status is RunStatus.FAILED
    assert run.attempts[0].state == "JOB_STATE_CANCELLED"
    assert len(timed.creates(started.run_id)) == 1  # no fallback past the deadline
    [alert] = of_run(timed.alerts.pull(), started.run_id)
    assert alert.body()["reason"] == AlertReason.DEADLINE_MISSED.value
    assert "persistent_resource a100-pool" in alert.body()["message"]


def test_a_running_job_is_never_cancelled_for_the_deadline(timed: World) -> None:
    timed.vertex.call(
        "POST", "outcomes", {"display_name": "^flexa-", "result": "succeeded", "duration": "5h"}
    )
    started = _dispatch(timed, _request(timed, "a100-by-1h"))
    timed.vertex.advance(5 * MINUTE)
    timed.reconcile()
    assert timed.run(started.run_id).status is RunStatus.RUNNING

    timed.vertex.advance(3 * 60 * MINUTE)  # far past the deadline, the job still running
    report = timed.reconcile()

    assert report.watchdog_cancels == 0
    assert report.deadlines_missed == 0
    assert timed.run(started.run_id).status is RunStatus.RUNNING
    assert of_run(timed.alerts.pull(), started.run_id) == []


def test_a_request_that_would_lengthen_the_deadline_is_rejected_and_alerted_once(
    timed: World,
) -> None:
    event = _request(timed, "l4-by-1h", message_id=f"longer-{time.time_ns()}", start_by="2h")
    first = _dispatch(timed, event)
    second = _dispatch(timed, event)  # a redelivery

    assert first.outcome is DispatchOutcome.REJECTED
    assert second.outcome is DispatchOutcome.REJECTED
    assert "body.start_by" in (first.detail or "")
    assert timed.creates(first.run_id) == []
    assert timed.run(first.run_id).status is RunStatus.REJECTED
    [alert] = of_run(timed.alerts.pull(), first.run_id)
    assert alert.body()["reason"] == AlertReason.INVALID_REQUEST.value
    assert "start_by (1h)" in alert.body()["message"]
