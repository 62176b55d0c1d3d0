"""Writes that arrive late, on the emulators: a stale job state, and a stale run snapshot.

- A reconcile listing made while the job ran, applied after ``on_job_event`` decided the job's
  end, must leave the ledger alone (no write) and, on the next ticks, be no change at all;
  before, it wrote RUNNING over the decided end and every tick re-decided with a write.
- One ``ensure_actions`` pass that first records an owed alert, then publishes the due retry,
  must still move ``next_retry.at`` ahead; before, the retry's note was written on the snapshot
  the alert had already made stale, its conflict was swallowed, and the next tick published the
  retry again.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from jobstate_test_support import Subscription, VertexAdmin, job_request

from shared.adapters import vertex as vertex_api
from shared.adapters.ledger import AttemptOutcome, RetryPlan, RunSnapshot, RunStatus
from shared.handlers.actions import ensure_actions
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, record_job_state
from shared.handlers.services import Services
from shared.model.runkeys import request_run_key, run_id
from shared.policy.reconcile_plan import plan_tick
from shared.policy.timing import RETRY_REPUBLISH_AFTER

TEMPLATE = "two-regions"
PROVISIONING = 120  # the emulator's default PENDING time on new machines, in seconds


def started(key: str, services: Services) -> RunSnapshot:
    """A run dispatched through the real entry point: one job on the Vertex AI emulator."""
    result = dispatch_event(job_request(TEMPLATE, key), services)
    snapshot = services.ledger.get_run(result.run_id)
    assert snapshot is not None and snapshot.run.attempts[0].job_name is not None
    return snapshot


def test_a_listing_made_before_the_end_changes_nothing_once_the_end_is_decided(
    fresh_name: Callable[[str], str],
    services: Services,
    vertex: VertexAdmin,
    rng: random.Random,
) -> None:
    key = fresh_name("key")
    vertex.add_outcome(
        labels={"vd-run": run_id(request_run_key("unused", key))},
        result="internal_error",
        duration="1m",
        times=1,
    )
    snapshot = started(key, services)
    job_name = snapshot.run.attempts[0].job_name or ""
    vertex.advance(PROVISIONING + 30)
    listed = vertex_api.get_custom_job(job_name)  # what the reconciler's listing saw: running
    assert listed.state.name == "JOB_STATE_RUNNING"
    vertex.advance(60 + 60)
    ended = vertex_api.get_custom_job(job_name)
    assert record_job_state(ended, services, rng)[0].outcome is JobStateOutcome.DECIDED
    decided = services.ledger.get_run(snapshot.run.run_id)
    assert decided is not None and decided.run.status is RunStatus.WAITING_RETRY

    _, after = record_job_state(listed, services, rng)  # the tick applies its older listing

    assert after is not None
    assert after.update_time == decided.update_time  # nothing written
    again = services.ledger.get_run(snapshot.run.run_id)
    assert again is not None and again.run == decided.run
    assert again.run.attempts[0].state == "JOB_STATE_FAILED"
    for job in (listed, ended):  # the next ticks, whatever their listing shows: nothing to do
        plan = plan_tick(
            [again.run],
            {job_name: job},
            services.config.templates,
            now=services.now(),
            grace=timedelta(minutes=30),
        )
        assert plan.changes == ()


def test_an_owed_alert_does_not_make_the_due_retry_publish_twice(
    fresh_name: Callable[[str], str],
    services: Services,
    vertex: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> None:
    config = services.config
    assert config.requests_topic is not None
    alerts, requests = subscribe(config.alerts_topic), subscribe(config.requests_topic)
    snapshot = started(fresh_name("key"), services)
    run = snapshot.run
    due = services.now()
    # What a pass finds when the decision's alert could not be published (the alerts topic was
    # down) and the backoff of the retry has passed meanwhile.
    owing = services.ledger.record_decision(
        snapshot,
        AttemptOutcome(
            attempt=1,
            job_name=run.attempts[0].job_name or "",
            state="JOB_STATE_FAILED",
            error={"code": 13, "message": "Internal error occurred", "class": "infrastructure"},
            decision={
                "outcome": "infrastructure",
                "alert": {"reason": "late_write_it", "message": "m", "what_to_do": "w"},
                "complete": False,
            },
            status=RunStatus.WAITING_RETRY,
            next_retry=RetryPlan(due, 2, 0, "infrastructure"),
        ),
    )

    taken = ensure_actions(owing, replace(services, now=lambda: due))

    assert (taken.alerts, taken.retry_published) == (("late_write_it",), True)
    noted = services.ledger.get_run(run.run_id)
    assert noted is not None and noted.run.next_retry is not None
    assert noted.run.alerts == ("late_write_it",)
    assert noted.run.next_retry.at == due + RETRY_REPUBLISH_AFTER
    # The next tick, a minute later, while the retry waits for on_request: no second copy.
    a_minute_later = replace(services, now=lambda: due + timedelta(minutes=1))
    assert ensure_actions(noted, a_minute_later) == type(taken)()
    mine = [body for body, _ in requests.pull() if run.run_id.encode() in body]
    assert len(mine) == 1
    sent = [a["reason"] for a in alerts.pull_json() if a["run_id"] == run.run_id]
    assert sent == ["late_write_it"]
