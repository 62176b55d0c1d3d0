"""The pure drop decision of on_job_event: which hints are worth a Vertex AI read (a table)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from run_builders import EAST_REGION, REGION, RUN_ID, a_run, an_attempt, job_name

from shared.decode.hints import SERVICE_TASK, HintSource, JobHint, LineMeaning
from shared.model.job_kinds import JobKind
from shared.model.jobstates import JobStateName as S
from shared.model.runs import (
    Attempt,
    Run,
    RunStatus,
    job_ids,
    run_from_document,
    run_to_document,
    with_hint_read,
)
from shared.policy.hint_screen import (
    HINT_READS_PER_ATTEMPT,
    HintDrop,
    Screened,
    screen,
    screen_task,
)

JOB = job_name(1)
JOB_ID = JOB.rsplit("/", 1)[-1]
DECISION: dict[str, Any] = {"outcome": "succeeded"}


def line(meaning: LineMeaning, task: str = SERVICE_TASK, region: str | None = None) -> JobHint:
    """A log-entry hint for job 1 (a log entry names no region unless its zone does)."""
    return JobHint("acme-ml", JOB_ID, region, HintSource.LOG_ENTRY, task_name=task, meaning=meaning)


def message(observed: str | None) -> JobHint:
    """Our job-state message for job 1."""
    return JobHint("123456789012", JOB_ID, REGION, HintSource.JOB_STATE, observed)


def run_with(
    state: str, decision: dict[str, Any] | None = None, job: str = JOB, hint_reads: int = 0
) -> Run:
    attempt = replace(
        an_attempt(1, job_name=job, state=state, decision=decision), hint_reads=hint_reads
    )
    return a_run(RunStatus.RUNNING, attempt)


RUNNING = LineMeaning.RUNNING
ENDED = LineMeaning.ENDED
POSSIBLE_END = LineMeaning.POSSIBLE_END
NOTHING = LineMeaning.NOTHING


@pytest.mark.parametrize(
    ("hint", "runs", "dropped"),
    [
        # (a) not a service line: dropped before the ledger is even read
        (line(ENDED, task="workerpool0-0"), [run_with(S.RUNNING)], HintDrop.NOT_SERVICE),
        (line(RUNNING, task="workerpool1-3"), [], HintDrop.NOT_SERVICE),
        # (b) no run records the job
        (line(ENDED), [], HintDrop.NOT_OURS),
        (message(S.FAILED), [], HintDrop.NOT_OURS),
        (line(ENDED), [run_with(S.RUNNING, job=job_name(2))], HintDrop.NOT_OURS),
        (line(ENDED, region=EAST_REGION), [run_with(S.RUNNING)], HintDrop.NOT_OURS),
        # (c) the end is recorded
        (line(ENDED), [run_with(S.SUCCEEDED, DECISION)], HintDrop.ALREADY_ENDED),
        (line(POSSIBLE_END), [run_with(S.FAILED, DECISION)], HintDrop.ALREADY_ENDED),
        (line(POSSIBLE_END), [run_with(S.FAILED)], HintDrop.ALREADY_ENDED),  # error to come
        (message(S.SUCCEEDED), [run_with(S.SUCCEEDED, DECISION)], HintDrop.ALREADY_ENDED),
        (message(S.RUNNING), [run_with(S.FAILED)], HintDrop.ALREADY_ENDED),  # older news
        (message(None), [run_with(S.CANCELLED, DECISION)], HintDrop.ALREADY_ENDED),
        # (d) nothing the line says can change what is recorded
        (line(NOTHING), [run_with(S.QUEUED)], HintDrop.NO_STATE_CHANGE),
        (line(NOTHING), [run_with(S.PENDING)], HintDrop.NO_STATE_CHANGE),
        (line(NOTHING), [run_with(S.RUNNING)], HintDrop.NO_STATE_CHANGE),
        (line(RUNNING), [run_with(S.RUNNING)], HintDrop.NO_STATE_CHANGE),
        (line(RUNNING), [run_with(S.CANCELLING)], HintDrop.NO_STATE_CHANGE),
        (message(S.RUNNING), [run_with(S.RUNNING)], HintDrop.ALREADY_RECORDED),
        (message(S.QUEUED), [run_with(S.QUEUED)], HintDrop.ALREADY_RECORDED),
        # the attempt's log hints have had their reads
        (line(POSSIBLE_END), [run_with(S.RUNNING, hint_reads=3)], HintDrop.READ_BUDGET),
        (line(ENDED), [run_with(S.RUNNING, hint_reads=4)], HintDrop.READ_BUDGET),
        (line(RUNNING), [run_with(S.QUEUED, hint_reads=3)], HintDrop.READ_BUDGET),
        (line(NOTHING), [run_with(S.QUEUED, hint_reads=3)], HintDrop.NO_STATE_CHANGE),
    ],
)
def test_a_hint_that_cannot_change_the_record_is_dropped(
    hint: JobHint, runs: list[Run], dropped: HintDrop
) -> None:
    verdict = screen(hint, runs)
    assert verdict.drop is dropped
    assert not verdict.read


@pytest.mark.parametrize(
    ("hint", "recorded", "decision"),
    [
        (line(RUNNING), S.QUEUED, None),
        (line(RUNNING), S.PENDING, None),
        (line(ENDED), S.RUNNING, None),
        (line(POSSIBLE_END), S.RUNNING, None),
        (line(POSSIBLE_END), S.QUEUED, None),
        (line(POSSIBLE_END), S.CANCELLING, None),
        (line(ENDED, region=REGION), S.RUNNING, None),
        # A decided attempt whose recorded state went live again (an old write): a read repairs.
        (line(ENDED), S.RUNNING, DECISION),
        (message(S.RUNNING), S.QUEUED, None),
        (message(S.FAILED), S.RUNNING, None),
        (message(S.FAILED), S.FAILED, None),  # recorded, not decided: its error may be set now
        (message(None), S.RUNNING, None),
        (message(None), S.FAILED, None),
    ],
)
@pytest.mark.parametrize("hint_reads", [0, HINT_READS_PER_ATTEMPT - 1])
def test_a_hint_that_may_change_the_record_is_read_by_the_recorded_name(
    hint: JobHint, recorded: str, decision: dict[str, Any] | None, hint_reads: int
) -> None:
    verdict = screen(hint, [run_with(recorded, decision, hint_reads=hint_reads)])
    assert verdict == Screened(None, "r-0123456789abcdef01234567", 1, JOB)
    assert verdict.read


def test_our_own_messages_are_not_held_to_the_read_budget() -> None:
    spent = run_with(S.FAILED, hint_reads=HINT_READS_PER_ATTEMPT)
    assert screen(message(S.FAILED), [spent]).read


@pytest.mark.parametrize(("counted", "after"), [(0, 1), (2, 3), (3, 3), (5, 5)])
def test_a_hint_read_is_counted_up_to_the_limit(counted: int, after: int) -> None:
    run = run_with(S.RUNNING, hint_reads=counted)
    changed = with_hint_read(run, 1, limit=3)
    assert changed.attempts[0].hint_reads == after
    assert (changed is run) is (counted == after)
    assert run_from_document(run_to_document(changed)) == changed


def test_the_attempt_that_records_the_job_is_the_one_screened() -> None:
    first = an_attempt(1, job_name=job_name(7), state=S.FAILED, decision=DECISION)
    second = an_attempt(2, job_name=JOB, state=S.RUNNING)
    verdict = screen(line(ENDED), [a_run(RunStatus.RUNNING, first, second)])
    assert (verdict.drop, verdict.attempt, verdict.job_name) == (None, 2, JOB)


def test_two_runs_recording_one_id_are_read_if_either_needs_it() -> None:
    ended = run_with(S.SUCCEEDED, DECISION)
    other_region = job_name(1, parent="projects/123456789012/locations/us-east4")
    live = a_run(
        RunStatus.RUNNING,
        an_attempt(1, job_name=other_region, state=S.RUNNING),
        run_id="r-ffffffffffffffffffffffff",
    )
    verdict = screen(line(ENDED), [ended, live])
    assert (verdict.run_id, verdict.job_name) == ("r-ffffffffffffffffffffffff", other_region)


@pytest.mark.parametrize(
    ("hint", "dropped"),
    [
        (line(ENDED, task="workerpool0-0"), HintDrop.NOT_SERVICE),
        (JobHint("acme-ml", JOB_ID, None, HintSource.LOG_ENTRY), HintDrop.NOT_SERVICE),
        (line(ENDED), None),
        (message(S.FAILED), None),
    ],
)
def test_the_task_is_screened_alone(hint: JobHint, dropped: HintDrop | None) -> None:
    assert screen_task(hint) is dropped


def attempts(*names: str | None) -> tuple[Attempt, ...]:
    return tuple(
        an_attempt(number, job_name=name, state=S.QUEUED if name else "INTENT")
        for number, name in enumerate(names, 1)
    )


@pytest.mark.parametrize(
    ("names", "ids"),
    [
        ((), []),
        ((None,), []),
        ((job_name(1),), ["1000000000000000001"]),
        ((job_name(1), job_name(2), None), ["1000000000000000001", "1000000000000000002"]),
        ((job_name(1), job_name(1)), ["1000000000000000001"]),
    ],
)
def test_the_document_lists_the_ids_of_the_jobs(
    names: tuple[str | None, ...], ids: list[str]
) -> None:
    run = a_run(RunStatus.SUBMITTED, *attempts(*names))
    assert job_ids(run) == ids
    assert run_to_document(run)["job_ids"] == ids


def named(kind: JobKind) -> str:
    """Job 1's id in ``kind``'s collection (ids are unique across kinds)."""
    return JOB.replace("/customJobs/", f"/{kind.collection}/")


@pytest.mark.parametrize(
    ("hint_kind", "recorded", "read"),
    [
        pytest.param(JobKind.TRAINING_PIPELINE, JobKind.TRAINING_PIPELINE, True, id="pipeline"),
        pytest.param(
            JobKind.HYPERPARAMETER_TUNING_JOB, JobKind.HYPERPARAMETER_TUNING_JOB, True, id="sweep"
        ),
        pytest.param(JobKind.CUSTOM_JOB, JobKind.TRAINING_PIPELINE, False, id="another-kind"),
        pytest.param(JobKind.TRAINING_PIPELINE, JobKind.CUSTOM_JOB, False, id="not-the-custom"),
        pytest.param(None, JobKind.TRAINING_PIPELINE, True, id="a-log-line-names-no-kind"),
    ],
)
def test_a_hint_is_read_by_the_recorded_name_of_any_kind(
    hint_kind: JobKind | None, recorded: JobKind, read: bool
) -> None:
    source = HintSource.JOB_STATE if hint_kind is not None else HintSource.LOG_ENTRY
    hint = JobHint(
        "123456789012",
        JOB_ID,
        REGION if hint_kind is not None else None,
        source,
        S.SUCCEEDED if hint_kind is not None else None,
        task_name=SERVICE_TASK if hint_kind is None else None,
        meaning=ENDED if hint_kind is None else None,
        kind=hint_kind,
    )

    verdict = screen(hint, [run_with(S.RUNNING, job=named(recorded))])

    if read:
        assert verdict == Screened(None, RUN_ID, 1, named(recorded))
    else:
        assert verdict.drop is HintDrop.NOT_OURS
