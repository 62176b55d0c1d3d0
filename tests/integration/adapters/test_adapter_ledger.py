"""shared.adapters.ledger: the pure run transitions (tables), then the Firestore primitives under
races."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from threading import Barrier

import pytest
from run_builders import NOW, RUN_ID, a_run, an_attempt, job_name

from shared.adapters.ledger import (
    INTENT_STATE,
    Attempt,
    InvalidTransition,
    Ledger,
    LedgerConflict,
    RetryPlan,
    Run,
    RunNotFound,
    RunStatus,
    run_from_document,
    run_to_document,
    with_alert,
    with_claimed_attempt,
    with_job,
    with_status,
)

JOB_1, JOB_2 = job_name(1), job_name(2)
PARAMS = {"dataset_uri": "gs://acme-datasets/imagenet/2026-12-01/"}
RACERS = 16


def new_run(run_id: str = RUN_ID) -> Run:
    """Run ``run_id`` as dispatch opens it: accepted, with its trigger and params, no attempt."""
    return a_run(run_id=run_id, params=PARAMS)


def attempt(number: int, job: str | None = None, state: str = INTENT_STATE) -> Attempt:
    """Attempt ``number``, claimed ``number`` minutes after NOW (an intent unless ``job``)."""
    return an_attempt(number, intent_at=NOW + timedelta(minutes=number), job_name=job, state=state)


def run_with(*attempts: Attempt, status: RunStatus = RunStatus.SUBMITTING) -> Run:
    """That run once ``attempts`` were claimed (and their jobs created)."""
    return a_run(status, *attempts, params=PARAMS)


# --- pure transitions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "claimed", "expected_numbers"),
    [
        (new_run(), attempt(1), [1]),
        (
            run_with(attempt(1, JOB_1, "JOB_STATE_FAILED"), status=RunStatus.WAITING_RETRY),
            attempt(2),
            [1, 2],
        ),
        # an intent whose job never appeared is taken over under the same number
        (run_with(attempt(1)), replace(attempt(1), intent_at=NOW + timedelta(hours=1)), [1]),
    ],
)
def test_claiming_an_attempt(before: Run, claimed: Attempt, expected_numbers: list[int]) -> None:
    after = with_claimed_attempt(before, claimed)

    assert [a.number for a in after.attempts] == expected_numbers
    assert after.last_attempt == claimed
    assert after.status is RunStatus.SUBMITTING


@pytest.mark.parametrize(
    ("before", "claimed", "refusal"),
    [
        (new_run(), attempt(2), "the next attempt is 1"),
        (run_with(attempt(1, JOB_1)), attempt(1), "already has job"),
        (run_with(attempt(1, JOB_1)), attempt(3), "the next attempt is 2"),
        (run_with(attempt(1, JOB_1), status=RunStatus.SUCCEEDED), attempt(2), "final"),
    ],
)
def test_claims_that_do_not_fit_the_run_are_refused(
    before: Run, claimed: Attempt, refusal: str
) -> None:
    with pytest.raises(InvalidTransition, match=refusal):
        with_claimed_attempt(before, claimed)


def test_recording_the_job_of_the_last_attempt_makes_the_run_submitted() -> None:
    after = with_job(run_with(attempt(1)), 1, JOB_1, "JOB_STATE_QUEUED")

    assert after.attempts == (attempt(1, JOB_1, "JOB_STATE_QUEUED"),)
    assert after.status is RunStatus.SUBMITTED


def test_recording_the_same_job_again_changes_only_its_state() -> None:
    submitted = run_with(attempt(1, JOB_1, "JOB_STATE_QUEUED"), status=RunStatus.RUNNING)
    error = {"code": 8, "message": "Resources are insufficient in region"}

    after = with_job(submitted, 1, JOB_1, "JOB_STATE_FAILED", error)

    assert after.attempts[0].state == "JOB_STATE_FAILED"
    assert after.attempts[0].error == error
    assert after.status is RunStatus.RUNNING  # the job-state function decides the run's status


@pytest.mark.parametrize(
    ("before", "number", "job_name", "refusal"),
    [
        (run_with(attempt(1, JOB_1)), 1, JOB_2, "second job for one attempt"),
        (run_with(attempt(1)), 2, JOB_2, "has no attempt 2"),
        (new_run(), 1, JOB_1, "has no attempt 1"),
    ],
)
def test_jobs_that_do_not_fit_the_run_are_refused(
    before: Run, number: int, job_name: str, refusal: str
) -> None:
    with pytest.raises(InvalidTransition, match=refusal):
        with_job(before, number, job_name, "JOB_STATE_QUEUED")


@pytest.mark.parametrize(
    ("status", "new_status", "allowed"),
    [
        (RunStatus.SUBMITTED, RunStatus.RUNNING, True),
        (RunStatus.RUNNING, RunStatus.WAITING_RETRY, True),
        (RunStatus.RUNNING, RunStatus.SUCCEEDED, True),
        (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED, True),
        (RunStatus.SUCCEEDED, RunStatus.RUNNING, False),
        (RunStatus.FAILED, RunStatus.WAITING_RETRY, False),
        (RunStatus.REJECTED, RunStatus.ACCEPTED, False),
        (RunStatus.CANCELLED, RunStatus.SUBMITTING, False),
    ],
)
def test_terminal_statuses_are_final(
    status: RunStatus, new_status: RunStatus, allowed: bool
) -> None:
    before = replace(new_run(), status=status)
    if allowed:
        assert with_status(before, new_status).status is new_status
    else:
        with pytest.raises(InvalidTransition, match="final"):
            with_status(before, new_status)


@pytest.mark.parametrize(
    ("status", "terminal"),
    [
        (status, status.value in {"SUCCEEDED", "FAILED", "REJECTED", "CANCELLED"})
        for status in RunStatus
    ],
)
def test_is_terminal(status: RunStatus, terminal: bool) -> None:
    assert status.is_terminal() is terminal


def test_an_alert_reason_is_kept_once() -> None:
    once = with_alert(new_run(), "no_placement")
    assert with_alert(once, "no_placement") is once
    assert with_alert(once, "quota").alerts == ("no_placement", "quota")


def test_the_document_round_trips() -> None:
    run = run_with(attempt(1, JOB_1, "JOB_STATE_FAILED"), attempt(2))
    run = replace(
        run,
        alerts=("no_placement",),
        next_retry=RetryPlan(at=NOW, attempt=2, placement_index=1, reason="capacity"),
        created_at=NOW,
        updated_at=NOW,
    )
    assert run_from_document(run_to_document(run)) == run


# --- Firestore ----------------------------------------------------------------------------------


def test_racing_deliveries_open_one_run(ledger: Ledger) -> None:
    start = Barrier(RACERS)

    def deliver(_: int) -> tuple[str, bool]:
        start.wait()
        snapshot, created = ledger.open_run(new_run())
        return snapshot.run.run_key, created

    with ThreadPoolExecutor(RACERS) as pool:
        results = list(pool.map(deliver, range(RACERS)))

    assert sum(created for _, created in results) == 1
    assert {run_key for run_key, _ in results} == {new_run().run_key}


def test_an_opened_run_reads_back_as_written(ledger: Ledger) -> None:
    opened, created = ledger.open_run(new_run())
    read = ledger.get_run(new_run().run_id)

    assert created
    assert read is not None
    assert read.run == opened.run
    assert read.update_time == opened.update_time
    assert ledger.get_run("r-ffffffffffffffffffffffff") is None


def test_runs_read_in_one_batch_come_back_as_one_by_one_and_missing_ones_as_none(
    ledger: Ledger,
) -> None:
    first, _ = ledger.open_run(new_run())
    second, _ = ledger.open_run(new_run("r-0123456789abcdef0123456b"))
    missing = "r-ffffffffffffffffffffffff"

    read = ledger.get_runs([first.run.run_id, missing, second.run.run_id])

    assert read == {
        first.run.run_id: ledger.get_run(first.run.run_id),
        second.run.run_id: ledger.get_run(second.run.run_id),
        missing: None,
    }
    assert read[first.run.run_id] == first
    assert ledger.get_runs([]) == {}


def test_two_claims_from_one_snapshot_one_wins(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())

    claimed = ledger.claim_attempt(opened, attempt(1))
    with pytest.raises(LedgerConflict, match="another delivery"):
        ledger.claim_attempt(opened, replace(attempt(1), intent_at=NOW + timedelta(seconds=1)))

    stored = ledger.get_run(opened.run.run_id)
    assert stored is not None
    assert stored.run.attempts == (attempt(1),) == claimed.run.attempts
    assert stored.update_time == claimed.update_time


def test_no_placement_does_not_overwrite_a_job_another_delivery_created(ledger: Ledger) -> None:
    # Delivery A read the run and found every placement full; meanwhile B claimed and created.
    opened, _ = ledger.open_run(new_run())
    claimed = ledger.claim_attempt(opened, attempt(1))
    ledger.record_job(opened.run.run_id, 1, JOB_1, "JOB_STATE_QUEUED", known=claimed)

    with pytest.raises(LedgerConflict):
        ledger.wait_for_retry(opened, RetryPlan(NOW, 1, 0, "no placement could take the job"))

    stored = ledger.get_run(opened.run.run_id)
    assert stored is not None
    assert stored.run.status is RunStatus.SUBMITTED and stored.run.next_retry is None


def test_no_placement_makes_an_unchanged_run_wait(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    plan = RetryPlan(NOW, 1, 0, "no placement could take the job")

    waiting = ledger.wait_for_retry(opened, plan)

    assert waiting.run.status is RunStatus.WAITING_RETRY and waiting.run.next_retry == plan
    assert ledger.get_run(opened.run.run_id) == waiting


def test_a_run_given_up_for_want_of_a_placement_fails_unless_it_moved_on(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    plan = RetryPlan(NOW, 1, 0, "no placement could take the job")
    waiting = ledger.wait_for_retry(opened, plan, NOW - timedelta(days=8))
    ledger.record_alert(opened.run.run_id, "no_placement@end")  # the give-up alert's claim

    failed = ledger.fail_waiting(waiting)

    assert failed.run.status is RunStatus.FAILED
    assert failed.run.alerts == ("no_placement@end",)  # the claim made in between is kept
    assert failed.run.no_placement_since == NOW - timedelta(days=8)
    other, _ = ledger.open_run(new_run("r-0123456789abcdef0123456a"))
    read = ledger.wait_for_retry(other, plan)
    ledger.claim_attempt(read, attempt(1))  # another delivery found a placement meanwhile
    with pytest.raises(LedgerConflict):
        ledger.fail_waiting(read)
    assert ledger.get_run(other.run.run_id).run.status is RunStatus.SUBMITTING


def test_racing_claims_one_wins(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    start = Barrier(RACERS)

    def claim(racer: int) -> bool:
        start.wait()
        try:
            ledger.claim_attempt(opened, replace(attempt(1), placement={"racer": racer}))
        except LedgerConflict:
            return False
        return True

    with ThreadPoolExecutor(RACERS) as pool:
        wins = list(pool.map(claim, range(RACERS)))

    assert sum(wins) == 1
    stored = ledger.get_run(opened.run.run_id)
    assert stored is not None
    assert stored.run.attempts[0].placement == {"racer": wins.index(True)}


def test_a_claim_then_its_job_then_the_next_status(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    ledger.claim_attempt(opened, attempt(1))

    submitted = ledger.record_job(opened.run.run_id, 1, JOB_1, "JOB_STATE_QUEUED")
    retry = RetryPlan(at=NOW + timedelta(minutes=2), attempt=2, placement_index=0, reason="test")
    waiting = ledger.set_status(opened.run.run_id, RunStatus.WAITING_RETRY, retry)

    assert submitted.run.status is RunStatus.SUBMITTED
    assert submitted.run.attempts[0].job_name == JOB_1
    assert (waiting.run.status, waiting.run.next_retry) == (RunStatus.WAITING_RETRY, retry)
    with pytest.raises(InvalidTransition, match="second job"):
        ledger.record_job(opened.run.run_id, 1, JOB_2, "JOB_STATE_QUEUED")


def test_record_alert_is_true_once_per_reason(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    run_id = opened.run.run_id

    sent = [ledger.record_alert(run_id, reason) for reason in ("quota", "quota", "no_placement")]

    assert sent == [True, False, True]


def test_racing_alerts_of_one_reason_record_it_once(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    start = Barrier(8)

    def record(_: int) -> bool:
        start.wait()
        return ledger.record_alert(opened.run.run_id, "no_placement")

    with ThreadPoolExecutor(8) as pool:
        firsts = list(pool.map(record, range(8)))

    assert sum(firsts) == 1
    stored = ledger.get_run(opened.run.run_id)
    assert stored is not None
    assert stored.run.alerts == ("no_placement",)


def test_updating_a_run_that_was_never_opened_is_refused(ledger: Ledger) -> None:
    with pytest.raises(RunNotFound, match="open it first"):
        ledger.set_status("r-000000000000000000000000", RunStatus.FAILED)


def test_list_runs_filters_on_status(ledger: Ledger) -> None:
    for index, status in enumerate([RunStatus.SUBMITTED, RunStatus.RUNNING, RunStatus.SUCCEEDED]):
        opened, _ = ledger.open_run(new_run(f"r-{index:024d}"))
        ledger.set_status(opened.run.run_id, status)

    active = ledger.list_runs([RunStatus.SUBMITTED, RunStatus.RUNNING])

    assert sorted(snapshot.run.status for snapshot in active) == [
        RunStatus.RUNNING,
        RunStatus.SUBMITTED,
    ]


def test_recording_a_job_on_the_claim_snapshot_survives_a_write_in_between(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    claimed = ledger.claim_attempt(opened, attempt(1))
    ledger.record_alert(claimed.run.run_id, "no_placement")  # someone else writes first

    recorded = ledger.record_job(claimed.run.run_id, 1, JOB_1, "JOB_STATE_QUEUED", known=claimed)

    assert recorded.run.attempts[0].job_name == JOB_1
    assert recorded.run.alerts == ("no_placement",)  # the other write is kept, not overwritten
    assert recorded.run.status is RunStatus.SUBMITTED


def test_recording_a_job_on_the_current_snapshot_writes_it(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    claimed = ledger.claim_attempt(opened, attempt(1))

    recorded = ledger.record_job(claimed.run.run_id, 1, JOB_1, "JOB_STATE_QUEUED", known=claimed)

    stored = ledger.get_run(claimed.run.run_id)
    assert stored is not None
    assert stored.run == recorded.run
    assert stored.update_time == recorded.update_time


def test_a_run_is_found_by_the_id_of_any_of_its_jobs(ledger: Ledger) -> None:
    opened, _ = ledger.open_run(new_run())
    claimed = ledger.claim_attempt(opened, attempt(1))
    ledger.record_job(RUN_ID, 1, JOB_1, "JOB_STATE_QUEUED", known=claimed)
    job_id = JOB_1.rsplit("/", 1)[-1]

    assert ledger.find_runs_by_job_id("999") == []
    [found] = ledger.find_runs_by_job_id(job_id)
    assert found.run.run_id == RUN_ID
    assert found.run.attempts[0].job_name == JOB_1
    # An intent has no job yet: nothing to find it by.
    other = new_run("r-ffffffffffffffffffffffff")
    opened_other, _ = ledger.open_run(other)
    ledger.claim_attempt(opened_other, attempt(1))
    assert [s.run.run_id for s in ledger.find_runs_by_job_id(job_id)] == [RUN_ID]
