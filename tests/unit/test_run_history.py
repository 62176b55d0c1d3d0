"""An attempt's history: what the transitions record (``shared.model.runs.with_history`` through
``with_job``, ``with_observed_state``, ``with_attempt_state``, ``with_decision``), the GPUs a job
holds (``shared.policy.gpus``) and the readings of a history (``shared.policy.run_history``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from run_builders import NOW, a_run, an_attempt, job_name

from shared.aiplatform import CustomJob
from shared.config.model import HyperparameterTuning, MetricGoal, ParameterType, TuningParameter
from shared.model.jobstates import JobStateName
from shared.model.runs import (
    CREATE_FAILED_STATE,
    CREATED_EVENT,
    MAX_ATTEMPT_EVENTS,
    Attempt,
    AttemptEvent,
    AttemptOutcome,
    JobTimes,
    RunStatus,
    run_from_document,
    run_to_document,
    with_attempt_state,
    with_decision,
    with_job,
    with_observed_state,
)
from shared.policy.gpus import gpus_held
from shared.policy.job_views import job_times
from shared.policy.run_history import created_at, gpu_hours_spent, outcome_class, time_to_start

JOB = job_name(1)
QUEUED, PENDING, RUNNING = JobStateName.QUEUED, JobStateName.PENDING, JobStateName.RUNNING
SUCCEEDED, FAILED = JobStateName.SUCCEEDED, JobStateName.FAILED
CANCELLING, CANCELLED = JobStateName.CANCELLING, JobStateName.CANCELLED


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


def seen(minutes: float, **own: float) -> JobTimes:
    """An observation made at ``minutes``, carrying the job's own times given (``created``,
    ``started``, ``ended``, in minutes)."""
    return JobTimes(
        seen_at=at(minutes),
        created_at=at(own["created"]) if "created" in own else None,
        started_at=at(own["started"]) if "started" in own else None,
        ended_at=at(own["ended"]) if "ended" in own else None,
    )


def observed(*steps: tuple[str, JobTimes | None]) -> Attempt:
    """Attempt 1 of a run, claimed at NOW, after its job's states were recorded in this order
    (the first by ``with_job``, as submission records a create, the others by
    ``with_observed_state``, as the job-state function and the reconciler do)."""
    run = a_run(RunStatus.SUBMITTING, an_attempt(1))
    (first, first_times), *rest = steps
    run = with_job(run, 1, JOB, first, times=first_times)
    for state, times in rest:
        run = with_observed_state(run, 1, JOB, state, times=times)
    attempt = run.attempt(1)
    assert attempt is not None
    return attempt


def events(*pairs: tuple[str, float]) -> tuple[AttemptEvent, ...]:
    return tuple(AttemptEvent(state, at(minutes)) for state, minutes in pairs)


# (case, observations in order, events expected, started_at, ended_at: minutes after NOW)
HISTORIES: list[
    tuple[str, list[tuple[str, JobTimes | None]], tuple[AttemptEvent, ...], Any, Any]
] = [
    (
        "the job's own times win over when it was seen",
        [
            (QUEUED, seen(0.1, created=0)),
            (PENDING, seen(30, created=0)),
            (RUNNING, seen(40, created=0, started=35)),
            (SUCCEEDED, seen(100, created=0, started=35, ended=95)),
        ],
        events((CREATED_EVENT, 0), (QUEUED, 0.1), (PENDING, 30), (RUNNING, 35), (SUCCEEDED, 95)),
        35,
        95,
    ),
    (
        "without the job's times: when each state was seen",
        [(QUEUED, seen(1)), (RUNNING, seen(20)), (FAILED, seen(50))],
        events((CREATED_EVENT, 1), (QUEUED, 1), (RUNNING, 20), (FAILED, 50)),
        20,
        50,
    ),
    (
        "the same state seen again is not appended, nor does it move started_at",
        [(QUEUED, seen(0, created=0)), (RUNNING, seen(10)), (RUNNING, seen(15))],
        events((CREATED_EVENT, 0), (QUEUED, 0), (RUNNING, 10)),
        10,
        None,
    ),
    (
        "an older state applied late (a slow hint) is not appended",
        [(QUEUED, seen(0, created=0)), (RUNNING, seen(10)), (PENDING, seen(12))],
        events((CREATED_EVENT, 0), (QUEUED, 0), (RUNNING, 10)),
        10,
        None,
    ),
    (
        "an end first seen without RUNNING: started from the job's start_time, no RUNNING event",
        [(QUEUED, seen(0, created=0)), (SUCCEEDED, seen(90, created=0, started=20, ended=80))],
        events((CREATED_EVENT, 0), (QUEUED, 0), (SUCCEEDED, 80)),
        20,
        80,
    ),
    (
        "a job that never started: no started_at, ended when its end was seen",
        [(QUEUED, seen(0, created=0)), (CANCELLING, seen(60)), (CANCELLED, seen(61))],
        events((CREATED_EVENT, 0), (QUEUED, 0), (CANCELLING, 60), (CANCELLED, 61)),
        None,
        61,
    ),
    (
        "our clock behind Vertex AI's: an event never goes before the one before it",
        [(QUEUED, seen(4, created=5)), (RUNNING, seen(3))],
        events((CREATED_EVENT, 5), (QUEUED, 5), (RUNNING, 5)),
        5,
        None,
    ),
    (
        "CREATED first stamped by our clock takes the job's create_time once one is read",
        [(QUEUED, seen(2)), (RUNNING, seen(10, created=1, started=9))],
        events((CREATED_EVENT, 1), (QUEUED, 2), (RUNNING, 9)),
        9,
        None,
    ),
    (
        "no times at all (a caller that does not know): nothing recorded",
        [(QUEUED, None), (RUNNING, None)],
        (),
        None,
        None,
    ),
    (
        "the service's UNSPECIFIED state (a pipeline state without a twin) is no event",
        [(QUEUED, seen(0, created=0)), (JobStateName.UNSPECIFIED, seen(5))],
        events((CREATED_EVENT, 0), (QUEUED, 0)),
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("steps", "expected", "started", "ended"),
    [case[1:] for case in HISTORIES],
    ids=[case[0] for case in HISTORIES],
)
def test_the_transitions_record_the_jobs_history(
    steps: list[tuple[str, JobTimes | None]],
    expected: tuple[AttemptEvent, ...],
    started: float | None,
    ended: float | None,
) -> None:
    attempt = observed(*steps)

    assert attempt.events == expected
    assert attempt.started_at == (None if started is None else at(started))
    assert attempt.ended_at == (None if ended is None else at(ended))


def test_applying_an_observation_twice_changes_nothing_more() -> None:
    run = a_run(RunStatus.SUBMITTING, an_attempt(1))
    once = with_observed_state(
        with_job(run, 1, JOB, QUEUED, times=seen(0, created=0)), 1, JOB, RUNNING, times=seen(9)
    )

    assert with_observed_state(once, 1, JOB, RUNNING, times=seen(9)) == once


def test_a_flapping_job_keeps_its_created_event_and_the_latest() -> None:
    run = with_job(a_run(RunStatus.SUBMITTING, an_attempt(1)), 1, JOB, QUEUED, times=seen(0))
    for minute in range(1, 41):  # RUNNING <-> UPDATING: both of RUNNING's rank, each appended
        state = RUNNING if minute % 2 else JobStateName.UPDATING
        run = with_observed_state(run, 1, JOB, state, times=seen(minute))
    attempt = run.attempt(1)
    assert attempt is not None

    assert len(attempt.events) == MAX_ATTEMPT_EVENTS
    assert attempt.events[0] == AttemptEvent(CREATED_EVENT, at(0))
    assert attempt.events[-1] == AttemptEvent(JobStateName.UPDATING, at(40))
    assert attempt.started_at == at(1)  # the first RUNNING, not the latest


def test_a_decision_records_the_end_with_the_jobs_end_time() -> None:
    run = with_observed_state(
        with_job(a_run(RunStatus.SUBMITTING, an_attempt(1)), 1, JOB, QUEUED, times=seen(0)),
        1,
        JOB,
        RUNNING,
        times=seen(10, started=8),
    )
    outcome = AttemptOutcome(
        attempt=1,
        job_name=JOB,
        state=FAILED,
        error={"code": 8, "message": "stockout", "class": "capacity"},
        decision={"outcome": "capacity"},
        status=RunStatus.FAILED,
        times=seen(31, started=8, ended=30),
    )

    decided = with_decision(run, outcome).attempts[0]

    assert decided.events[-1] == AttemptEvent(FAILED, at(30))
    assert (decided.started_at, decided.ended_at) == (at(8), at(30))
    assert outcome_class(decided) == "capacity"
    assert with_decision(with_decision(run, outcome), outcome).attempts[0] == decided


def test_a_refused_create_is_no_event_of_a_history() -> None:
    run = a_run(RunStatus.SUBMITTING, an_attempt(1))

    failed = with_attempt_state(run, 1, CREATE_FAILED_STATE, {"message": "x"}, seen(1))

    assert failed.attempts[0].events == ()


def test_the_history_survives_the_document() -> None:
    attempt = replace(
        observed((QUEUED, seen(0, created=0)), (RUNNING, seen(5, started=4))),
        machine="a2-highgpu-1g+NVIDIA_TESLA_A100x1",
        gpus=8,
    )
    run = a_run(RunStatus.RUNNING, attempt)

    assert run_from_document(run_to_document(run)) == run


def test_job_times_reads_the_views_times_and_leaves_unset_ones_none() -> None:
    job = CustomJob(name=JOB, create_time=at(0), start_time=at(3))

    assert job_times(job, at(4)) == JobTimes(seen_at=at(4), created_at=at(0), started_at=at(3))


# --- GPUs held at once (policy.gpus) ----------------------------------------------------------


def pool(machine: str, accelerator: str | None, count: int, replicas: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"machine_type": machine}
    if accelerator:
        spec |= {"accelerator_type": accelerator, "accelerator_count": count}
    return {"machine_spec": spec, "replica_count": replicas}


def sweep(parallel: int) -> HyperparameterTuning:
    return HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(TuningParameter("lr", ParameterType.DOUBLE, min=0.001, max=0.1),),
        max_trials=10,
        parallel_trials=parallel,
    )


A100 = "NVIDIA_TESLA_A100"
GPUS: list[tuple[str, list[dict[str, Any]], HyperparameterTuning | None, int]] = [
    ("one pool, one GPU", [pool("a2-highgpu-1g", A100, 1, 1)], None, 1),
    ("replicas x accelerators", [pool("a2-highgpu-4g", A100, 4, 2)], None, 8),
    (
        "every pool counts; a CPU pool counts none",
        [
            pool("a2-highgpu-8g", A100, 8, 1),
            pool("a2-highgpu-4g", A100, 4, 3),
            pool("n2", None, 0, 2),
        ],
        None,
        20,
    ),
    ("an empty pool (skipped) counts none", [pool("a2-highgpu-2g", A100, 2, 1), {}], None, 2),
    ("a TPU is no GPU", [pool("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, 1)], None, 0),
    ("a sweep: per trial x parallel_trials", [pool("a2-highgpu-2g", A100, 2, 1)], sweep(3), 6),
    ("a sweep of CPU trials holds none", [pool("n2-standard-8", None, 0, 1)], sweep(4), 0),
]


@pytest.mark.parametrize(
    ("pools", "tuning", "expected"), [c[1:] for c in GPUS], ids=[c[0] for c in GPUS]
)
def test_gpus_held(
    pools: list[dict[str, Any]], tuning: HyperparameterTuning | None, expected: int
) -> None:
    job = CustomJob(job_spec={"worker_pool_specs": pools})

    assert gpus_held(job, tuning) == expected


# --- The readings of a history (policy.run_history) -------------------------------------------


def history(**fields: Any) -> Attempt:
    return replace(an_attempt(1, job_name=JOB, state=RUNNING), **fields)


READINGS: list[tuple[str, Attempt, Any, Any, float, Any]] = [
    # (case, attempt, created_at, time_to_start, gpu-hours at NOW+2h, outcome class)
    (
        "started and ended: hours between, times GPUs",
        history(
            job_created_at=at(0),
            started_at=at(30),
            ended_at=at(90),
            gpus=8,
            state=SUCCEEDED,
        ),
        at(0),
        timedelta(minutes=30),
        8.0,
        "succeeded",
    ),
    (
        "still running: counted up to now",
        history(events=events((CREATED_EVENT, 0)), started_at=at(60), gpus=4),
        at(0),
        timedelta(minutes=60),
        4.0,
        None,
    ),
    (
        "never started (a capacity end): no time to start, no GPU-hours",
        history(
            job_created_at=at(0),
            ended_at=at(120),
            gpus=8,
            state=FAILED,
            error={"code": 8, "message": "stockout", "class": "capacity"},
        ),
        at(0),
        None,
        0.0,
        "capacity",
    ),
    (
        "an attempt written before history: nothing to read",
        history(),
        None,
        None,
        0.0,
        None,
    ),
    (
        "a start recorded before its create (two clocks): no negative wait",
        history(job_created_at=at(10), started_at=at(9), gpus=1),
        at(10),
        timedelta(0),
        111 / 60,
        None,
    ),
]


@pytest.mark.parametrize(
    ("attempt", "created", "to_start", "gpu_hours", "outcome"),
    [c[1:] for c in READINGS],
    ids=[c[0] for c in READINGS],
)
def test_the_readings_of_a_history(
    attempt: Attempt,
    created: datetime | None,
    to_start: timedelta | None,
    gpu_hours: float,
    outcome: str | None,
) -> None:
    assert created_at(attempt) == created
    assert time_to_start(attempt) == to_start
    assert gpu_hours_spent(attempt, at(120)) == pytest.approx(gpu_hours)
    assert outcome_class(attempt) == outcome
