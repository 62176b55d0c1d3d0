"""Two or more jobs for one attempt: which one the attempt keeps, and which are cancelled.

CreateCustomJob takes no request id, so a create whose answer was lost, a takeover racing a slow
create, or a person re-running a job by hand can leave more than one job labelled with the same
``vd-run`` and ``vd-attempt`` (docs/architecture.md, "Exactly once"). Every place that can see
such a pair (dispatch's label lookup after a crash, the reconciler's listing, the job-state
function reading a hinted job) asks this one rule which job to keep:

- the job the ledger records for the attempt, when it records one: the run already follows it
  (its states, its decision), so keeping another would move the run onto a job it never saw;
- else the oldest (by create time, then by name so that every caller picks the same one).

Every other job found is a duplicate: cancelled, named on the attempt, and alerted once per run.

A job counts for an attempt only when its kind is the attempt's kind (``counts_for``): a
TrainingPipeline runs its training task as a CustomJob of its own, which the real service may
label with the pipeline's ``vd-run``/``vd-attempt``. That backing job is neither the attempt's job
(its end is not the pipeline's) nor a duplicate of it (cancelling it would kill the pipeline's
training). Every caller (dispatch's label lookup, the reconciler's listing, the job-state
function's read) goes through ``sort_out``, which applies the rule, or asks ``counts_for``.
Pure: it reads job names and create times only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from shared.model.job_kinds import JobKind, kind_of_job_name


@dataclass(frozen=True)
class FoundJob:
    """A job found for an attempt, as much of it as the rule reads."""

    name: str
    create_time: datetime | None  # None: not known (a job read without it); sorts last


@dataclass(frozen=True)
class Duplicates:
    """The jobs of one attempt once the rule is applied: ``kept`` stays, ``cancel`` are ended."""

    run_id: str
    attempt: int
    kept: str
    cancel: tuple[str, ...]  # sorted by name; never empty


def counts_for(job_name: str, kind: JobKind) -> bool:
    """Whether the job ``job_name`` can be a job of an attempt of ``kind`` (``Attempt.job_kind``):
    its name's collection is the kind's. A job of another kind carrying the attempt's labels (a
    pipeline's backing CustomJob) is neither the attempt's job nor a duplicate of it."""
    return kind_of_job_name(job_name) is kind


def sort_out(
    run_id: str,
    attempt: int,
    recorded: str | None,
    found: Iterable[FoundJob],
    already: Iterable[str] = (),
    *,
    kind: JobKind = JobKind.CUSTOM_JOB,
) -> Duplicates | None:
    """Which of ``found`` (and ``recorded``, the job the ledger records, if any) the attempt
    keeps and which are to be cancelled; None when there is nothing to cancel.

    ``kind`` is the attempt's (``Attempt.job_kind``, CUSTOM_JOB by default like the attempt's):
    found jobs of another kind are left out (``counts_for``), never kept nor cancelled.
    ``already`` are the duplicates the attempt records as dealt with (cancelled, alerted):
    they are not returned again, so that each is cancelled and alerted once however often it
    is seen.
    """
    jobs = {job.name: job for job in found if counts_for(job.name, kind)}
    if recorded is not None:
        kept = recorded
    elif jobs:
        kept = min(jobs.values(), key=_age_order).name
    else:
        return None
    done = set(already)
    cancel = tuple(sorted(name for name in jobs if name != kept and name not in done))
    if not cancel:
        return None
    return Duplicates(run_id, attempt, kept, cancel)


def _age_order(job: FoundJob) -> tuple[bool, datetime | None, str]:
    # Unknown create times sort after every known one; names break ties (and order the unknown).
    return (job.create_time is None, job.create_time, job.name)
