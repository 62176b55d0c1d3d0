"""The reconciler's plan: what one tick owes the ledger, from the runs read and the jobs listed.

Pure functions over runs, templates and listed jobs (each a ``CustomJob`` view, whatever its
kind: ``policy.job_views``); ``shared.handlers.reconcile`` reads the inputs and applies the plan.
Kept apart so that every rule of a tick (which states are unrecorded, which runs need a retry
message, which jobs stayed queued past their limit, which intents are stuck, which jobs duplicate
an attempt's recorded job, which waiting runs missed their deadline) is tested as a table of
cases without a server.

A tick lists every kind of job it watches: one listing per (parent, kind) of the recorded jobs
(``ListCustomJobs``, ``ListHyperparameterTuningJobs``, ``ListTrainingPipelines``; each takes the
same filter), so its calls grow with pages, not with jobs or kinds it does not watch. A listed job
counts for an attempt only when its kind is the attempt's (``policy.duplicates.counts_for``): a
pipeline's backing CustomJob that carries the pipeline's labels is neither its job nor a duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.aiplatform import CustomJob
from shared.config.model import Template
from shared.model.job_kinds import JobKind, kind_of_job_name
from shared.model.jobstates import WAITING_STATES, is_terminal
from shared.model.runs import LIVE_STATUSES, Attempt, Run, RunStatus, is_older_news
from shared.policy import deadlines, jobspec
from shared.policy.due_retries import DueRetry, RetryCause, due_retry
from shared.policy.duplicates import Duplicates, FoundJob, sort_out
from shared.policy.timing import (
    LIST_WINDOW_MARGIN,
    STUCK_INTENT_ALERT_AFTER,
)
from shared.policy.watchdogs import QueueLimitSource, queue_limit

ListingKey = tuple[str, JobKind]
"""What one listing covers: a parent (``projects/P/locations/R``) and a kind of job."""


@dataclass(frozen=True)
class Listing:
    """One List query (``vertex.list_jobs``): the jobs of one kind under one parent created
    between the oldest watched intent and shortly after the newest."""

    parent: str
    filter: str
    watched: frozenset[str]  # the job names the tick needs to see
    kind: JobKind = JobKind.CUSTOM_JOB

    @property
    def key(self) -> ListingKey:
        return (self.parent, self.kind)


@dataclass(frozen=True)
class StateChange:
    """A job whose state (or undecided end) the ledger has yet to record."""

    run_id: str
    job_name: str
    observed_state: str


@dataclass(frozen=True)
class OverdueWait:
    """A job QUEUED or PENDING past its queue limit (``watchdogs.queue_limit``): alert, cancel;
    its end is then capacity."""

    run_id: str
    job_name: str
    state: str
    waited: timedelta
    limit: timedelta
    source: QueueLimitSource = QueueLimitSource.MAX_WAIT  # where the limit came from


@dataclass(frozen=True)
class StuckIntent:
    """An attempt without a job for longer than ``STUCK_INTENT_ALERT_AFTER``: alert."""

    run_id: str
    attempt: int
    age: timedelta


@dataclass(frozen=True)
class MissedDeadline:
    """A run waiting for a retry (or for a placement) whose deadline (``start_by``) is too close
    to start a job by (``deadlines.too_late``): alert ``deadline_missed`` once, end it FAILED."""

    run_id: str
    deadline: datetime


@dataclass(frozen=True)
class TickPlan:
    """Everything one tick owes the ledger, computed from the runs and the listed jobs."""

    changes: tuple[StateChange, ...] = ()
    retries: tuple[DueRetry, ...] = ()
    overdue: tuple[OverdueWait, ...] = ()
    stuck: tuple[StuckIntent, ...] = ()
    unlisted: tuple[str, ...] = ()  # recorded jobs the listing did not return
    duplicates: tuple[Duplicates, ...] = ()  # listed jobs of an attempt recording another job
    missed: tuple[MissedDeadline, ...] = ()  # waiting runs past their deadline: end them


def list_filter(since: datetime, until: datetime | None = None) -> str:
    """The List filter for our jobs created at or after ``since`` (and, if given, at or before
    ``until``); the three List methods (custom jobs, tuning jobs, pipelines) take the same."""
    bounds = f'create_time>="{_stamp(since)}"'
    if until is not None:
        bounds += f' AND create_time<="{_stamp(until)}"'
    return f"labels.{jobspec.RUN_LABEL}:* AND {bounds}"


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def plan_listings(runs: Iterable[Run], margin: timedelta = LIST_WINDOW_MARGIN) -> list[Listing]:
    """One listing per parent and kind of job holding a recorded, undecided job of a run's last
    attempt, sorted by parent, then kind. A decided job (a run waiting for its retry, maybe for
    days) is not watched: its end cannot change, and its age would stretch the window over every
    job created since.

    The window is cut on Vertex AI's own clock: from the oldest watched job's ``create_time`` to
    the newest's, as the ledger recorded them, each widened by ``margin``. ListCustomJobs pages
    newest first, so without an upper bound the oldest page of the round-robin would page
    through every newer job of the region; with it, a tick's pages follow the runs it read
    (docs/performance.md, "Reconcile round"). Where a watched job's create time is not recorded
    (a job recorded from a hint's read, or before the ledger kept it), the window falls back to
    the intents (our clock) and has no upper bound: slower, never blind.
    """
    oldest: dict[ListingKey, datetime] = {}
    newest: dict[ListingKey, datetime | None] = {}
    watched: dict[ListingKey, set[str]] = {}
    for run in runs:
        last = run.last_attempt
        if last is None or last.job_name is None or _settled(last):
            continue  # no job yet, or its end decided: nothing a listing can change
        key = listing_key(last)
        created = last.job_created_at
        start = created if created is not None else last.intent_at
        oldest[key] = min(oldest.get(key, start), start)
        if created is None:
            newest[key] = None
        elif key not in newest or newest[key] is not None:
            newest[key] = max(newest.get(key) or created, created)
        watched.setdefault(key, set()).add(last.job_name)
    listings = []
    for key in sorted(watched):
        until = newest[key]
        parent, kind = key
        listings.append(
            Listing(
                parent,
                list_filter(oldest[key] - margin, until + margin if until else None),
                frozenset(watched[key]),
                kind,
            )
        )
    return listings


def listing_key(attempt: Attempt) -> ListingKey:
    """The listing that shows ``attempt``'s job: its parent, and the kind its recorded job's
    name says (else the attempt's own kind)."""
    recorded = kind_of_job_name(attempt.job_name) if attempt.job_name else None
    return (attempt.parent, recorded or attempt.job_kind)


def _settled(attempt: Attempt) -> bool:
    """Whether the attempt's job's end is recorded and decided: no listing can change it. (A
    decision beside a live state is a ledger damaged by an old version: still watched, so that
    the listed end repairs it.)"""
    return attempt.decision is not None and is_terminal(attempt.state)


def plan_tick(
    runs: Iterable[Run],
    jobs: Mapping[str, CustomJob],
    templates: Mapping[str, Template],
    *,
    now: datetime,
    grace: timedelta,
    listed: frozenset[ListingKey] | None = None,
) -> TickPlan:
    """What the tick owes: ``jobs`` maps job names to the jobs of the listings ``listed`` (each
    a parent and a kind: ``Listing.key``).

    A run whose job lies in a listing that could not be made (None: every listing was) is left
    for the next tick rather than reported as missing.
    """
    changes: list[StateChange] = []
    due: list[DueRetry] = []
    overdue: list[OverdueWait] = []
    stuck: list[StuckIntent] = []
    unlisted: list[str] = []
    duplicates: list[Duplicates] = []
    by_attempt = _by_attempt(jobs.values())
    missed: list[MissedDeadline] = []
    for run in runs:
        duplicates += _duplicates(run, by_attempt)
        if _missed_deadline(run, now):
            assert run.start_deadline is not None  # deadlines.binds said so
            missed.append(MissedDeadline(run.run_id, run.start_deadline))
            continue  # no retry is published for it: the run ends
        retry = due_retry(run, templates.get(run.template), now)
        # A planned retry is the owed actions' to publish (the tick runs them on every run).
        if retry is not None and retry.cause is not RetryCause.PLANNED:
            due.append(retry)
        last = run.last_attempt
        if last is None:
            continue
        if last.job_name is None:
            if run.status is RunStatus.SUBMITTING and now - last.intent_at >= (
                STUCK_INTENT_ALERT_AFTER
            ):
                stuck.append(StuckIntent(run.run_id, last.number, now - last.intent_at))
            continue
        if _settled(last):
            continue  # its end is decided (plan_listings does not watch it): a retry is all
        if listed is not None and listing_key(last) not in listed:
            continue
        job = jobs.get(last.job_name)
        if job is None:
            unlisted.append(last.job_name)
            continue
        if is_older_news(last, job.state.name):
            continue  # listed before the end the ledger recorded: neither a change nor a wait
        if _changed(run, job):
            changes.append(StateChange(run.run_id, job.name, job.state.name))
        template = templates.get(run.template)
        waited_too_long = _overdue_wait(
            run.run_id, job, last, template, now, grace, deadlines.deadline_of(run)
        )
        if waited_too_long is not None:
            overdue.append(waited_too_long)
    return TickPlan(
        tuple(changes),
        tuple(due),
        tuple(overdue),
        tuple(stuck),
        tuple(unlisted),
        tuple(duplicates),
        tuple(missed),
    )


def _missed_deadline(run: Run, now: datetime) -> bool:
    """A run waiting for a retry or a placement (no job of it exists now) whose deadline is
    too close to start one by: waiting longer cannot meet it."""
    return (
        run.status is RunStatus.WAITING_RETRY
        and deadlines.binds(run)
        and deadlines.too_late(run.start_deadline, now)
    )


def _by_attempt(jobs: Iterable[CustomJob]) -> dict[tuple[str, str], list[FoundJob]]:
    """The listed jobs by their (``vd-run``, ``vd-attempt``) labels."""
    found: dict[tuple[str, str], list[FoundJob]] = {}
    for job in jobs:
        key = (job.labels.get(jobspec.RUN_LABEL, ""), job.labels.get(jobspec.ATTEMPT_LABEL, ""))
        found.setdefault(key, []).append(FoundJob(job.name, job.create_time))
    return found


def _duplicates(run: Run, by_attempt: Mapping[tuple[str, str], list[FoundJob]]) -> list[Duplicates]:
    """The listed jobs of the attempt's kind that carry the labels of an attempt of ``run`` which
    records another job and has not noted them yet (a job of another kind, such as a pipeline's
    backing CustomJob, is never the attempt's: ``policy.duplicates.counts_for``). An attempt
    without a recorded job is left to dispatch, which reattaches by label and sorts out what it
    finds (``submission._reattach``)."""
    sorted_out = []
    for attempt in run.attempts:
        if attempt.job_name is None:
            continue
        found = sort_out(
            run.run_id,
            attempt.number,
            attempt.job_name,
            by_attempt.get((run.run_id, str(attempt.number)), ()),
            already=attempt.duplicate_jobs,
            kind=attempt.job_kind,
        )
        if found is not None:
            sorted_out.append(found)
    return sorted_out


def _changed(run: Run, job: CustomJob) -> bool:
    """The ledger has not seen the job's state, or saw it end but did not decide (the caller
    has set aside a listing older than the recorded end: ``runs.is_older_news``)."""
    last = run.last_attempt
    assert last is not None
    state = job.state.name
    if state != last.state:
        return True
    return is_terminal(state) and last.decision is None and run.status in LIVE_STATUSES


def _overdue_wait(
    run_id: str,
    job: CustomJob,
    attempt: Attempt,
    template: Template | None,
    now: datetime,
    grace: timedelta,
    deadline: datetime | None = None,
) -> OverdueWait | None:
    if job.state.name not in WAITING_STATES or job.create_time is None:
        return None
    waited = now - job.create_time
    limit = queue_limit(template, job, attempt, grace, deadline)
    if waited <= limit.limit:
        return None
    return OverdueWait(run_id, job.name, job.state.name, waited, limit.limit, limit.source)
