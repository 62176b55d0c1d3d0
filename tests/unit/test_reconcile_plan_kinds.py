"""The reconciler's plan over every kind of job: one listing per (parent, kind), and a listed job
counts for an attempt only when its kind is the attempt's (policy.duplicates.counts_for)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob, HyperparameterTuningJob, TrainingPipeline
from run_builders import EAST_PARENT, JOB_PARENT, NOW, PARENT, RUN_ID, a_run, an_attempt

from shared.adapters.ledger import INTENT_STATE, Attempt, Run, RunStatus
from shared.model.job_kinds import JobKind
from shared.policy.duplicates import Duplicates, FoundJob, counts_for, sort_out
from shared.policy.job_views import view_of
from shared.policy.reconcile_plan import (
    StateChange,
    TickPlan,
    listing_key,
    plan_listings,
    plan_tick,
)

GRACE = timedelta(minutes=30)
ID = 1000000000000000000


def named(kind: JobKind, number: int, parent: str = JOB_PARENT) -> str:
    """The name of job ``number`` of ``kind`` (ids unique across kinds, as the service's are)."""
    return f"{parent}/{kind.collection}/{ID + number}"


SWEEP = JobKind.HYPERPARAMETER_TUNING_JOB
PIPELINE = JobKind.TRAINING_PIPELINE
CUSTOM = JobKind.CUSTOM_JOB


def attempt(
    kind: JobKind, number: int | None, state: str = "JOB_STATE_RUNNING", **fields: Any
) -> Attempt:
    """Attempt 1 of a run of ``kind``, its job ``named(kind, number)`` (None: an intent)."""
    parent = fields.pop("parent", PARENT)
    return replace(
        an_attempt(
            1,
            parent=parent,
            region=parent.rsplit("/", 1)[1],
            intent_at=NOW - timedelta(minutes=20),
            job_name=named(kind, number, parent) if number is not None else None,
            state=state if number is not None else INTENT_STATE,
            **fields,
        ),
        job_kind=kind,
    )


def run(the_attempt: Attempt, run_id: str = RUN_ID) -> Run:
    status = RunStatus.SUBMITTING if the_attempt.job_name is None else RunStatus.RUNNING
    return a_run(status, the_attempt, run_id=run_id)


def listed(kind: JobKind, number: int, state: str, run_id: str = RUN_ID) -> CustomJob:
    """A job of ``kind`` as the Vertex AI adapter returns it from a List: its view."""
    body = {
        "name": named(kind, number),
        "displayName": f"job-{number}",
        "labels": {"vd-run": run_id, "vd-attempt": "1"},
        "createTime": (NOW - timedelta(minutes=15)).isoformat().replace("+00:00", "Z"),
    }
    if kind is CUSTOM:
        return CustomJob.from_json(_json({**body, "state": state}))
    if kind is SWEEP:
        sweep = {**body, "state": state, "maxTrialCount": 4, "parallelTrialCount": 2}
        return view_of(HyperparameterTuningJob.from_json(_json(sweep)))
    pipeline_state = state.replace("JOB_STATE_", "PIPELINE_STATE_")
    pipeline = {**body, "state": pipeline_state, "trainingTaskInputs": {"workerPoolSpecs": []}}
    return view_of(TrainingPipeline.from_json(_json(pipeline)))


def _json(body: dict[str, Any]) -> str:
    return json.dumps(body)


def tick(*runs: Run, jobs: tuple[CustomJob, ...] = (), **options: Any) -> TickPlan:
    return plan_tick(runs, {job.name: job for job in jobs}, {}, now=NOW, grace=GRACE, **options)


@pytest.mark.parametrize(
    ("name", "kind", "counts"),
    [
        (named(CUSTOM, 1), CUSTOM, True),
        (named(SWEEP, 1), SWEEP, True),
        (named(PIPELINE, 1), PIPELINE, True),
        pytest.param(named(CUSTOM, 2), PIPELINE, False, id="a-pipelines-backing-custom-job"),
        pytest.param(named(CUSTOM, 2), SWEEP, False, id="a-sweeps-trial-job"),
        (named(SWEEP, 1), CUSTOM, False),
        (named(PIPELINE, 1), SWEEP, False),
        pytest.param("not/a/job/name", CUSTOM, False, id="no-job-name"),
    ],
)
def test_a_job_counts_for_an_attempt_only_of_its_own_kind(
    name: str, kind: JobKind, counts: bool
) -> None:
    assert counts_for(name, kind) is counts


def test_sort_out_never_keeps_nor_cancels_a_job_of_another_kind() -> None:
    pipeline, backing = named(PIPELINE, 1), named(CUSTOM, 2)
    old = NOW - timedelta(hours=1)
    # The backing CustomJob is older than the pipeline and carries its labels: still not a
    # candidate, whether the attempt records the pipeline or not yet.
    found = [FoundJob(backing, old), FoundJob(pipeline, NOW)]

    assert sort_out(RUN_ID, 1, pipeline, found, kind=PIPELINE) is None
    assert sort_out(RUN_ID, 1, None, found, kind=PIPELINE) is None
    second = FoundJob(named(PIPELINE, 3), NOW + timedelta(minutes=1))
    assert sort_out(RUN_ID, 1, None, [*found, second], kind=PIPELINE) == Duplicates(
        RUN_ID, 1, pipeline, (second.name,)
    )
    # The default kind is the attempt's default: CustomJob (today's callers).
    assert sort_out(RUN_ID, 1, None, found) is None
    assert sort_out(RUN_ID, 1, None, [*found, FoundJob(named(CUSTOM, 4), NOW)]) == Duplicates(
        RUN_ID, 1, backing, (named(CUSTOM, 4),)
    )


def test_one_listing_per_parent_and_kind_sorted() -> None:
    runs = [
        run(attempt(SWEEP, 1), run_id="r-a"),
        run(attempt(CUSTOM, 2), run_id="r-b"),
        run(attempt(PIPELINE, 3), run_id="r-c"),
        run(attempt(SWEEP, 4), run_id="r-d"),
        run(attempt(SWEEP, 5, parent=EAST_PARENT), run_id="r-e"),
        run(attempt(PIPELINE, None), run_id="r-f"),  # no job yet: nothing to list
    ]

    listings = plan_listings(runs)

    assert [(listing.parent, listing.kind, listing.watched) for listing in listings] == [
        (PARENT, CUSTOM, frozenset({named(CUSTOM, 2, PARENT)})),
        (PARENT, SWEEP, frozenset({named(SWEEP, 1, PARENT), named(SWEEP, 4, PARENT)})),
        (PARENT, PIPELINE, frozenset({named(PIPELINE, 3, PARENT)})),
        (EAST_PARENT, SWEEP, frozenset({named(SWEEP, 5, EAST_PARENT)})),
    ]
    # The same filter for every kind of a parent (the three List methods take it).
    assert len({listing.filter for listing in listings if listing.parent == PARENT}) == 1


def test_the_listing_of_an_attempt_is_its_recorded_jobs_kind() -> None:
    # A record written before the attempt kept its kind reads as a CustomJob attempt; its
    # recorded job's name still says where it is.
    old_record = replace(attempt(SWEEP, 1), job_kind=CUSTOM)

    assert listing_key(old_record) == (PARENT, SWEEP)
    assert listing_key(attempt(PIPELINE, None)) == (PARENT, PIPELINE)


def test_a_pipelines_backing_custom_job_is_neither_its_job_nor_a_duplicate() -> None:
    # A CustomJob run of the same parent makes the tick list customJobs too; the pipeline's
    # backing job, labelled with the pipeline's run and attempt, comes back in that listing.
    pipeline_run = run(attempt(PIPELINE, 1, parent=JOB_PARENT), run_id="r-pipeline")
    custom_run = run(attempt(CUSTOM, 5, parent=JOB_PARENT), run_id="r-custom")
    jobs = (
        listed(PIPELINE, 1, "JOB_STATE_RUNNING", run_id="r-pipeline"),
        listed(CUSTOM, 2, "JOB_STATE_SUCCEEDED", run_id="r-pipeline"),  # the backing job
        listed(CUSTOM, 5, "JOB_STATE_RUNNING", run_id="r-custom"),
    )

    plan = tick(pipeline_run, custom_run, jobs=jobs)

    assert plan == TickPlan()  # no change (the backing job's SUCCEEDED is not the pipeline's)
    assert not plan.duplicates


@pytest.mark.parametrize("kind", [SWEEP, PIPELINE])
def test_a_listed_sweep_or_pipeline_is_planned_like_a_custom_job(kind: JobKind) -> None:
    the_run = run(attempt(kind, 1, parent=JOB_PARENT))
    second = listed(kind, 2, "JOB_STATE_QUEUED")

    plan = tick(the_run, jobs=(listed(kind, 1, "JOB_STATE_SUCCEEDED"), second))

    assert plan.changes == (StateChange(RUN_ID, named(kind, 1), "JOB_STATE_SUCCEEDED"),)
    assert plan.duplicates == (Duplicates(RUN_ID, 1, named(kind, 1), (named(kind, 2),)),)


def test_a_kind_not_listed_in_a_parent_is_left_for_the_next_tick() -> None:
    the_run = run(attempt(SWEEP, 1, parent=JOB_PARENT))

    # The parent's customJobs were listed, its tuning jobs were not (throttled, failed).
    assert tick(the_run, listed=frozenset({(JOB_PARENT, CUSTOM)})) == TickPlan()
    listed_sweeps = frozenset({(JOB_PARENT, SWEEP)})
    assert tick(the_run, listed=listed_sweeps).unlisted == (named(SWEEP, 1),)
