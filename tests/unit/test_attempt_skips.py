"""The placements an attempt's walk passed over (``Attempt.skips``): stored, bounded, refused."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from run_builders import NOW, a_run, an_attempt

from shared.model.runs import (
    CREATE_FAILED_STATE,
    MAX_ATTEMPT_SKIPS,
    SKIP_REASON_CHARS,
    InvalidTransition,
    PlacementSkip,
    RetryPlan,
    RunStatus,
    SkipClass,
    cut_middle,
    run_from_document,
    run_to_document,
    with_claimed_attempt,
    with_job,
    with_placement_wait,
    with_refused_create,
)

CENTRAL = {"flex_start": {"max_wait": "3600s"}}
EAST = {"flex_start": {"max_wait": "7200s", "region": "us-east4"}}


def a_skip(n: int = 0, skip_class: SkipClass = SkipClass.QUOTA) -> PlacementSkip:
    return PlacementSkip(CENTRAL, "us-central1", skip_class.value, f"refused {n}", NOW)


def test_skips_round_trip_through_the_ledger_document() -> None:
    skips = (a_skip(0), a_skip(1, SkipClass.COOLDOWN), a_skip(2, SkipClass.UNAVAILABLE))
    run = a_run(RunStatus.SUBMITTING, replace(an_attempt(1, placement=EAST), skips=skips))

    document = run_to_document(run)

    assert document["attempts"][0]["skips"][0] == {
        "placement": CENTRAL,
        "region": "us-central1",
        "class": "quota",
        "reason": "refused 0",
        "at": NOW,
    }
    assert run_from_document(document) == run


def test_a_document_written_before_skips_existed_reads_as_none() -> None:
    document = run_to_document(a_run(RunStatus.SUBMITTING, an_attempt(1)))
    del document["attempts"][0]["skips"]
    assert run_from_document(document).attempts[0].skips == ()


def test_skips_are_bounded_to_the_latest_and_their_reasons_cut() -> None:
    skips = tuple(a_skip(n) for n in range(MAX_ATTEMPT_SKIPS + 5))
    attempt = replace(an_attempt(1), skips=skips)
    assert len(attempt.skips) == MAX_ATTEMPT_SKIPS
    assert attempt.skips[-1].reason == f"refused {MAX_ATTEMPT_SKIPS + 4}"
    long = PlacementSkip(CENTRAL, "us-central1", "capacity", "x" * 5000, NOW)
    assert len(long.reason) == SKIP_REASON_CHARS


@pytest.mark.parametrize(
    ("text", "limit", "cut"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("abcdefghijk", 10, "abcde…hijk"),
        ("abcdefghijk", 2, "a…"),
        ("abcdefghijk", 1, "…"),
    ],
)
def test_cut_middle_keeps_the_start_and_the_end(text: str, limit: int, cut: str) -> None:
    assert cut_middle(text, limit) == cut
    assert len(cut) <= limit


def test_a_cmek_mismatch_is_recorded_whole_and_a_longer_reason_keeps_both_ends() -> None:
    # A CMEK mismatch names the job's key first and ends with the resource's key to set.
    job_key = "projects/acme-ml/locations/us-central1/keyRings/ml/cryptoKeys/train-key"
    pool_key = job_key.replace("train-key", "pool-key")
    reason = (
        f"encryptionSpec.kmsKeyName: the job's CMEK key {job_key!r} differs from persistent "
        f"resource projects/acme-ml/locations/us-central1/persistentResources/a100-pool's "
        f"{pool_key!r}; the next placement is tried (to run here, set the template's "
        f"encryption_key to {pool_key!r})"
    )
    assert PlacementSkip(CENTRAL, "us-central1", "unavailable", reason, NOW).reason == reason
    quoted = reason.replace(
        "; the next", f"; the service said: {'x' * SKIP_REASON_CHARS}; the next"
    )
    skip = PlacementSkip(CENTRAL, "us-central1", "unavailable", quoted, NOW)
    assert len(skip.reason) == SKIP_REASON_CHARS
    assert skip.reason.startswith(f"encryptionSpec.kmsKeyName: the job's CMEK key {job_key!r}")
    assert skip.reason.endswith(f"encryption_key to {pool_key!r})")


def test_moving_an_intent_to_the_next_placement_replaces_it_with_its_skips() -> None:
    claimed = with_claimed_attempt(a_run(), an_attempt(1, placement=CENTRAL))
    moved = with_claimed_attempt(
        claimed,
        replace(
            an_attempt(1, placement=EAST, region="us-east4", intent_at=NOW + timedelta(seconds=1)),
            skips=(a_skip(),),
        ),
    )
    (attempt,) = moved.attempts
    assert (attempt.placement, attempt.region, attempt.skips) == (EAST, "us-east4", (a_skip(),))
    assert moved.status is RunStatus.SUBMITTING


def test_a_refused_create_marks_the_intent_create_failed_with_the_walk() -> None:
    run = a_run(RunStatus.SUBMITTING, an_attempt(1, placement=EAST))
    error = {"message": "quota", "class": "quota"}

    refused = with_refused_create(run, 1, error, (a_skip(0), a_skip(1)))

    (attempt,) = refused.attempts
    assert (attempt.state, attempt.error, len(attempt.skips)) == (CREATE_FAILED_STATE, error, 2)
    assert attempt.job_name is None


def test_a_create_cannot_be_refused_for_an_attempt_that_has_its_job() -> None:
    run = a_run(RunStatus.SUBMITTED, an_attempt(1, job_name="j", state="JOB_STATE_QUEUED"))
    with pytest.raises(InvalidTransition):
        with_refused_create(run, 1, {"message": "x"}, ())


def test_a_run_no_placement_takes_keeps_its_walks_skips_until_a_job_is_recorded() -> None:
    plan = RetryPlan(NOW + timedelta(minutes=1), 1, 0, "no placement could take the job")
    unavailable = a_skip(0, SkipClass.UNAVAILABLE)

    waiting = with_placement_wait(a_run(), plan, NOW, (unavailable,))

    assert waiting.no_placement_skips == (unavailable,)
    assert run_from_document(run_to_document(waiting)) == waiting
    again = with_placement_wait(waiting, plan, NOW + timedelta(minutes=1), ())
    assert again.no_placement_skips == ()  # the last walk's, not an accumulation
    claimed = with_claimed_attempt(waiting, an_attempt(1))
    with_a_job = with_job(claimed, 1, "j", "JOB_STATE_QUEUED")
    assert with_a_job.no_placement_skips == ()
