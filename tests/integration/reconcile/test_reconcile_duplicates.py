"""A second job for one attempt is cancelled and alerted once, wherever it shows first: the
reconciler's listing, dispatch's label lookup after a lost create, or the job-state path handed
the job (a hint for it is dropped unread, since no run records it: the tick catches it); the run
goes on with the job it keeps. And an alert sent again carries the same ``alert_id``.

The duplicate is created directly in the Vertex AI emulator with the attempt's labels, as a
person copying a job, or a create whose answer was lost followed by a takeover, would make it.
"""

from __future__ import annotations

import json
import random
import time

import pytest
from google.cloud import aiplatform_v1
from reconcile_test_support import Message, World, of_run, topic

from shared.adapters import vertex
from shared.adapters.ledger import RunStatus
from shared.decode.hints import job_state_message
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, apply_job_state
from shared.model.alerts import AlertReason
from shared.model.errors import TransientError
from shared.model.results import DispatchOutcome
from shared.policy import jobspec

JOB_RUNS_SECONDS = 2 * 60 + 10 * 60  # provisioning, then the default outcome's duration
DUPLICATE_JOB = AlertReason.DUPLICATE_JOB.value


def copy_of(job_name: str) -> aiplatform_v1.CustomJob:
    """A second job with the labels (run and attempt) of ``job_name``, created in its region."""
    job = vertex.get_custom_job(job_name)
    parent = job_name.split("/customJobs/")[0]
    copy = aiplatform_v1.CustomJob(
        display_name=f"{job.display_name}-copy", job_spec=job.job_spec, labels=dict(job.labels)
    )
    return vertex.create_custom_job(parent, copy)


def hint(job_name: str, state: str) -> Message:
    return Message(*job_state_message(job_name, state), f"hint-{time.time_ns()}")


def duplicate_alerts(world: World, run_id: str) -> list[Message]:
    return [m for m in of_run(world.alerts.pull(), run_id) if m.body()["reason"] == DUPLICATE_JOB]


def cancels(world: World) -> list[str]:
    return [entry["resource"] for entry in world.vertex.requests("CancelCustomJob")]


def test_a_duplicate_in_the_listing_is_cancelled_and_alerted_once_and_the_run_goes_on(
    world: World,
) -> None:
    started = world.request_run("flex-a100")
    assert started.outcome is DispatchOutcome.SUBMITTED and started.job_name
    duplicate = copy_of(started.job_name)
    world.vertex.forget_requests()

    first = world.reconcile()
    second = world.reconcile()

    assert (first.duplicate_jobs_cancelled, second.duplicate_jobs_cancelled) == (1, 0)
    assert cancels(world) == [duplicate.name]
    [alert] = duplicate_alerts(world, started.run_id)
    body = alert.body()
    assert started.job_name in body["message"] and duplicate.name in body["message"]
    assert body["message"].count("https://console.cloud.google.com/vertex-ai/") == 2
    assert body["alert_id"] == alert.attributes["alert_id"] == f"{started.run_id}/1/duplicate_job"
    run = world.run(started.run_id)
    assert run.last_attempt.job_name == started.job_name  # the recorded job is kept
    assert run.last_attempt.duplicate_jobs == (duplicate.name,)
    assert run.alerts.count(DUPLICATE_JOB) == 1

    # The duplicate ends CANCELLED; the kept job runs on and succeeds. Neither the tick nor a
    # hint takes the duplicate's end for the attempt's.
    world.vertex.advance(60)
    assert vertex.get_custom_job(duplicate.name).state.name == "JOB_STATE_CANCELLED"
    world.reconcile()
    [late] = world.deliver_hints([hint(duplicate.name, "JOB_STATE_CANCELLED")])
    assert (late.outcome, late.detail) == (JobStateOutcome.DROPPED, "not_ours")  # never read
    assert world.run(started.run_id).status in (RunStatus.SUBMITTED, RunStatus.RUNNING)
    world.vertex.advance(JOB_RUNS_SECONDS)
    world.reconcile()

    done = world.run(started.run_id)
    assert done.status is RunStatus.SUCCEEDED
    assert [(a.job_name, a.state) for a in done.attempts] == [
        (started.job_name, "JOB_STATE_SUCCEEDED")
    ]
    assert cancels(world) == [duplicate.name]  # never cancelled again
    assert duplicate_alerts(world, started.run_id) == []


def test_a_duplicate_hinted_to_the_job_state_function_is_left_to_the_tick_unread(
    world: World,
) -> None:
    # No run records the duplicate's id, so its hints are dropped before any Vertex AI read
    # (the job-state screen); the next tick's listing finds it, cancels it and alerts once.
    started = world.request_run("flex-a100")
    assert started.job_name
    duplicate = copy_of(started.job_name)
    world.vertex.forget_requests()

    results = world.deliver_hints([hint(duplicate.name, "JOB_STATE_QUEUED")] * 2)

    assert [(r.outcome, r.detail) for r in results] == [(JobStateOutcome.DROPPED, "not_ours")] * 2
    assert world.vertex.requests("GetCustomJob") == [] and cancels(world) == []
    tick = world.reconcile()
    assert tick.duplicate_jobs_cancelled == 1 and cancels(world) == [duplicate.name]
    [alert] = duplicate_alerts(world, started.run_id)
    assert alert.attributes["alert_id"] == f"{started.run_id}/1/duplicate_job"
    run = world.run(started.run_id)
    assert run.last_attempt.job_name == started.job_name
    assert run.last_attempt.duplicate_jobs == (duplicate.name,)


def test_the_job_state_path_handed_a_duplicate_cancels_it_and_never_records_its_state(
    world: World,
) -> None:
    # The guard inside record_job_state: whoever hands it a job labelled with an attempt that
    # records another job (the tick applies listed states through it) gets DUPLICATE, twice
    # over, with one cancel and one alert, and the attempt keeps its own job's state.
    started = world.request_run("flex-a100")
    assert started.job_name
    duplicate = copy_of(started.job_name)
    world.vertex.forget_requests()

    results = [
        apply_job_state(vertex.get_custom_job(duplicate.name), world.services, random.Random(0))
        for _ in range(2)
    ]

    assert [r.outcome for r in results] == [JobStateOutcome.DUPLICATE] * 2
    assert cancels(world) == [duplicate.name]
    [alert] = duplicate_alerts(world, started.run_id)
    assert alert.attributes["alert_id"] == f"{started.run_id}/1/duplicate_job"
    run = world.run(started.run_id)
    assert run.last_attempt.job_name == started.job_name
    assert run.last_attempt.state == "JOB_STATE_QUEUED"  # the kept job's, not moved
    assert run.last_attempt.duplicate_jobs == (duplicate.name,)
    tick = world.reconcile()  # the listing sees the pair too, already dealt with
    assert tick.duplicate_jobs_cancelled == 0 and cancels(world) == [duplicate.name]


def two_jobs_after_a_lost_create(
    world: World,
) -> tuple[Message, str, aiplatform_v1.CustomJob, aiplatform_v1.CustomJob]:
    """A request whose create went through but whose answer was lost (the intent stays without
    a job), and a second job with the same attempt's labels, as a second create would leave:
    (the request, its run id, the first job, the second)."""
    world.vertex.call(
        "POST",
        "faults",
        {"method": "CreateCustomJob", "count": 1, "code": "DEADLINE_EXCEEDED", "when": "after"},
    )
    request = Message(
        json.dumps({"template": "flex-a100", "params": {"dataset_uri": "gs://acme/d/"}}).encode(),
        {"kind": "train"},
        f"req-dup-{time.time_ns()}",
    )
    with pytest.raises(TransientError):
        dispatch_event(request.cloud_event(topic("requests")), world.services)
    [created] = world.vertex.requests("CreateCustomJob")
    run_id = created["request"]["customJob"]["labels"][jobspec.RUN_LABEL]
    assert world.run(run_id).last_attempt.job_name is None
    [first] = vertex.find_jobs_by_label(world.run(run_id).last_attempt.parent, "vd-run", run_id)
    world.vertex.advance(1)
    return request, run_id, first, copy_of(first.name)


def test_a_lookup_after_a_lost_create_that_finds_two_jobs_keeps_the_oldest_and_cancels_the_other(
    world: World,
) -> None:
    request, run_id, first, second = two_jobs_after_a_lost_create(world)
    world.vertex.forget_requests()

    redelivered = [
        dispatch_event(request.cloud_event(topic("requests")), world.services) for _ in range(2)
    ]

    assert [r.outcome for r in redelivered] == [
        DispatchOutcome.REATTACHED,
        DispatchOutcome.DUPLICATE,
    ]
    assert redelivered[0].job_name == first.name  # the oldest
    assert cancels(world) == [second.name]
    [alert] = duplicate_alerts(world, run_id)
    assert first.name in alert.body()["message"] and second.name in alert.body()["message"]
    assert alert.body()["alert_id"] == f"{run_id}/1/duplicate_job"
    run = world.run(run_id)
    assert (run.last_attempt.job_name, run.last_attempt.duplicate_jobs) == (
        first.name,
        (second.name,),
    )
    assert world.reconcile().duplicate_jobs_cancelled == 0  # nothing left for the tick
    assert cancels(world) == [second.name]


def test_an_alert_sent_again_carries_the_same_alert_id(world: World) -> None:
    # A publish that went through but answered too late makes alert_once give the claim back
    # (``Ledger.release_alert``), so the next tick sends the alert again: the receiver must be
    # able to tell the copy. The claim is given back here as that failure does.
    world.vertex.call(
        "POST",
        "outcomes",
        {"result": "user_error", "exit_code": 1, "duration": "1m", "times": 1},
    )
    started = world.request_run("flex-a100")
    world.vertex.advance(2 * 60 + 60 + 1)  # provisioning, one minute running, then exit code 1
    world.reconcile()
    [sent] = of_run(world.alerts.pull(), started.run_id)
    reason = sent.body()["reason"]

    world.services.ledger.release_alert(started.run_id, reason)
    again = world.reconcile()

    [copy] = of_run(world.alerts.pull(), started.run_id)
    assert again.actions_taken == {"alerts": 1}
    assert copy.message_id != sent.message_id  # a new Pub/Sub message ...
    assert copy.body()["alert_id"] == sent.body()["alert_id"]  # ... of the same alert
    assert copy.attributes["alert_id"] == sent.attributes["alert_id"] == sent.body()["alert_id"]
    assert sent.body()["alert_id"] == f"{started.run_id}/1/{reason}"


def test_a_lookup_whose_duplicate_cannot_be_cancelled_yet_records_nothing_and_is_redone(
    world: World,
) -> None:
    # The duplicates are settled before the kept job is recorded: had the attempt recorded its
    # job first, a failed cancel would leave the duplicate running for good (redeliveries stop
    # at "already has its job", and its hints are dropped unread).
    request, run_id, first, second = two_jobs_after_a_lost_create(world)
    world.vertex.call(
        "POST", "faults", {"method": "CancelCustomJob", "count": 1, "code": "RESOURCE_EXHAUSTED"}
    )

    with pytest.raises(TransientError):
        dispatch_event(request.cloud_event(topic("requests")), world.services)
    assert world.run(run_id).last_attempt.job_name is None  # nothing recorded: redone next
    assert duplicate_alerts(world, run_id) == []

    redelivered = dispatch_event(request.cloud_event(topic("requests")), world.services)

    assert (redelivered.outcome, redelivered.job_name) == (DispatchOutcome.REATTACHED, first.name)
    assert vertex.get_custom_job(second.name).state.name in (
        "JOB_STATE_CANCELLING",
        "JOB_STATE_CANCELLED",
    )
    assert len(duplicate_alerts(world, run_id)) == 1
    run = world.run(run_id)
    assert (run.last_attempt.job_name, run.last_attempt.duplicate_jobs) == (
        first.name,
        (second.name,),
    )
