"""Job-state scenarios on the emulators: a job ends, on_job_event reads it, decides and acts.

Each story starts a run through dispatch, moves the Vertex AI emulator's simulated clock, hands
the job-state function the hint the reconciler would publish, and dispatches every retry message
it finds on the requests topic, until the run is over. Assertions read state only: the ledger,
the alerts / requests / completions topics, and the jobs the emulator created.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace

import pytest
from jobstate_test_support import (
    Subscription,
    VertexAdmin,
    job_request,
    job_state_hint,
    message_published,
)

from shared.adapters import vertex as vertex_api
from shared.adapters.ledger import Run, RunStatus
from shared.handlers.actions import ensure_actions
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, JobStateResult, handle_job_event
from shared.handlers.services import Services
from shared.model.alerts import AlertReason
from shared.model.runkeys import request_run_key, run_id
from shared.policy.timing import RETRY_REPUBLISH_AFTER

TEMPLATE = "two-regions"
A100 = "NVIDIA_TESLA_A100"
PROVISIONING = 120  # the emulator's default PENDING time on new machines, in seconds
SUCCESS_RUNTIME = 600  # the emulator's default RUNNING time of a job no rule matches


class Story:
    """One run, driven through dispatch and the job-state function in this process."""

    def __init__(
        self,
        key: str,
        services: Services,
        vertex_admin: VertexAdmin,
        rng: random.Random,
        subscribe: Callable[[str], Subscription],
    ) -> None:
        self.key = key
        self.run_id = run_id(request_run_key("unused", key))
        self.services = services
        self.vertex = vertex_admin
        self.rng = rng
        config = services.config
        assert config.requests_topic and config.completions_topic
        self.requests = subscribe(config.requests_topic)
        self.alerts = subscribe(config.alerts_topic)
        self.completions = subscribe(config.completions_topic)

    def start(self) -> None:
        result = dispatch_event(job_request(TEMPLATE, self.key), self.services)
        assert result.run_id == self.run_id, result

    def run(self) -> Run:
        snapshot = self.services.ledger.get_run(self.run_id)
        assert snapshot is not None
        return snapshot.run

    def hint(self, attempt: int) -> JobStateResult:
        """What the reconciler publishes for the attempt's job, handled by on_job_event."""
        job_name = self.run().attempts[attempt - 1].job_name
        assert job_name is not None
        job = vertex_api.get_custom_job(job_name)
        return handle_job_event(job_state_hint(job.name, job.state.name), self.services, self.rng)

    def dispatch_retries(self) -> list[dict[str, object]]:
        """Every retry message of this run on the requests topic, each dispatched; their bodies."""
        bodies = []
        topic = self.services.config.requests_topic or ""
        for body, attributes in self.requests.pull():
            event = message_published(body, attributes, topic)
            if self.run_id.encode() in body:
                dispatch_event(event, self.services)
                bodies.append(json.loads(body))
        return bodies

    def alerts_sent(self) -> list[dict[str, object]]:
        return [a for a in self.alerts.pull_json() if a["run_id"] == self.run_id]


def make_story(
    fresh_name: Callable[[str], str],
    services: Services,
    vertex_admin: VertexAdmin,
    rng: random.Random,
    subscribe: Callable[[str], Subscription],
) -> Story:
    return Story(fresh_name("key"), services, vertex_admin, rng, subscribe)


def test_an_expired_flex_start_wait_moves_to_the_next_placement_and_succeeds(
    fresh_name, services, vertex, rng, subscribe
) -> None:
    story = make_story(fresh_name, services, vertex, rng, subscribe)
    vertex.set_capacity("us-central1", A100, 0)
    story.start()
    vertex.advance(3600 + 60)  # past the first placement's 1h max wait

    assert story.hint(1).outcome is JobStateOutcome.DECIDED
    waiting = story.run()
    assert waiting.status is RunStatus.WAITING_RETRY
    assert waiting.attempts[0].error and waiting.attempts[0].error["class"] == "capacity"
    retries = story.dispatch_retries()
    assert [(r["attempt"], r["placement_index"]) for r in retries] == [(2, 1)]
    assert "/locations/us-east4/" in (story.run().attempts[1].job_name or "")

    vertex.advance(PROVISIONING + SUCCESS_RUNTIME + 60)
    assert story.hint(2).outcome is JobStateOutcome.DECIDED
    again = story.hint(2)  # the same hint again: the ledger records the end, nothing is read
    assert (again.outcome, again.detail) == (JobStateOutcome.DROPPED, "already_ended")
    assert story.run().status is RunStatus.SUCCEEDED
    completions = [c for c in story.completions.pull_json() if c["run_id"] == story.run_id]
    assert len(completions) == 1
    assert completions[0]["output_directory"] == f"gs://jobstate-it-models/{story.run_id}/"
    assert completions[0]["state"] == "JOB_STATE_SUCCEEDED"
    assert story.alerts_sent() == []
    assert len(vertex.created_jobs(story.run_id)) == 2


def test_a_user_code_failure_is_retried_as_allowed_then_alerted_once(
    fresh_name, services, vertex, rng, subscribe
) -> None:
    story = make_story(fresh_name, services, vertex, rng, subscribe)
    vertex.add_outcome(labels={"vd-run": story.run_id}, result="user_error", exit_code=3)
    story.start()
    vertex.advance(PROVISIONING + SUCCESS_RUNTIME + 60)

    # Every hint twice, as an at-least-once delivery would: one decision each time.
    assert [story.hint(1).outcome for _ in range(2)] == [
        JobStateOutcome.DECIDED,
        JobStateOutcome.DROPPED,  # the end is recorded: no Vertex AI read
    ]
    assert story.run().status is RunStatus.WAITING_RETRY
    story.dispatch_retries()
    vertex.advance(PROVISIONING + SUCCESS_RUNTIME + 60)
    assert [story.hint(2).outcome for _ in range(2)] == [
        JobStateOutcome.DECIDED,
        JobStateOutcome.DROPPED,  # the end is recorded: no Vertex AI read
    ]

    run = story.run()
    assert run.status is RunStatus.FAILED
    assert [a.error["class"] for a in run.attempts if a.error] == ["user_code", "user_code"]
    alerts = story.alerts_sent()
    assert [a["reason"] for a in alerts] == [AlertReason.RETRIES_EXHAUSTED.value]
    assert "non-zero status" in str(alerts[0]["message"])
    assert "console.cloud.google.com" in str(alerts[0]["message"])
    assert len(vertex.created_jobs(story.run_id)) == 2  # the retry made one job, not two


def test_a_cancelled_job_ends_the_run_without_retry(
    fresh_name, services, vertex, rng, subscribe
) -> None:
    story = make_story(fresh_name, services, vertex, rng, subscribe)
    story.start()
    vertex_api.cancel_custom_job(story.run().attempts[0].job_name or "")
    vertex.advance(30)

    assert story.hint(1).outcome is JobStateOutcome.DECIDED
    assert story.run().status is RunStatus.CANCELLED
    assert story.dispatch_retries() == []
    assert story.alerts_sent() == []
    assert len(vertex.created_jobs(story.run_id)) == 1


def test_an_infrastructure_failure_backs_off_then_succeeds(
    fresh_name, services, vertex, rng, subscribe
) -> None:
    story = make_story(fresh_name, services, vertex, rng, subscribe)
    vertex.add_outcome(
        labels={"vd-run": story.run_id}, result="internal_error", duration="1m", times=1
    )
    story.start()
    vertex.advance(PROVISIONING + 60 + 60)

    assert story.hint(1).outcome is JobStateOutcome.DECIDED
    waiting = story.run()
    assert waiting.status is RunStatus.WAITING_RETRY
    assert waiting.next_retry is not None and waiting.next_retry.at > services.now()
    assert story.dispatch_retries() == []  # not due yet: the reconciler publishes it later

    # The reconciler's tick once the backoff has passed.
    due = waiting.next_retry.at
    later = replace(services, now=lambda: due)
    snapshot = services.ledger.get_run(story.run_id)
    assert snapshot is not None
    assert ensure_actions(snapshot, later).retry_published
    # Ticks while the message waits for on_request publish no copy: a backlog cannot grow.
    republished = services.ledger.get_run(story.run_id)
    assert republished is not None and republished.run.next_retry is not None
    assert republished.run.next_retry.at == due + RETRY_REPUBLISH_AFTER
    assert not ensure_actions(republished, later).retry_published
    retries = story.dispatch_retries()
    assert [(r["attempt"], r["placement_index"]) for r in retries] == [(2, 0)]

    vertex.advance(PROVISIONING + SUCCESS_RUNTIME + 60)
    assert story.hint(2).outcome is JobStateOutcome.DECIDED
    assert story.run().status is RunStatus.SUCCEEDED
    assert story.alerts_sent() == []


@pytest.mark.parametrize("code", ["PERMISSION_DENIED", "INVALID_ARGUMENT"])
def test_a_hint_whose_job_the_service_refuses_to_read_is_acknowledged(
    code: str, fresh_name, services, vertex, rng, subscribe
) -> None:
    # The answer will not change on redelivery, so the hint is dropped (logged), not retried.
    story = make_story(fresh_name, services, vertex, rng, subscribe)
    story.start()
    job_name = story.run().attempts[0].job_name or ""
    vertex.call("POST", "faults", {"method": "GetCustomJob", "code": code, "count": 1})

    result = handle_job_event(job_state_hint(job_name, "JOB_STATE_FAILED"), services, rng)

    assert result.outcome is JobStateOutcome.REFUSED
    assert code.split("_")[0].lower() in result.detail.lower()


@pytest.mark.parametrize(
    "message", ["Quota exceeded for aiplatform.googleapis.com/get_requests", "rate limit"]
)
def test_a_hint_whose_read_is_throttled_is_dropped_not_retried(
    message: str, fresh_name, services, vertex, rng, subscribe
) -> None:
    # RESOURCE_EXHAUSTED, a quota or a rate limit: a redelivery would meet the same quota, and
    # the reconciler reads the state anyway.
    story = make_story(fresh_name, services, vertex, rng, subscribe)
    story.start()
    job_name = story.run().attempts[0].job_name or ""
    fault = {"method": "GetCustomJob", "code": "RESOURCE_EXHAUSTED", "message": message}
    vertex.call("POST", "faults", {**fault, "count": 1})

    result = handle_job_event(job_state_hint(job_name, "JOB_STATE_FAILED"), services, rng)

    assert (result.outcome, result.detail) == (JobStateOutcome.DROPPED, "throttled")
    assert result.run_id == story.run_id
    assert story.run().attempts[0].state == "JOB_STATE_QUEUED"  # nothing recorded


def test_a_hint_for_a_job_the_ledger_does_not_record_is_never_read(
    services: Services, vertex: VertexAdmin, rng: random.Random
) -> None:
    job_name = f"projects/{services.config.project}/locations/us-central1/customJobs/123456789"

    result = handle_job_event(job_state_hint(job_name, "JOB_STATE_FAILED"), services, rng)

    assert (result.outcome, result.detail) == (JobStateOutcome.DROPPED, "not_ours")
    assert vertex.call("GET", "requests?method=GetCustomJob")["requests"] == []
