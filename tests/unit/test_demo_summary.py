"""The demo's summary lines say only what the demo saw. Chapter 1: no "runs" unless the ledger
showed the job RUNNING (at 600x, QUEUED -> SUCCEEDED between two reads is common). Chapter 8: ok
only when the full reservation was skipped, the Spot job was preempted and the run succeeded on
demand in us-east4 with exactly those two jobs. Chapter 9: ok only when one FLEX_START tuning job
was created, no trial ended while the GPUs were missing, every trial then succeeded and the
completion named the best trial. Chapter 10: ok only when one pipeline trained on the L4 pool and
the completion named the model it uploaded."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.model.runs import Attempt, PlacementSkip, Run, RunStatus
from tooling.demo_story import (
    RESERVATION,
    SeenJob,
    SeenPipeline,
    SeenSweep,
    dataset_summary,
    pipeline_summary,
    placement_summary,
    seen_job,
    seen_pipeline,
    seen_sweep,
    sweep_summary,
)

FLEX = "FLEX_START"


@pytest.mark.parametrize(
    ("states", "jobs", "strategy", "completion", "summary"),
    [
        (
            ["INTENT", "QUEUED", "RUNNING", "SUCCEEDED"], 1, FLEX, True,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED seen) -> runs -> succeeds "
            "-> completion",
        ),
        (
            ["INTENT", "QUEUED", "SUCCEEDED"], 1, FLEX, True,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED seen) -> succeeds (RUNNING "
            "not seen) -> completion",
        ),
        (
            ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"], 1, 6, True,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED, PENDING seen) -> runs -> "
            "succeeds -> completion",
        ),
        (
            ["INTENT", "QUEUED"], 1, FLEX, False,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED seen) -> last seen QUEUED "
            "-> no completion",
        ),
        (
            ["RUNNING", "SUCCEEDED"], 2, FLEX, True,
            "dataset -> 2 jobs -> runs -> succeeds -> completion",
        ),
        (
            ["SUCCEEDED"], 1, "STANDARD", True,
            "dataset -> one job (strategy STANDARD) -> succeeds (RUNNING not seen) -> completion",
        ),
        ([], 0, None, False, "dataset -> 0 jobs -> no job state seen -> no completion"),
    ],
)  # fmt: skip
def test_the_summary_names_only_the_states_seen(
    states: list[str], jobs: int, strategy: object, completion: bool, summary: str
) -> None:
    assert dataset_summary(states, jobs, strategy, completion) == summary


# --- chapter 8: the reservation is full, Spot is preempted, the run lands elsewhere ----------

AT = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)
PREEMPTED = (
    "The job was preempted: its Spot VMs were reclaimed. Resources are insufficient in region: "
    "us-central1."
)
HOLDER = SeenJob("us-central1", "", RESERVATION, "RUNNING", "")
SPOT = SeenJob("us-central1", "SPOT", None, "FAILED", PREEMPTED)
ON_DEMAND = SeenJob("us-east4", "STANDARD", None, "SUCCEEDED", "")
FULL = PlacementSkip(
    {"reservation": {"name": RESERVATION, "region": "us-central1"}},
    "us-central1",
    "unavailable",
    "the reservation has 0 free VMs, the job needs 1",
    AT,
)


def attempt(number: int, region: str, state: str, **fields: Any) -> Attempt:
    return Attempt(
        number=number,
        placement={},
        region=region,
        parent=f"projects/local-project/locations/{region}",
        intent_at=AT,
        job_name=f"projects/1/locations/{region}/customJobs/{number}",
        state=f"JOB_STATE_{state}",
        **fields,
    )


SPOT_ATTEMPT = attempt(
    1, "us-central1", "FAILED", skips=(FULL,), error={"code": 8, "class": "capacity"}
)
LANDED = attempt(2, "us-east4", "SUCCEEDED")
RUN = Run(
    run_id="r-1",
    run_key="request-message:1",
    route="on-request",
    template="bert-reserved",
    trigger={},
    status=RunStatus.SUCCEEDED,
    attempts=(SPOT_ATTEMPT, LANDED),
)
AS_EXPECTED = (
    "reservation full -> skipped (unavailable) -> Spot in us-central1 preempted -> on demand in "
    "us-east4 succeeds; exactly 2 jobs"
)


@pytest.mark.parametrize(
    ("run", "holder", "jobs", "creates", "summary", "ok"),
    [
        (RUN, HOLDER, [SPOT, ON_DEMAND], 2, AS_EXPECTED, True),
        # An unset strategy is on demand too.
        (RUN, HOLDER, [SPOT, replace(ON_DEMAND, strategy="")], 2, AS_EXPECTED, True),
        # The first run's job never held the reservation: nothing was full.
        (
            RUN, replace(HOLDER, state="SUCCEEDED"), [SPOT, ON_DEMAND], 2,
            "reservation not held (reservation in us-central1 succeeds) -> skipped (unavailable) "
            "-> Spot in us-central1 preempted -> on demand in us-east4 succeeds; exactly 2 jobs",
            False,
        ),
        (
            RUN, None, [SPOT, ON_DEMAND], 2,
            "reservation not held (no job) -> skipped (unavailable) -> Spot in us-central1 "
            "preempted -> on demand in us-east4 succeeds; exactly 2 jobs",
            False,
        ),
        # The walk did not record the reservation's skip.
        (
            replace(RUN, attempts=(replace(SPOT_ATTEMPT, skips=()), LANDED)), HOLDER,
            [SPOT, ON_DEMAND], 2,
            "reservation full -> reservation not skipped -> Spot in us-central1 preempted -> on "
            "demand in us-east4 succeeds; exactly 2 jobs",
            False,
        ),
        # Skipped for another reason than a live rule (a cooldown): not what the story shows.
        (
            replace(
                RUN,
                attempts=(
                    replace(SPOT_ATTEMPT, skips=(replace(FULL, skip_class="cooldown"),)), LANDED
                ),
            ),
            HOLDER, [SPOT, ON_DEMAND], 2,
            "reservation full -> skipped (cooldown) -> Spot in us-central1 preempted -> on demand "
            "in us-east4 succeeds; exactly 2 jobs",
            False,
        ),
        # The Spot job failed in user code, not preempted.
        (
            RUN, HOLDER, [replace(SPOT, error="exit code 1"), ON_DEMAND], 2,
            "reservation full -> skipped (unavailable) -> Spot in us-central1 fails -> on demand "
            "in us-east4 succeeds; exactly 2 jobs",
            False,
        ),
        # Preempted, but the ledger did not classify the end as capacity.
        (
            replace(
                RUN,
                attempts=(replace(SPOT_ATTEMPT, error={"code": 8, "class": "unknown"}), LANDED),
            ),
            HOLDER, [SPOT, ON_DEMAND], 2, AS_EXPECTED, False,
        ),
        # The Spot job ran to the end: it was never preempted, and no second job was needed.
        (
            replace(RUN, attempts=(replace(SPOT_ATTEMPT, state="JOB_STATE_SUCCEEDED"),)), HOLDER,
            [replace(SPOT, state="SUCCEEDED", error="")], 1,
            "reservation full -> skipped (unavailable) -> Spot in us-central1 succeeds; 1 job",
            False,
        ),
        # A duplicate create for the run (a job the ledger does not know).
        (
            RUN, HOLDER, [SPOT, ON_DEMAND], 3,
            "reservation full -> skipped (unavailable) -> Spot in us-central1 preempted -> on "
            "demand in us-east4 succeeds; 3 jobs",
            False,
        ),
        # Landed in the wrong region, or not yet ended.
        (
            RUN, HOLDER, [SPOT, replace(ON_DEMAND, region="us-central1")], 2,
            "reservation full -> skipped (unavailable) -> Spot in us-central1 preempted -> on "
            "demand in us-central1 succeeds; exactly 2 jobs",
            False,
        ),
        (
            replace(RUN, status=RunStatus.RUNNING), HOLDER,
            [SPOT, replace(ON_DEMAND, state="RUNNING")], 2,
            "reservation full -> skipped (unavailable) -> Spot in us-central1 preempted -> on "
            "demand in us-east4 RUNNING -> run RUNNING; exactly 2 jobs",
            False,
        ),
        # The second job went to the reservation after all.
        (
            RUN, HOLDER, [SPOT, replace(ON_DEMAND, reservation=RESERVATION)], 2,
            "reservation full -> skipped (unavailable) -> Spot in us-central1 preempted -> "
            "reservation in us-east4 succeeds; exactly 2 jobs",
            False,
        ),
    ],
)  # fmt: skip
def test_chapter_8_is_ok_only_as_the_story_says(
    run: Run, holder: SeenJob | None, jobs: list[SeenJob], creates: int, summary: str, ok: bool
) -> None:
    assert placement_summary(run, holder, jobs, creates) == (summary, ok)


@pytest.mark.parametrize(
    ("job", "seen"),
    [
        (
            {
                "name": "projects/123/locations/us-central1/customJobs/7",
                "state": "JOB_STATE_FAILED",
                "error": {"code": 8, "message": PREEMPTED},
                "jobSpec": {
                    "scheduling": {"strategy": "SPOT"},
                    "workerPoolSpecs": [{"machineSpec": {"machineType": "a2-ultragpu-1g"}}],
                },
            },
            SPOT,
        ),
        (
            {
                "name": "projects/123/locations/us-central1/customJobs/8",
                "state": "JOB_STATE_RUNNING",
                "jobSpec": {
                    "workerPoolSpecs": [
                        {
                            "machineSpec": {
                                "reservationAffinity": {
                                    "reservationAffinityType": "SPECIFIC_RESERVATION",
                                    "key": "compute.googleapis.com/reservation-name",
                                    "values": [RESERVATION],
                                }
                            }
                        }
                    ]
                },
            },
            HOLDER,
        ),
        (  # the enum's number, as a proto read without names gives it
            {
                "name": "projects/123/locations/us-east4/customJobs/9",
                "state": "JOB_STATE_SUCCEEDED",
                "jobSpec": {"scheduling": {"strategy": 3}},
            },
            ON_DEMAND,
        ),
        ({}, SeenJob("", "", None, "", "")),
    ],
)
def test_a_job_is_read_from_its_rest_json(job: dict[str, Any], seen: SeenJob) -> None:
    assert seen_job(job) == seen


# --- chapter 9: a sweep's trials wait for GPUs, then it succeeds with its best trial ----------

WAITING = SeenSweep(state="PENDING", max_trials=6, trials_succeeded=0, trials_ended=0)
SWEPT = SeenSweep(state="SUCCEEDED", max_trials=6, trials_succeeded=6, trials_ended=6)
BEST = {"id": "4", "metrics": {"accuracy": 0.93}, "parameters": {"learning_rate": 0.003}}
SWEEP_DONE = {"best_trial": BEST, "trials": {"succeeded": 6, "infeasible": 0}}
SWEEP_OK = (
    "sweep -> exactly one FLEX_START tuning job -> trials wait for GPUs (tuning job PENDING) "
    "-> 6 of 6 trials succeed -> succeeds -> completion: best trial 4 (accuracy 0.93)"
)


@pytest.mark.parametrize(
    ("creates", "strategy", "waiting", "ended", "status", "completion", "summary", "ok"),
    [
        (1, FLEX, WAITING, SWEPT, "SUCCEEDED", SWEEP_DONE, SWEEP_OK, True),
        (1, 6, WAITING, SWEPT, "SUCCEEDED", SWEEP_DONE, SWEEP_OK, True),
        # Two tuning jobs for one run: never.
        (
            2, FLEX, WAITING, SWEPT, "SUCCEEDED", SWEEP_DONE,
            SWEEP_OK.replace("exactly one FLEX_START tuning job", "2 tuning jobs"), False,
        ),
        # Trials ran before any GPU was added: the story did not show a wait.
        (
            1, FLEX, replace(WAITING, trials_ended=2, trials_succeeded=2), SWEPT, "SUCCEEDED",
            SWEEP_DONE,
            SWEEP_OK.replace(
                "trials wait for GPUs (tuning job PENDING)",
                "2 trials ended before any GPU was free",
            ),
            False,
        ),
        # A trial failed: not every trial succeeded.
        (
            1, FLEX, WAITING, replace(SWEPT, trials_succeeded=5), "SUCCEEDED",
            {**SWEEP_DONE, "trials": {"succeeded": 5, "infeasible": 0}},
            SWEEP_OK.replace("6 of 6", "5 of 6"), False,
        ),
        # The completion without the best trial.
        (
            1, FLEX, WAITING, SWEPT, "SUCCEEDED", {"state": "SUCCEEDED"},
            SWEEP_OK.replace(
                "completion: best trial 4 (accuracy 0.93)", "completion without a best trial"
            ),
            False,
        ),
        (
            1, FLEX, WAITING, SWEPT, "SUCCEEDED", None,
            SWEEP_OK.replace("completion: best trial 4 (accuracy 0.93)", "no completion"), False,
        ),
        (
            1, "STANDARD", WAITING, SWEPT, "FAILED", SWEEP_DONE,
            SWEEP_OK.replace("exactly one FLEX_START tuning job", "one tuning job (STANDARD)")
            .replace("-> succeeds", "-> run FAILED"),
            False,
        ),
    ],
)  # fmt: skip
def test_the_sweep_summary(
    creates: int,
    strategy: object,
    waiting: SeenSweep,
    ended: SeenSweep,
    status: str,
    completion: dict[str, Any] | None,
    summary: str,
    ok: bool,
) -> None:
    assert sweep_summary(creates, strategy, waiting, ended, status, completion) == (
        summary,
        ok,
    )


def test_seen_sweep_counts_the_trials_by_state() -> None:
    job = {
        "state": "JOB_STATE_RUNNING",
        "maxTrialCount": 6,
        "trials": [
            {"id": "1", "state": "SUCCEEDED"},
            {"id": "2", "state": "INFEASIBLE"},
            {"id": "3", "state": "ACTIVE"},
            {"id": "4", "state": "REQUESTED"},
        ],
    }
    assert seen_sweep(job) == SeenSweep("RUNNING", 6, 1, 2)
    assert seen_sweep({}) == SeenSweep("", 0, 0, 0)


# --- chapter 10: a training pipeline on a persistent resource uploads its model ---------------

MODEL = "projects/1/locations/us-central1/models/77"
PIPELINE = SeenPipeline("SUCCEEDED", "l4-pool", MODEL, "1")
MODEL_DONE = {"model": MODEL, "model_version": "1"}
PIPELINE_OK = (
    f"pipeline -> exactly one training pipeline -> training on l4-pool -> succeeds -> model "
    f"{MODEL} -> completion names the model"
)


@pytest.mark.parametrize(
    ("pipeline", "creates", "status", "completion", "summary", "ok"),
    [
        (PIPELINE, 1, "SUCCEEDED", MODEL_DONE, PIPELINE_OK, True),
        (
            replace(PIPELINE, persistent_resource=""), 1, "SUCCEEDED", MODEL_DONE,
            PIPELINE_OK.replace("on l4-pool", "on no persistent resource"), False,
        ),
        (
            replace(PIPELINE, model="", model_version=""), 1, "SUCCEEDED", {"model": None},
            PIPELINE_OK.replace(f"model {MODEL}", "no model uploaded").replace(
                "completion names the model", "completion without a model"
            ),
            False,
        ),
        (
            PIPELINE, 1, "SUCCEEDED", {"model": MODEL, "model_version": "2"}, PIPELINE_OK,
            False,
        ),
        (
            PIPELINE, 2, "SUCCEEDED", MODEL_DONE,
            PIPELINE_OK.replace("exactly one training pipeline", "2 training pipelines"), False,
        ),
        (
            replace(PIPELINE, state="FAILED", model=""), 1, "FAILED", None,
            "pipeline -> exactly one training pipeline -> training on l4-pool -> fails -> no "
            "model uploaded -> run FAILED -> no completion",
            False,
        ),
        (None, 1, "SUCCEEDED", MODEL_DONE, "pipeline -> exactly one training pipeline -> not "
         "read -> completion names the model", False),
    ],
)  # fmt: skip
def test_the_pipeline_summary(
    pipeline: SeenPipeline | None,
    creates: int,
    status: str,
    completion: dict[str, Any] | None,
    summary: str,
    ok: bool,
) -> None:
    assert pipeline_summary(pipeline, creates, status, completion) == (summary, ok)


def test_seen_pipeline_reads_the_training_task_and_the_uploaded_model() -> None:
    pipeline = {
        "state": "PIPELINE_STATE_SUCCEEDED",
        "trainingTaskInputs": {"persistentResourceId": "l4-pool", "workerPoolSpecs": []},
        "modelToUpload": {"name": MODEL, "versionId": "1", "displayName": "resnet-r"},
    }
    assert seen_pipeline(pipeline) == PIPELINE
    assert seen_pipeline({"state": "PIPELINE_STATE_RUNNING"}) == SeenPipeline("RUNNING", "", "", "")
