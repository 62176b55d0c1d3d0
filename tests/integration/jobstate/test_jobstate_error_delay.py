"""A failed job read before Vertex AI set its error, on the emulators (``timings.error_delay``).

Google's "Understand the custom training service" page: "About one minute after a job ends,
Vertex AI sets the error code on the training job object, based on the exit code." The Vertex AI
emulator reproduces it with ``error_delay: 60s`` (set here through its admin API). A hint at the
end reads FAILED with no error: the job-state function records the end, decides nothing, returns
normally (the hint is acknowledged, no redelivery), and the reconciler's plan still sees the run
as a change to revisit. The next read decides on the error; a job whose error never comes is
decided UNKNOWN once ``timing.ERROR_SETTLE_TIME`` has passed. A FLEX_START job whose max wait ran
out needs no error: it moves to the next placement at once.

The job-state function's clock is the emulator's simulated clock here (``services.now``), as the
two share real time in production.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from jobstate_test_support import Subscription, VertexAdmin, job_request, job_state_hint

from shared.adapters import vertex as vertex_api
from shared.adapters.ledger import Run, RunStatus
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, JobStateResult, handle_job_event
from shared.handlers.services import Services
from shared.model.runkeys import request_run_key, run_id
from shared.policy.classify import WAIT_RAN_OUT_RULE
from shared.policy.reconcile_plan import StateChange, plan_tick
from shared.policy.timing import ERROR_SETTLE_TIME

TEMPLATE = "two-regions"
A100 = "NVIDIA_TESLA_A100"
PROVISIONING = 120  # the emulator's default PENDING time on new machines, in seconds
RUNTIME = 300  # how long the failing job runs
ERROR_DELAY = 60  # the real service's "about one minute"


@pytest.fixture
def delayed_errors(vertex: VertexAdmin) -> Iterator[VertexAdmin]:
    """The emulator setting each failed job's error a minute after its end (until reset)."""
    vertex.call("PUT", "timings", {"error_delay": f"{ERROR_DELAY}s"})
    yield vertex
    vertex.call("PUT", "timings", {"error_delay": 0})


class DelayedErrorStory:
    """One run through dispatch and on_job_event, on the emulator's clock."""

    def __init__(
        self,
        key: str,
        services: Services,
        vertex: VertexAdmin,
        subscribe: Callable[[str], Subscription],
    ) -> None:
        self.run_id = run_id(request_run_key("unused", key))
        self.key = key
        self.vertex = vertex
        self.services = replace(services, now=self.emulator_now)
        config = services.config
        assert config.requests_topic
        self.requests = subscribe(config.requests_topic)
        self.alerts = subscribe(config.alerts_topic)

    def emulator_now(self) -> datetime:
        return datetime.fromisoformat(self.vertex.call("GET", "clock")["now"])

    def start(self) -> None:
        assert dispatch_event(job_request(TEMPLATE, self.key), self.services).run_id == self.run_id

    def run(self) -> Run:
        snapshot = self.services.ledger.get_run(self.run_id)
        assert snapshot is not None
        return snapshot.run

    def hint(self, attempt: int = 1) -> JobStateResult:
        """What a log sink sends at the job's end, handled by on_job_event."""
        job_name = self.run().attempts[attempt - 1].job_name or ""
        observed = vertex_api.get_custom_job(job_name).state.name
        event = job_state_hint(job_name, observed)
        return handle_job_event(event, self.services, random.Random(4))

    def tick_sees_a_change(self) -> bool:
        """Whether the reconciler's plan, on the job as listed now, has the run to revisit."""
        run = self.run()
        job_name = run.attempts[-1].job_name or ""
        listed = vertex_api.get_custom_job(job_name)
        plan = plan_tick(
            [run],
            {job_name: listed},
            self.services.config.templates,
            now=self.emulator_now(),
            grace=timedelta(minutes=30),
        )
        return StateChange(self.run_id, job_name, listed.state.name) in plan.changes

    def messages(self, subscription: Subscription) -> list[dict[str, object]]:
        return [m for m in subscription.pull_json() if m.get("run_id") == self.run_id]


@pytest.fixture
def story(
    fresh_name: Callable[[str], str],
    services: Services,
    delayed_errors: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> DelayedErrorStory:
    return DelayedErrorStory(fresh_name("key"), services, delayed_errors, subscribe)


def test_a_hint_before_the_error_defers_and_the_next_read_retries_the_user_failure(
    story: DelayedErrorStory,
) -> None:
    story.vertex.add_outcome(
        labels={"vd-run": story.run_id}, result="user_error", exit_code=1, duration=f"{RUNTIME}s"
    )
    story.start()
    story.vertex.advance(PROVISIONING + RUNTIME)  # the instant the job ends
    job = vertex_api.get_custom_job(story.run().attempts[0].job_name or "")
    assert (job.state.name, job.error.code, job.error.message) == ("JOB_STATE_FAILED", 0, "")

    # The log sink's hint at the end, delivered twice: recorded, not decided, acknowledged.
    assert [story.hint().outcome for _ in range(2)] == [JobStateOutcome.DEFERRED] * 2
    deferred = story.run()
    assert deferred.status is RunStatus.SUBMITTED  # still live: nothing decided
    assert (deferred.attempts[0].state, deferred.attempts[0].decision) == ("JOB_STATE_FAILED", None)
    assert story.tick_sees_a_change()
    assert story.messages(story.requests) == [] and story.messages(story.alerts) == []

    story.vertex.advance(ERROR_DELAY)  # Vertex AI sets the error; the next tick reads it
    decided = story.hint()

    assert decided.outcome is JobStateOutcome.DECIDED
    run = story.run()
    assert run.status is RunStatus.WAITING_RETRY
    assert run.attempts[0].error and run.attempts[0].error["class"] == "user_code"
    assert not story.tick_sees_a_change()
    retries = story.messages(story.requests)
    assert [(r["attempt"], r["placement_index"]) for r in retries] == [(2, 0)]
    assert story.messages(story.alerts) == []
    print(
        f"FIGURES error-delay: hints before the error = 2 (deferred), decided on the read "
        f"{ERROR_DELAY}s later as {run.attempts[0].error['class']}, retries = {len(retries)}, "
        "alerts = 0"
    )


def test_an_error_that_never_comes_is_decided_unknown_after_the_settle_time(
    story: DelayedErrorStory,
) -> None:
    story.vertex.call("PUT", "timings", {"error_delay": "1d"})  # as if it never came
    story.vertex.add_outcome(
        labels={"vd-run": story.run_id}, result="internal_error", duration=f"{RUNTIME}s"
    )
    story.start()
    story.vertex.advance(PROVISIONING + RUNTIME)

    assert story.hint().outcome is JobStateOutcome.DEFERRED
    story.vertex.advance(ERROR_SETTLE_TIME.total_seconds() - 1)
    assert story.hint().outcome is JobStateOutcome.DEFERRED
    story.vertex.advance(1)
    assert story.hint().outcome is JobStateOutcome.DECIDED

    run = story.run()
    assert run.status is RunStatus.FAILED  # "unknown" is not in the template's retry_on
    assert run.attempts[0].error == {"code": None, "message": "", "class": "unknown"}
    assert [a["reason"] for a in story.messages(story.alerts)] == ["retries_exhausted"]


def test_a_flex_start_wait_that_ran_out_moves_on_without_waiting_for_the_error(
    story: DelayedErrorStory,
) -> None:
    story.vertex.set_capacity("us-central1", A100, 0)
    story.start()
    story.vertex.advance(3600)  # the first placement's max wait: FAILED, no error yet

    assert story.hint().outcome is JobStateOutcome.DECIDED
    run = story.run()
    assert run.status is RunStatus.WAITING_RETRY
    decision = run.attempts[0].decision or {}
    assert (decision["outcome"], decision["evidence"]) == ("capacity", WAIT_RAN_OUT_RULE)
    retries = story.messages(story.requests)
    assert [(r["attempt"], r["placement_index"]) for r in retries] == [(2, 1)]
