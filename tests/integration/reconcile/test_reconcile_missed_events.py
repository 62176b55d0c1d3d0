"""The reconciler catches what no event told: a job ended unseen, a due retry, a stale intent."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reconcile_test_support import Message, World, of_run, topic

from shared.adapters.ledger import RunStatus
from shared.decode.hints import job_state_message
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome
from shared.handlers.reconcile import reconcile
from shared.model.results import DispatchOutcome
from shared.policy.due_retries import RetryCause

JOB_RUNS_SECONDS = 2 * 60 + 10 * 60  # provisioning, then the default outcome's duration


def test_a_job_that_ended_unseen_is_recorded_by_the_tick_once_and_then_never_again(
    world: World,
) -> None:
    started = world.request_run("flex-a100")
    assert started.outcome is DispatchOutcome.SUBMITTED
    world.vertex.forget_requests()
    world.vertex.advance(JOB_RUNS_SECONDS + 60)  # it succeeds; no event tells anyone

    first = world.reconcile()

    assert (first.states_recorded, first.decisions_made) == (1, 1)
    assert world.run(started.run_id).status is RunStatus.SUCCEEDED
    assert world.vertex.requests("GetCustomJob") == []  # the listing was the read
    assert world.hints.pull() == []  # applied, not handed to on_job_event
    second = world.reconcile()
    assert second.states_recorded == 0
    assert second.runs_read == 0  # the run is over: no longer active
    # A late hint finds the end recorded and is dropped without a read.
    late = Message(*job_state_message(started.job_name, "JOB_STATE_SUCCEEDED"), "late-hint")
    [handled] = world.deliver_hints([late])
    assert (handled.outcome, handled.detail) == (JobStateOutcome.DROPPED, "already_ended")


def test_an_infrastructure_failure_is_retried_after_its_backoff_and_succeeds(
    world: World,
) -> None:
    world.vertex.call(
        "POST", "outcomes", {"result": "internal_error", "duration": "1m", "times": 1}
    )
    started = world.request_run("flex-a100")
    world.vertex.advance(2 * 60 + 60 + 1)  # provisioning, one minute running, then INTERNAL

    decided = world.reconcile()
    waiting = world.run(started.run_id)

    assert decided.decisions_made == 1
    assert waiting.status is RunStatus.WAITING_RETRY
    assert waiting.next_retry is not None and waiting.next_retry.attempt == 2
    early = world.reconcile()  # the backoff has not passed yet
    assert early.actions_taken == {}
    assert world.retries.pull() == []

    world.vertex.advance(11 * 60)  # past the 10 min backoff cap
    due = world.reconcile()
    retries = world.retries.pull()

    assert due.actions_taken == {"backoff_retries": 1}
    assert [m.body()["attempt"] for m in of_run(retries, started.run_id)] == [2]
    [resubmitted] = world.deliver_retries(retries)
    assert resubmitted.outcome is DispatchOutcome.SUBMITTED

    world.vertex.advance(JOB_RUNS_SECONDS + 60)
    world.reconcile()
    done = world.run(started.run_id)
    assert done.status is RunStatus.SUCCEEDED
    assert [a.state for a in done.attempts] == ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"]
    assert len(world.creates(started.run_id)) == 2


def test_an_intent_left_without_a_job_is_handed_back_to_dispatch(world: World) -> None:
    # The create happened but its answer was lost, and the delivery was never retried.
    world.vertex.call(
        "POST",
        "faults",
        {"method": "CreateCustomJob", "code": "UNAVAILABLE", "when": "after", "count": 1},
    )
    try:
        world.request_run("flex-a100")
    except Exception as error:  # BackendUnavailable: the platform would redeliver; we do not
        assert "UNAVAILABLE" in str(error) or "try again" in str(error)
    [run_id] = {
        e["request"]["customJob"]["labels"]["vd-run"]
        for e in world.vertex.requests("CreateCustomJob")
    }
    assert world.run(run_id).status is RunStatus.SUBMITTING

    assert world.reconcile().retries_published == {}  # within the intent lease: leave it
    world.vertex.advance(6 * 60)
    late = world.reconcile()
    retries = world.retries.pull()

    assert late.retries_published == {RetryCause.STALE_INTENT.value: 1}
    # Not yet delivered (a slow dispatch): the next ticks leave it be for 10 minutes.
    world.vertex.advance(60)
    assert world.reconcile().retries_published == {}
    world.vertex.advance(10 * 60)
    assert world.reconcile().retries_published == {RetryCause.STALE_INTENT.value: 1}
    retries += world.retries.pull()
    [reattached, again] = world.deliver_retries(retries)
    assert reattached.outcome is DispatchOutcome.REATTACHED
    assert again.outcome is DispatchOutcome.DUPLICATE
    assert len(world.creates(run_id)) == 1  # found by label, not created again
    assert world.run(run_id).status is RunStatus.SUBMITTED


def test_an_ended_run_whose_alert_failed_to_publish_is_alerted_by_a_later_tick(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.vertex.call(
        "POST",
        "outcomes",
        {"result": "user_error", "exit_code": 1, "duration": "1m", "times": 1},
    )
    started = world.request_run("flex-a100")
    world.vertex.advance(2 * 60 + 60 + 1)  # provisioning, one minute running, then exit code 1
    config = world.services.config
    no_alerts_topic = replace(config, alerts_topic=f"{config.alerts_topic}-missing")

    failed = reconcile(replace(world.services, config=no_alerts_topic), world.services.now())

    ended = world.run(started.run_id)
    assert failed.decisions_made == 1 and failed.errors  # decided; the alert's publish failed
    failure_lines = [r for r in caplog.records if "next tick retries" in r.getMessage()]
    assert failure_lines, "the failed publish was not logged"
    assert {getattr(r, "labels", {}).get("run_id") for r in failure_lines} == {started.run_id}
    assert ended.status is RunStatus.FAILED and ended.alerts == ()
    assert world.alerts.pull() == []

    later = world.reconcile()  # the run is over, but its decision still owes the alert

    assert later.ended_runs_owing_actions == 1
    assert later.actions_taken == {"alerts": 1}
    [alert] = of_run(world.alerts.pull(), started.run_id)
    assert alert.body()["reason"] == "retries_exhausted"
    assert world.run(started.run_id).alerts == ("retries_exhausted",)
    assert world.reconcile().ended_runs_owing_actions == 0  # owed no more: not read again


def test_a_retry_for_a_run_whose_template_left_the_config_ends_the_run_once(
    world: World,
) -> None:
    world.vertex.call(
        "POST", "outcomes", {"result": "internal_error", "duration": "1m", "times": 1}
    )
    started = world.request_run("flex-a100")
    world.vertex.advance(3 * 60 + 1)  # the job fails with INTERNAL: a backoff retry is planned
    for _ in range(3):  # ticks until it is decided and its backoff has passed
        world.reconcile()
        world.vertex.advance(11 * 60)
    retries = of_run(world.retries.pull(), started.run_id)
    assert retries, world.run(started.run_id)
    config = world.services.config
    templates = {n: t for n, t in config.templates.items() if n != "flex-a100"}
    without = replace(world.services, config=replace(config, templates=templates))

    results = [dispatch_event(m.cloud_event(topic("requests")), without) for m in retries + retries]

    assert [r.outcome.value for r in results][:1] == ["rejected"]
    assert {r.outcome.value for r in results[1:]} <= {"duplicate"}
    ended = world.run(started.run_id)
    assert ended.status is RunStatus.FAILED  # attempt 1 ran a job: not "never submitted"
    [alert] = of_run(world.alerts.pull(), started.run_id)
    assert "no longer has" in alert.body()["message"]
    assert len(world.creates(started.run_id)) == 1  # attempt 1 only
    assert world.reconcile().retries_published == {}  # an ended run is retried no more


def test_a_failed_end_read_before_its_error_is_decided_by_a_later_tick(world: World) -> None:
    # Vertex AI sets a failed job's error about a minute after it ends.
    world.vertex.call("PUT", "timings", {"error_delay": "60s"})
    try:
        world.vertex.call(
            "POST", "outcomes", {"result": "user_error", "exit_code": 1, "duration": "1m"}
        )
        started = world.request_run("flex-a100")
        world.vertex.advance(2 * 60 + 60 + 1)  # provisioning, one minute running, then exit 1

        early = world.reconcile()
        world.vertex.advance(61)
        late = world.reconcile()
    finally:
        world.vertex.call("PUT", "timings", {"error_delay": 0})

    assert (early.ends_awaiting_error, early.decisions_made) == (1, 0)
    assert (late.ends_awaiting_error, late.decisions_made) == (0, 1)
    decision = world.run(started.run_id).attempts[0].decision
    assert decision is not None and "user_code" in decision["summary"]  # not "unknown"


def test_a_retry_for_a_claimed_attempt_whose_template_left_the_config_ends_nothing(
    world: World,
) -> None:
    # A redelivery (or an intent recovery) while a config deploy renamed the template: the
    # attempt's job runs on, so the run must not be ended (its job would be orphaned).
    from shared.adapters import retry_messages
    from shared.adapters.ledger import RetryPlan

    started = world.request_run("flex-a100")
    world.vertex.advance(2 * 60 + 1)  # running
    world.reconcile()
    requests_topic = world.services.config.requests_topic
    assert requests_topic is not None
    plan = RetryPlan(world.services.now(), 1, 0, "a redelivered recovery")
    retry_messages.publish_retry(started.run_id, plan, requests_topic)
    config = world.services.config
    templates = {n: t for n, t in config.templates.items() if n != "flex-a100"}
    without = replace(world.services, config=replace(config, templates=templates))

    results = [
        dispatch_event(m.cloud_event(topic("requests")), without)
        for m in of_run(world.retries.pull(), started.run_id)
    ]

    assert [r.outcome for r in results] == [DispatchOutcome.DUPLICATE]
    assert world.run(started.run_id).status is RunStatus.RUNNING
    assert of_run(world.alerts.pull(), started.run_id) == []


def test_a_job_of_a_run_whose_template_left_the_config_is_decided_and_alerted_once(
    world: World,
) -> None:
    # It used to be logged CRITICAL on every tick and never decided.
    world.vertex.call(
        "POST", "outcomes", {"result": "user_error", "exit_code": 1, "duration": "1m", "times": 1}
    )
    started = world.request_run("flex-a100")
    world.vertex.advance(2 * 60 + 60 + 1)  # provisioning, one minute running, then exit code 1
    config = world.services.config
    templates = {n: t for n, t in config.templates.items() if n != "flex-a100"}
    without = replace(world.services, config=replace(config, templates=templates))

    ticks = [reconcile(without, world.services.now()) for _ in range(2)]

    assert [t.decisions_made for t in ticks] == [1, 0] and not ticks[0].errors
    ended = world.run(started.run_id)
    assert ended.status is RunStatus.FAILED
    [alert] = of_run(world.alerts.pull(), started.run_id)
    assert alert.body()["reason"] == "template_gone"
