"""Run history on the emulators: the ledger keeps each attempt's timed events, by the emulator's
clock, as the reconciler sees the job move; a capacity end keeps its class; ``status RUN
--history`` prints the timeline (docs/architecture.md, "Run history")."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from reconcile_test_support import CONFIG, Message, World

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.config_source import load_config
from shared.adapters.ledger import DEFAULT_COLLECTION, Ledger, RunStatus
from shared.decode.hints import job_state_message
from shared.handlers.jobstate import JobStateOutcome
from shared.model.jobstates import JobStateName
from shared.model.runs import CREATED_EVENT, AttemptEvent
from shared.policy import run_history
from tooling import main

PROVISIONING = timedelta(minutes=2)  # the emulated world's timings.provisioning
RUNS_FOR = timedelta(minutes=10)  # its default outcome's duration
A100_MACHINE = "a2-highgpu-1g+NVIDIA_TESLA_A100x1"
KINDS_CONFIG = Path(__file__).parent / "configs" / "kinds.yaml"


def advance(world: World, delta: timedelta) -> None:
    world.vertex.advance(delta.total_seconds())


def test_a_job_s_states_and_times_are_kept_as_the_reconciler_sees_them(world: World) -> None:
    t0 = world.vertex.now()
    started = world.request_run("flex-a100")
    queued = world.run(started.run_id).attempts[0]

    world.reconcile()  # admitted at once (A100s free): PENDING, provisioning
    advance(world, PROVISIONING + timedelta(seconds=30))
    world.reconcile()  # RUNNING since the end of provisioning
    advance(world, RUNS_FOR)
    world.reconcile()  # SUCCEEDED, decided
    run = world.run(started.run_id)
    [attempt] = run.attempts

    assert run.status is RunStatus.SUCCEEDED
    assert (queued.machine, queued.gpus) == (A100_MACHINE, 1)  # written with the intent
    assert (attempt.machine, attempt.gpus) == (A100_MACHINE, 1)
    assert attempt.events == (
        AttemptEvent(CREATED_EVENT, t0),  # the job's create_time
        AttemptEvent(JobStateName.QUEUED, t0),  # create's answer, seen at once
        AttemptEvent(JobStateName.PENDING, t0),  # the first tick, same emulated instant
        AttemptEvent(JobStateName.RUNNING, t0 + PROVISIONING),  # the job's start_time
        AttemptEvent(JobStateName.SUCCEEDED, t0 + PROVISIONING + RUNS_FOR),  # its end_time
    )
    assert attempt.started_at == t0 + PROVISIONING
    assert attempt.ended_at == t0 + PROVISIONING + RUNS_FOR
    assert run_history.time_to_start(attempt) == PROVISIONING
    assert run_history.gpu_hours_spent(attempt, t0 + timedelta(days=1)) == pytest.approx(10 / 60)
    assert run_history.outcome_class(attempt) == "succeeded"
    world.reconcile()
    assert world.run(started.run_id).attempts[0].events == attempt.events  # nothing appended


def test_a_hint_read_records_the_job_s_own_start_time_once(world: World) -> None:
    t0 = world.vertex.now()
    started = world.request_run("flex-a100")
    assert started.job_name is not None
    advance(world, PROVISIONING + timedelta(minutes=3))  # RUNNING for 3 minutes already
    hint = Message(*job_state_message(started.job_name, "JOB_STATE_RUNNING"), "hint-running")

    first, again = world.deliver_hints([hint, hint])
    [attempt] = world.run(started.run_id).attempts

    assert (first.outcome, again.outcome) == (JobStateOutcome.RECORDED, JobStateOutcome.DROPPED)
    assert attempt.events[-1] == AttemptEvent(JobStateName.RUNNING, t0 + PROVISIONING)
    assert [event.state for event in attempt.events].count(JobStateName.RUNNING) == 1
    assert attempt.started_at == t0 + PROVISIONING  # the job's start_time, not the hint's read


def test_a_capacity_end_keeps_its_class_and_no_start(world: World) -> None:
    t0 = world.vertex.now()
    started = world.request_run("flex-l4-starved")  # no L4 in the region: it stays queued

    advance(world, timedelta(hours=2, minutes=1))  # past its FLEX_START max wait of 2h
    world.reconcile()
    [attempt] = world.run(started.run_id).attempts

    assert attempt.state == JobStateName.FAILED
    assert [event.state for event in attempt.events] == [
        CREATED_EVENT,
        JobStateName.QUEUED,
        JobStateName.FAILED,
    ]
    assert attempt.events[0].at == t0
    assert attempt.ended_at is not None and attempt.ended_at == attempt.events[-1].at
    assert t0 + timedelta(hours=2) <= attempt.ended_at <= t0 + timedelta(hours=2, minutes=1)
    assert attempt.started_at is None
    assert run_history.outcome_class(attempt) == "capacity"
    assert run_history.gpu_hours_spent(attempt, t0 + timedelta(days=1)) == 0.0


def test_a_sweep_holds_its_parallel_trials_gpus_and_keeps_its_own_times(world: World) -> None:
    world.services.config = load_config(str(KINDS_CONFIG))
    t0 = world.vertex.now()
    started = world.request_run("sweep-two-regions")  # 1 A100 per trial, 2 trials at once

    world.reconcile()
    advance(world, PROVISIONING + timedelta(minutes=1))
    world.reconcile()
    [attempt] = world.run(started.run_id).attempts

    assert (attempt.machine, attempt.gpus) == (A100_MACHINE, 2)
    assert attempt.events[0] == AttemptEvent(CREATED_EVENT, t0)
    assert attempt.events[-1].state == JobStateName.RUNNING
    assert attempt.started_at is not None
    assert attempt.started_at == attempt.events[-1].at <= t0 + PROVISIONING + timedelta(minutes=1)


@pytest.fixture
def operator_world(world: World, clean_firestore: FirestoreEmulator) -> World:
    """The world on the default runs collection: the one the CLI reads."""
    world.services._ledger = Ledger(
        clients.firestore_client(LOCAL_PROJECT), DEFAULT_COLLECTION, clock=world.vertex.now
    )
    return world


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def test_status_history_prints_the_timeline_and_json_carries_it(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = operator_world.vertex.now()
    started = operator_world.request_run("flex-a100")
    operator_world.reconcile()
    advance(operator_world, PROVISIONING + RUNS_FOR + timedelta(minutes=1))
    operator_world.reconcile()  # RUNNING never seen: the end brings the job's start_time
    capsys.readouterr()

    assert main(["status", started.run_id, "--history", "--config", str(CONFIG)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert main(["status", started.run_id, "--history", "--json", "--config", str(CONFIG)]) == 0
    document = json.loads(capsys.readouterr().out)

    job_id = started.job_name.rsplit("/", 1)[-1]
    assert lines == [
        f"run {started.run_id}  SUCCEEDED  template flex-a100  1 attempt",
        f"attempt 1  flex_start  us-central1  {A100_MACHINE}  1 GPU  CustomJob {job_id}",
        f"    {_rfc3339(t0)}  CREATED",
        f"    {_rfc3339(t0)}  QUEUED     +0s",
        f"    {_rfc3339(t0)}  PENDING    +0s",
        f"    {_rfc3339(t0 + PROVISIONING + RUNS_FOR)}  SUCCEEDED  +12m00s",
        "    time to start 2m00s · ran 10m00s · 0.17 GPU-hours · outcome succeeded",
    ]
    [attempt] = document["runs"][0]["attempts"]
    assert [event["state"] for event in attempt["events"]] == [
        CREATED_EVENT,
        "JOB_STATE_QUEUED",
        "JOB_STATE_PENDING",
        "JOB_STATE_SUCCEEDED",
    ]
    assert attempt["started_at"] == (t0 + PROVISIONING).isoformat()
    assert attempt["history"]["time_to_start_s"] == PROVISIONING.total_seconds()
    assert attempt["history"]["outcome"] == "succeeded"
