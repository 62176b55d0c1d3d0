"""Which of two or more jobs for one attempt is kept and which are cancelled (policy.duplicates),
and how the attempt notes the cancelled ones (model.runs.with_duplicate_jobs), as tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from run_builders import NOW, RUN_ID, a_run, an_attempt, job_name

from shared.model.runs import (
    InvalidTransition,
    Run,
    RunStatus,
    run_from_document,
    run_to_document,
    with_duplicate_jobs,
)
from shared.policy.duplicates import Duplicates, FoundJob, sort_out

OLD, NEW = NOW - timedelta(minutes=10), NOW - timedelta(minutes=2)


def found(number: int, created: datetime | None = OLD) -> FoundJob:
    return FoundJob(job_name(number), created)


@pytest.mark.parametrize(
    ("recorded", "jobs", "already", "expected"),
    [
        pytest.param(None, (), (), None, id="nothing-found"),
        pytest.param(None, (found(1),), (), None, id="one-job-no-record"),
        pytest.param(1, (found(1),), (), None, id="one-job-the-recorded-one"),
        pytest.param(
            None,
            (found(2, NEW), found(1, OLD)),
            (),
            Duplicates(RUN_ID, 1, job_name(1), (job_name(2),)),
            id="no-record-the-oldest-is-kept",
        ),
        pytest.param(
            1,
            (found(1, NEW), found(2, OLD)),
            (),
            Duplicates(RUN_ID, 1, job_name(1), (job_name(2),)),
            id="the-recorded-job-is-kept-even-when-younger",
        ),
        pytest.param(
            1,
            (found(2, OLD),),
            (),
            Duplicates(RUN_ID, 1, job_name(1), (job_name(2),)),
            id="the-recorded-job-not-among-those-found",
        ),
        pytest.param(
            None,
            (found(3, OLD), found(2, OLD)),
            (),
            Duplicates(RUN_ID, 1, job_name(2), (job_name(3),)),
            id="same-create-time-the-name-decides",
        ),
        pytest.param(
            None,
            (found(1, None), found(2, NEW)),
            (),
            Duplicates(RUN_ID, 1, job_name(2), (job_name(1),)),
            id="an-unknown-create-time-is-never-the-oldest",
        ),
        pytest.param(
            None,
            (found(4, NEW), found(3, OLD), found(2, NEW), found(1, NEW)),
            (),
            Duplicates(RUN_ID, 1, job_name(3), (job_name(1), job_name(2), job_name(4))),
            id="many-all-but-the-oldest-cancelled-in-name-order",
        ),
        pytest.param(
            1,
            (found(1), found(2), found(2)),
            (),
            Duplicates(RUN_ID, 1, job_name(1), (job_name(2),)),
            id="a-job-seen-twice-is-cancelled-once",
        ),
        pytest.param(1, (found(1), found(2)), (job_name(2),), None, id="already-noted"),
        pytest.param(
            1,
            (found(1), found(2), found(3)),
            (job_name(2),),
            Duplicates(RUN_ID, 1, job_name(1), (job_name(3),)),
            id="only-the-new-duplicate",
        ),
    ],
)
def test_which_job_is_kept_and_which_are_cancelled(
    recorded: int | None,
    jobs: tuple[FoundJob, ...],
    already: tuple[str, ...],
    expected: Duplicates | None,
) -> None:
    recorded_name = job_name(recorded) if recorded is not None else None
    assert sort_out(RUN_ID, 1, recorded_name, jobs, already) == expected
    # The order the jobs are found in never changes the answer.
    assert sort_out(RUN_ID, 1, recorded_name, tuple(reversed(jobs)), already) == expected


def _run() -> Run:
    return a_run(
        RunStatus.RUNNING,
        an_attempt(1, job_name=job_name(1), state="JOB_STATE_RUNNING"),
    )


def test_the_attempt_notes_its_duplicates_once_and_in_order() -> None:
    run = _run()

    noted = with_duplicate_jobs(run, 1, (job_name(3), job_name(2)))
    again = with_duplicate_jobs(noted, 1, (job_name(2),))
    more = with_duplicate_jobs(noted, 1, (job_name(4),))

    assert noted.attempts[0].duplicate_jobs == (job_name(2), job_name(3))
    assert again is noted  # unchanged: the ledger writes nothing
    assert more.attempts[0].duplicate_jobs == (job_name(2), job_name(3), job_name(4))
    # Nothing else of the attempt or the run moves: a duplicate is never the attempt's job.
    assert replace(more.attempts[0], duplicate_jobs=()) == run.attempts[0]
    assert more.status is run.status


@pytest.mark.parametrize(
    ("attempt", "names", "match"),
    [
        (2, (job_name(2),), "no attempt 2"),
        (1, (job_name(1),), "its own job"),
    ],
)
def test_noting_a_duplicate_refuses_what_cannot_be_one(
    attempt: int, names: tuple[str, ...], match: str
) -> None:
    with pytest.raises(InvalidTransition, match=match):
        with_duplicate_jobs(_run(), attempt, names)


def test_the_duplicates_survive_the_document_round_trip() -> None:
    noted = with_duplicate_jobs(_run(), 1, (job_name(2),))

    document = run_to_document(noted)

    assert document["attempts"][0]["duplicate_jobs"] == [job_name(2)]
    assert run_from_document(document) == noted
    # A document written before the field existed reads as "no duplicates".
    del document["attempts"][0]["duplicate_jobs"]
    assert run_from_document(document).attempts[0].duplicate_jobs == ()
