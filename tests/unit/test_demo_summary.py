"""The demo's summary lines say only what the demo saw. Chapter 1: no "runs" unless the ledger
showed the job RUNNING (at 600x, QUEUED -> SUCCEEDED between two reads is common). Chapter 8: ok
only when the full reservation was skipped, the Spot job was preempted and the run succeeded on
demand in us-east4 with exactly those two jobs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.model.runs import Attempt, PlacementSkip, Run, RunStatus
from tooling.demo_story import (
    RESERVATION,
    SeenJob,
    dataset_summary,
    placement_summary,
    seen_job,
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
