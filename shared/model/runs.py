"""The run data model: what a run is, its attempts, and the pure changes that move it along.

A run is everything one trigger caused; its id is ``r-`` + 24 hex digits
(docs/dispatch-contract.md). This module owns the model and nothing that talks to a cloud: the
records (``Run``, ``Attempt``, ``RetryPlan``, ``RunSnapshot``, ``AttemptOutcome``), the
``RunStatus`` enum, the ledger's errors, the pure transitions ``with_*`` (each returns the run
unchanged when already applied, so a store may re-apply them on conflict), and the conversion to
and from the stored document. The Firestore store is ``shared.adapters.ledger``; this module imports
no ``google.*`` package, so pure logic and its tests can use runs without a cloud client.

The document (field names as stored)::

    run_id, run_key, route, template   strings
    trigger                            the decoded trigger, a plain map
    params                             map of parameter name to value
    status                             a RunStatus value
    attempts                           list of {number, placement (map), region, parent,
                                       intent_at, job_name (null until the job exists),
                                       state, error (map or null), decision (map or null),
                                       cancel_requested_at (null, or when we asked Vertex AI
                                       to cancel the job), cancel_reason (null, or a
                                       CancelReason value: who asked and why),
                                       duplicate_jobs (list of the names of other jobs
                                       found for the attempt and cancelled:
                                       ``shared.policy.duplicates``),
                                       hint_reads (reads made for log hints, absent: 0),
                                       skips (list of {placement (map), region, class,
                                       reason, at}: the placements this attempt's walk
                                       passed over before (or instead of) its job, at most
                                       MAX_ATTEMPT_SKIPS, absent: none),
                                       job_kind (a JobKind value: the kind of job the
                                       attempt creates, written with the intent; absent:
                                       custom_job, an unknown value: UnreadableRun),
                                       events (list of {state, at}: CREATED, then each
                                       state seen, at most MAX_ATTEMPT_EVENTS), started_at,
                                       ended_at (null until known), machine (the cooldown's
                                       machine text), gpus (held at once; absent: 0),
                                       output_dir (the rendered base output directory)}
    alerts                             list of the alerts claimed (sent, or being sent): a
                                       reason, or reason@scope for one alerted once per
                                       attempt or per day of a wait (policy.watchdogs)
    notices                            list of other messages already published ("completion")
    next_retry                         null, or {at, attempt, placement_index, reason}: the
                                       retry the reconciler publishes once ``at`` has passed
    operator_grant                     null, or the attempt an operator allowed
    recovery_published_at              null, or when the reconciler last published a retry
                                       to recover a stale intent or a run never claimed
    no_placement_since                 null, or when the run began waiting for a placement
                                       that can take it (kept across its retries; null again
                                       once a job is recorded)
    no_placement_skips                 list of skips (as an attempt's): why each placement
                                       could not take the run when its last walk found none
                                       (absent: none; emptied once a job is recorded)
    data_wait                          null, or the data the run waited (or waits, while
                                       WAITING_DATA) for: ``shared.model.data_waits``
    start_deadline                     null, or when the run must have a job RUNNING by
    placement_order                    null (the chain as written), or the chain indices in
                                       the order this run walks them (placement_order: learned)
    created_at, updated_at             timestamps
    job_ids                            derived, never read back: the numeric ids of the
                                       attempts' jobs of every kind (``customJobs/ID``,
                                       ``hyperparameterTuningJobs/ID``, ...: ids are unique
                                       across kinds), for the job-state
                                       function's lookup of a hinted job (``array_contains``)
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shared.model.data_waits import DataWait, data_wait_from_document, data_wait_to_document
from shared.model.errors import PermanentError, TransientError
from shared.model.job_kinds import JobKind
from shared.model.jobstates import JobStateName
from shared.model.jobstates import is_terminal as is_terminal_job_state

INTENT_STATE = "INTENT"
"""An attempt's state between its claim and the moment its job is known."""
CREATE_FAILED_STATE = "CREATE_FAILED"
"""An intent whose create call failed: nobody is creating its job now, but the job may exist."""


MAX_ATTEMPT_SKIPS = 16
"""An attempt records at most this many skips (the latest): a chain is a handful of placements,
and a retried walk replaces its attempt's record, so the bound only guards the document's size."""
MAX_ATTEMPT_EVENTS = 24
"""An attempt's history keeps at most this many events: its first (CREATED) and the latest. A job
moves through a handful of states (QUEUED, PENDING, RUNNING, an end), so the bound only guards
the document's size (Firestore's 1 MiB) against a job that flaps."""
SKIP_REASON_CHARS = 600
"""A skip's reason is cut to this many characters: a service message may quote a whole spec. Our
own reasons fit (a quota refusal with its metric and what to do is about 300 characters, a CMEK
mismatch naming both keys and the resource about 500). A longer one is cut in its middle
(``cut_middle``): a reason says what refused first and what to change last, and both must
survive."""


class LedgerConflict(TransientError):
    """Someone else changed the run since it was read; deliver the event again to re-decide."""


class InvalidTransition(PermanentError):
    """A change that does not fit the run as recorded (e.g. a second job for one attempt)."""

    headline = "the run cannot change as asked"


class RunNotFound(PermanentError):
    """The run named by a retry message or an update has no ledger document."""

    headline = "the run is not in the ledger"


class LedgerRejected(PermanentError):
    """Firestore refused a ledger call for a reason retrying cannot fix (permission, size)."""

    headline = "the run ledger (Firestore) refused the call"


class UnreadableRun(PermanentError):
    """A stored run holds a value this version cannot read (e.g. an attempt's unknown
    ``job_kind``): guessing would act on the wrong job, so the run is refused, loudly."""

    headline = "the run's ledger document cannot be read"


class RunStatus(enum.StrEnum):
    """Where a run stands. Only the job-state function moves a run past SUBMITTED."""

    WAITING_DATA = "WAITING_DATA"  # its dataset is not complete yet (data_wait says what)
    ACCEPTED = "ACCEPTED"  # recorded; no attempt claimed yet
    SUBMITTING = "SUBMITTING"  # an attempt's intent is recorded; its job may or may not exist
    SUBMITTED = "SUBMITTED"  # the job exists and waits for machines (queued, pending)
    RUNNING = "RUNNING"  # the job is running
    WAITING_RETRY = "WAITING_RETRY"  # the last attempt ended or found no placement; next is due
    SUCCEEDED = "SUCCEEDED"  # a job succeeded
    FAILED = "FAILED"  # attempts exhausted or a failure the policy does not retry
    REJECTED = "REJECTED"  # the request or job spec is invalid; nothing was submitted
    CANCELLED = "CANCELLED"  # someone cancelled the job; never retried

    def is_terminal(self) -> bool:
        return self in _TERMINAL_STATUSES


_TERMINAL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.REJECTED, RunStatus.CANCELLED}
)
LIVE_STATUSES = frozenset({RunStatus.SUBMITTING, RunStatus.SUBMITTED, RunStatus.RUNNING})
"""A run in one of these has a job that runs, waits for machines, or may be being created:
its end is still to be decided, and no other attempt may start beside it."""


class CancelReason(enum.StrEnum):
    """Why we asked Vertex AI to cancel an attempt's job: what its end then means."""

    OPERATOR = "operator"  # `vertex-dispatch cancel`: stopped on purpose, never retried
    QUEUE_TIMEOUT = "queue_timeout"  # the queue watchdog: the placement did not take it (capacity)


class SkipClass(enum.StrEnum):
    """Why a placement was passed over by an attempt's walk along the chain."""

    QUOTA = "quota"  # its create was refused for quota (RESOURCE_EXHAUSTED)
    CAPACITY = "capacity"  # its create was refused for the placement (GPU not offered, resource)
    UNAVAILABLE = "unavailable"  # a live rule said it cannot take the job now (a pool full)
    # it can never take the job as written (a resource or reservation of another machine,
    # network or key; a GPU its region does not offer): when no placement takes the job and
    # every skip is of this class, the run is rejected at once instead of waiting
    UNSUITABLE = "unsuitable"
    COOLDOWN = "cooldown"  # it failed for capacity moments ago (policy.cooldown): tried last


@dataclass(frozen=True)
class PlacementSkip:
    """A placement an attempt's walk passed over, and why (stored on the attempt)."""

    placement: Mapping[str, Any]  # its placement record (policy.records.placement_record)
    region: str
    skip_class: str  # a SkipClass value (stored as "class")
    reason: str  # what refused it, as the service or the rule said; cut to SKIP_REASON_CHARS
    at: datetime

    def __post_init__(self) -> None:
        if len(self.reason) > SKIP_REASON_CHARS:
            object.__setattr__(self, "reason", cut_middle(self.reason, SKIP_REASON_CHARS))


def cut_middle(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: its start and its end, joined by "…"."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


CREATED_EVENT = "CREATED"
"""The first event of an attempt's history: its job was created (at the job's create_time)."""


@dataclass(frozen=True)
class AttemptEvent:
    """One timed step of an attempt's job, for its history (``Attempt.events``)."""

    state: str  # CREATED_EVENT, or the JobState name the job moved to
    at: datetime  # the service's time when it gives one (create, start, end), else when we saw it


@dataclass(frozen=True)
class JobTimes:
    """The times an observation of an attempt's job carries, for its history: the job's own
    (Vertex AI's clock: ``create_time``, ``start_time``, ``end_time``; None when the job does not
    say) and when the observation was made (our clock: the handler's ``services.now``)."""

    seen_at: datetime | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass(frozen=True)
class Attempt:
    """One try at running the job: claimed (intent) first, then the job it created."""

    number: int  # 1 for the first attempt
    placement: Mapping[str, Any]  # plain description, e.g. {"flex_start": {"max_wait": "7200s"}}
    region: str
    parent: str  # projects/P/locations/R, where the job is (or will be) created
    intent_at: datetime
    job_name: str | None = None
    state: str = INTENT_STATE  # INTENT_STATE, then the job's JobState name
    error: Mapping[str, Any] | None = None  # e.g. {"code": 8, "message": ..., "class": ...}
    decision: Mapping[str, Any] | None = None  # set once, when the job's terminal state is decided
    # Set when an operator or the watchdog asked for the job's cancel: however the job then
    # ends short of success (CANCELLED, or FAILED when its code exits non-zero on SIGTERM), the
    # end is our cancel, never a failure to retry.
    cancel_requested_at: datetime | None = None
    # Who asked and why (a CancelReason value); None with a cancel_requested_at is a record
    # made before reasons were kept, read as an operator's cancel.
    cancel_reason: str | None = None
    # Other jobs found with this attempt's labels, cancelled and alerted (policy/duplicates.py):
    # their states and ends are never the attempt's.
    duplicate_jobs: tuple[str, ...] = ()
    # Vertex AI reads the job-state function made for log lines about this attempt's job,
    # counted before each read and bounded (``policy.hint_screen``): however many lines a job's
    # end brings, its hints cost at most that many reads.
    hint_reads: int = 0
    # The job's create_time as Vertex AI stamped it (its clock, not ours): the reconciler's
    # listing window is cut on it (``reconcile_plan.plan_listings``). None: not known (recorded
    # by a hint's read, or before the field existed).
    job_created_at: datetime | None = None
    # The placements the walk that claimed this attempt passed over (create refused, a live
    # rule, a cooldown), oldest first, at most MAX_ATTEMPT_SKIPS: submission writes them with
    # the intent it moves along the chain, so the ledger says why the job is where it is.
    skips: tuple[PlacementSkip, ...] = ()
    # The kind of job the attempt creates (the rendered template's), written with the intent:
    # a takeover that finds no job name yet still reattaches by label in the right collection.
    job_kind: JobKind = JobKind.CUSTOM_JOB
    # The attempt's history (docs/architecture.md, "Run history"): CREATED, then each state the
    # job was seen in, oldest first, at most MAX_ATTEMPT_EVENTS (the first and the latest).
    events: tuple[AttemptEvent, ...] = ()
    # When the job started running (the service's start_time, else when RUNNING was first
    # seen) and when it ended (its end_time, else when its end was seen): the GPU-hours it
    # spent are (ended_at or now) - started_at, times gpus.
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # What the attempt's placement runs on, written with the intent: the machine as the
    # cooldown keys it (``policy.cooldown.placement_key``: ``n1-standard-8+NVIDIA_TESLA_T4x1``,
    # a persistent resource's id, a reservation's name) and the GPUs the job holds at once
    # (every pool's replicas x accelerator_count; a sweep's x parallel_trials). None / 0: not
    # recorded (an attempt written before history existed).
    machine: str | None = None
    gpus: int = 0
    # The job's base output directory as rendered (None: the template sets none). Every attempt
    # of a run shares it, so a trainer that checkpoints resumes (AIP_CHECKPOINT_DIR).
    output_dir: str | None = None

    def __post_init__(self) -> None:
        if len(self.skips) > MAX_ATTEMPT_SKIPS:
            object.__setattr__(self, "skips", self.skips[-MAX_ATTEMPT_SKIPS:])
        if len(self.events) > MAX_ATTEMPT_EVENTS:
            kept = (self.events[0], *self.events[-(MAX_ATTEMPT_EVENTS - 1) :])
            object.__setattr__(self, "events", kept)


@dataclass(frozen=True)
class RetryPlan:
    """The next attempt a waiting run is due for: the reconciler publishes it from ``at`` on."""

    at: datetime
    attempt: int  # the attempt number to start
    placement_index: int  # where in the template's placement chain to start
    reason: str  # why, for people reading the ledger: "capacity", "infrastructure", ...


@dataclass(frozen=True)
class Run:
    """Everything one trigger caused, as stored."""

    run_id: str
    run_key: str
    route: str
    template: str
    trigger: Mapping[str, Any]
    params: Mapping[str, str] = field(default_factory=dict)
    status: RunStatus = RunStatus.ACCEPTED
    attempts: tuple[Attempt, ...] = ()
    alerts: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()  # non-alert messages published once, e.g. "completion"
    next_retry: RetryPlan | None = None
    # The attempt number an operator allowed (`vertex-dispatch retry`, which writes the ledger
    # itself): only the ledger, never a message, can lift the attempt budget or reopen a run.
    operator_grant: int | None = None
    # When the reconciler last published a retry to recover this run (an intent without a job
    # past its lease, or a run never claimed): it publishes again only RECOVERY_REPUBLISH_AFTER
    # later, so a slow dispatch is not handed a new copy every tick.
    recovery_published_at: datetime | None = None
    # When the run began waiting for a placement that can take it (dispatch found none): kept
    # across the retries of that wait, cleared when a job is recorded or an operator reopens
    # the run. The no-placement watchdog (``policy.watchdogs``) measures the wait from it.
    no_placement_since: datetime | None = None
    # Why each placement could not take the run when its last walk found none (the same record
    # as an attempt's skips; a walk that claimed an attempt records them there instead):
    # emptied when a job is recorded or an operator reopens the run.
    no_placement_skips: tuple[PlacementSkip, ...] = ()
    # The data the run waits for (WAITING_DATA), or waited for: a quiet dataset's version, or a
    # manifest's missing files. None: its trigger was complete on arrival.
    data_wait: DataWait | None = None
    # The run must have a job RUNNING by then (the template's or the request's ``start_by``
    # from the trigger), or it ends with a ``deadline_missed`` alert. None: no deadline.
    start_deadline: datetime | None = None
    # The chain order this run walks, as chain indices (``placement_order: learned``): chosen
    # by its first walk from the placements' history and kept for every later attempt, so a
    # fallback goes to the next placement of the same order. None: the chain as written.
    placement_order: tuple[int, ...] | None = None
    created_at: datetime | None = None  # set by open_run
    updated_at: datetime | None = None  # set by every write

    @property
    def last_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def attempt(self, number: int) -> Attempt | None:
        return next((a for a in self.attempts if a.number == number), None)


@dataclass(frozen=True)
class RunSnapshot:
    """A run as read (or written) at ``update_time``, the token of the next compare-and-set.

    ``update_time`` keeps Firestore's nanoseconds: pass it back unchanged, never rebuilt.
    """

    run: Run
    update_time: datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


# The pure changes behind the writes: each returns the run unchanged when already applied.


def with_claimed_attempt(run: Run, attempt: Attempt) -> Run:
    """``run`` with ``attempt``'s intent recorded and the status SUBMITTING."""
    _refuse_if_terminal(run, f"claim attempt {attempt.number}")
    last = run.last_attempt
    next_number = last.number + 1 if last else 1
    if attempt.number == next_number:
        attempts = (*run.attempts, attempt)
    elif last is not None and attempt.number == last.number and last.job_name is None:
        attempts = (*run.attempts[:-1], attempt)  # take over an intent that never got its job
    else:
        raise InvalidTransition(
            f"run {run.run_id}: cannot claim attempt {attempt.number}: the next attempt is "
            f"{next_number}"
            + (f" and attempt {last.number} already has job {last.job_name}" if last else "")
            + "; read the run again and reattach to its last job instead"
        )
    return replace(run, attempts=attempts, status=RunStatus.SUBMITTING, next_retry=None)


def with_job(
    run: Run,
    attempt_number: int,
    job_name: str,
    state: str,
    error: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
    times: JobTimes | None = None,
) -> Run:
    """``run`` with attempt ``attempt_number``'s job and state (and the job's create time, by
    Vertex AI's clock, when known); SUBMITTING becomes SUBMITTED. The attempt's history takes
    the state with ``times`` (``with_history``).

    A live state of an attempt whose job is known to have ended (its state is terminal, or its
    end is decided) is older news and leaves ``run`` unchanged: see ``is_older_news``.
    """
    attempt = run.attempt(attempt_number)
    if attempt is None:
        raise InvalidTransition(
            f"run {run.run_id} has no attempt {attempt_number} (it has "
            f"{len(run.attempts)}): claim the attempt before recording its job"
        )
    if attempt.job_name not in (None, job_name):
        raise InvalidTransition(
            f"run {run.run_id} attempt {attempt_number} already has job {attempt.job_name}; "
            f"{job_name} would be a second job for one attempt: cancel one of them"
        )
    if is_older_news(attempt, state):
        return run
    updated = replace(
        attempt,
        job_name=job_name,
        state=state,
        error=error if error else attempt.error,
        job_created_at=(
            attempt.job_created_at or created_at or (times.created_at if times else None)
        ),
    )
    updated = with_history(updated, state, times)
    is_last = attempt_number == run.attempts[-1].number
    status = RunStatus.SUBMITTED if is_last and run.status is RunStatus.SUBMITTING else run.status
    # A job exists: whatever wait for a placement the run had is over.
    return replace(
        _with_attempt(run, updated), status=status, no_placement_since=None, no_placement_skips=()
    )


def with_attempt_state(
    run: Run,
    attempt_number: int,
    state: str,
    error: Mapping[str, Any] | None,
    times: JobTimes | None = None,
) -> Run:
    """``run`` with attempt ``attempt_number``'s state (and error) replaced; its job unchanged.

    Like ``with_job``, a live state never replaces an ended or decided attempt's state, and a
    job state goes into the attempt's history (``with_history``; our own INTENT and
    CREATE_FAILED do not: no job is behind them).
    """
    attempt = run.attempt(attempt_number)
    if attempt is None:
        raise InvalidTransition(
            f"run {run.run_id} has no attempt {attempt_number}: claim the attempt first"
        )
    if is_older_news(attempt, state):
        return run
    updated = replace(attempt, state=state, error=error if error else attempt.error)
    return _with_attempt(run, with_history(updated, state, times))


# How far along its life a job state is, for the history: a state of a lower rank than the
# latest recorded was seen before it (a slow hint, an old listing) and is not appended. States
# not named here (PAUSED, UPDATING) rank with RUNNING: they come and go while it runs.
_RUNNING_RANK, _END_RANK = 3, 5
_HISTORY_RANK: dict[str, int] = {
    JobStateName.QUEUED: 1,
    JobStateName.PENDING: 2,
    JobStateName.RUNNING: _RUNNING_RANK,
    JobStateName.CANCELLING: 4,
}
# Our own states (no job behind them) and the service's "no state": nothing to put in a history.
_NOT_IN_HISTORY = frozenset({INTENT_STATE, CREATE_FAILED_STATE, JobStateName.UNSPECIFIED})


def _history_rank(state: str) -> int:
    if is_terminal_job_state(state):
        return _END_RANK
    return _HISTORY_RANK.get(state, _RUNNING_RANK)


def with_history(attempt: Attempt, state: str, times: JobTimes | None) -> Attempt:
    """``attempt`` (its job known) whose history takes ``state`` as observed with ``times``.

    - CREATED first, at the job's create time (``job_created_at``, else when first seen);
    - then ``state``, unless it is the latest event's state or older news (a state of a lower
      rank than the latest: ``_history_rank``), at the job's own time for it (``start_time`` for
      RUNNING, ``end_time`` for an end), else when seen; never before the latest event (two
      clocks: Vertex AI's and ours);
    - ``started_at``: the job's start_time whenever an observation carries one, else when
      RUNNING was first seen; ``ended_at``: the job's end_time, else when its end was first seen.

    Unchanged when ``times`` carry no time at all (a caller that does not know): a history is
    made of timed events only. Applying the same observation twice changes nothing more.
    """
    if state in _NOT_IN_HISTORY or attempt.job_name is None or times is None:
        return attempt
    seen = times.seen_at
    events = attempt.events
    created = attempt.job_created_at or times.created_at
    if not events or events[0].state != CREATED_EVENT:
        first = created or seen
        if first is None:
            return attempt
        events = (AttemptEvent(CREATED_EVENT, first), *events)
    elif created is not None and events[0].at != created:
        # First recorded from our clock, before an observation carried the job's own time.
        events = (AttemptEvent(CREATED_EVENT, created), *events[1:])
    terminal = is_terminal_job_state(state)
    own = times.started_at if state == JobStateName.RUNNING else None
    own = times.ended_at if terminal else own
    latest = events[-1]
    rank = _history_rank(state)
    newer = latest.state == CREATED_EVENT or (
        latest.state != state and rank >= _history_rank(latest.state)
    )
    at = own or seen
    if at is not None:
        at = max(at, latest.at)
        if newer:
            events = (*events, AttemptEvent(state, at))
    started = times.started_at or attempt.started_at
    if started is None and state == JobStateName.RUNNING:
        started = at
    ended = attempt.ended_at
    if terminal:
        ended = times.ended_at or ended or at
    return replace(attempt, events=events, started_at=started, ended_at=ended)


def with_refused_create(
    run: Run,
    attempt_number: int,
    error: Mapping[str, Any],
    skips: tuple[PlacementSkip, ...],
) -> Run:
    """``run`` whose attempt ``attempt_number``'s create the service refused: nothing was made,
    nobody is creating (CREATE_FAILED), and the walk's ``skips`` are recorded with the error."""
    attempt = run.attempt(attempt_number)
    if attempt is None or attempt.job_name is not None:
        raise InvalidTransition(
            f"run {run.run_id} has no intent without a job for attempt {attempt_number}: only a "
            "claimed attempt's create can be refused"
        )
    return _with_attempt(
        run, replace(attempt, state=CREATE_FAILED_STATE, error=dict(error), skips=skips)
    )


def with_cancel_requested(
    run: Run,
    attempt_number: int,
    at: datetime,
    reason: CancelReason = CancelReason.OPERATOR,
) -> Run:
    """``run`` noting that the job of attempt ``attempt_number`` was asked to cancel at ``at``,
    for ``reason``. The first request's time counts; an operator's cancel after the watchdog's
    takes over the reason (a human meant to stop the run, not to move it along the chain)."""
    attempt = run.attempt(attempt_number)
    if attempt is None or attempt.job_name is None:
        raise InvalidTransition(
            f"run {run.run_id} has no job for attempt {attempt_number} to cancel"
        )
    if attempt.cancel_requested_at is not None:
        if reason is not CancelReason.OPERATOR or cancel_reason_of(attempt) is reason:
            return run
        return _with_attempt(run, replace(attempt, cancel_reason=reason.value))
    return _with_attempt(run, replace(attempt, cancel_requested_at=at, cancel_reason=reason.value))


def cancel_reason_of(attempt: Attempt) -> CancelReason | None:
    """Why we asked for the attempt's job's cancel; None when nobody did. A record without a
    reason (made before reasons were kept) or with one this version does not know is read as
    an operator's cancel: never retried, the safe reading."""
    if attempt.cancel_requested_at is None:
        return None
    try:
        return CancelReason(attempt.cancel_reason or CancelReason.OPERATOR.value)
    except ValueError:
        return CancelReason.OPERATOR


def with_duplicate_jobs(run: Run, attempt_number: int, job_names: tuple[str, ...]) -> Run:
    """``run`` noting ``job_names`` as duplicates of attempt ``attempt_number``'s job (cancelled
    and alerted); unchanged when it notes them all already."""
    attempt = run.attempt(attempt_number)
    if attempt is None:
        raise InvalidTransition(
            f"run {run.run_id} has no attempt {attempt_number} to note duplicate jobs on"
        )
    if attempt.job_name in job_names:
        raise InvalidTransition(
            f"run {run.run_id} attempt {attempt_number}: its own job {attempt.job_name} cannot "
            "be one of its duplicates"
        )
    added = tuple(name for name in job_names if name not in attempt.duplicate_jobs)
    if not added:
        return run
    return _with_attempt(
        run, replace(attempt, duplicate_jobs=tuple(sorted((*attempt.duplicate_jobs, *added))))
    )


def with_hint_read(run: Run, attempt_number: int, limit: int) -> Run:
    """``run`` with one more hint read counted on attempt ``attempt_number``; unchanged when
    ``limit`` reads are counted already (then no read may be made)."""
    attempt = run.attempt(attempt_number)
    if attempt is None:
        raise InvalidTransition(f"run {run.run_id} has no attempt {attempt_number}")
    if attempt.hint_reads >= limit:
        return run
    return _with_attempt(run, replace(attempt, hint_reads=attempt.hint_reads + 1))


def _with_attempt(run: Run, updated: Attempt) -> Run:
    """``run`` with its attempt of ``updated``'s number replaced by ``updated``."""
    return replace(
        run, attempts=tuple(updated if a.number == updated.number else a for a in run.attempts)
    )


REOPENABLE_STATUSES = frozenset({RunStatus.FAILED, RunStatus.REJECTED, RunStatus.CANCELLED})
"""Final statuses an operator may reopen (``vertex-dispatch retry``); a success stays final."""


def with_reopened(run: Run, next_retry: RetryPlan) -> Run:
    """``run`` waiting for the attempt an operator asked for (``next_retry``, which the
    reconciler republishes if the delivery that reopened the run is lost); unchanged if open."""
    if not run.status.is_terminal():
        return run
    if run.status not in REOPENABLE_STATUSES:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}: only a failed, rejected or cancelled run "
            "can be retried; start a new run with a new trigger instead"
        )
    return replace(
        run,
        status=RunStatus.WAITING_RETRY,
        next_retry=next_retry,
        no_placement_since=None,
        no_placement_skips=(),
    )


def with_operator_grant(run: Run, attempt: int) -> Run:
    """``run`` on which an operator allowed ``attempt`` (beyond the budget, or after its end)."""
    if run.status.is_terminal() and run.status not in REOPENABLE_STATUSES:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}: only a failed, rejected or cancelled run "
            "can be retried; start a new run with a new trigger instead"
        )
    return replace(run, operator_grant=attempt)


def with_status(run: Run, status: RunStatus, next_retry: RetryPlan | None = None) -> Run:
    """``run`` moved to ``status``; a terminal run accepts only its own status again."""
    if run.status.is_terminal() and status is not run.status:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}, which is final: it cannot become "
            f"{status.value}; start a new run with a new trigger instead"
        )
    return replace(run, status=status, next_retry=next_retry)


def with_data_wait(run: Run, wait: DataWait) -> Run:
    """``run``'s data wait updated (a manifest's missing files, a dataset's latest version),
    its status unchanged."""
    return replace(run, data_wait=wait)


def with_data_ready(run: Run, wait: DataWait, published_at: datetime) -> Run:
    """A run WAITING_DATA whose data is complete (``wait``, completed): ACCEPTED, so its first
    attempt may start; unchanged when already past the wait. The caller publishes the first
    attempt's retry next: ``published_at`` is noted as a recovery publish, so the reconciler's
    never-claimed recovery publishes again only if that one is not claimed in time."""
    if run.status is not RunStatus.WAITING_DATA:
        return run
    return replace(
        run, status=RunStatus.ACCEPTED, data_wait=wait, recovery_published_at=published_at
    )


def with_placement_wait(
    run: Run,
    next_retry: RetryPlan,
    since: datetime,
    skips: tuple[PlacementSkip, ...] = (),
) -> Run:
    """``run`` waiting for ``next_retry`` because no placement can take it; its wait began at
    ``since`` unless it was waiting already (``no_placement_since`` is kept across retries);
    ``skips`` say why each placement could not (the last walk's, at most MAX_ATTEMPT_SKIPS)."""
    waiting = with_status(run, RunStatus.WAITING_RETRY, next_retry)
    return replace(
        waiting,
        no_placement_since=run.no_placement_since or since,
        no_placement_skips=skips[-MAX_ATTEMPT_SKIPS:],
    )


def with_alert(run: Run, reason: str) -> Run:
    """``run`` with ``reason`` among its alerts (claimed for sending, then sent)."""
    return run if reason in run.alerts else replace(run, alerts=(*run.alerts, reason))


def without_alert(run: Run, reason: str) -> Run:
    """``run`` with the claim on ``reason`` given back: the alert was not sent."""
    kept = tuple(sent for sent in run.alerts if sent != reason)
    return run if kept == run.alerts else replace(run, alerts=kept)


def with_observed_state(
    run: Run,
    attempt_number: int,
    job_name: str,
    state: str,
    error: Mapping[str, Any] | None = None,
    times: JobTimes | None = None,
) -> Run:
    """``run`` with a non-terminal job state seen (at ``times``: its history, ``with_history``);
    the run follows its last attempt's job.

    A job of the last attempt that runs makes the run RUNNING; one that waits for machines keeps
    it SUBMITTED. A run already decided (waiting for a retry, or final) keeps its status: an
    older, slower hint cannot move it back. Nor can it move the attempt back: once the attempt's
    job is known to have ended, a live state (a listing made before the end, applied after the
    end was decided) leaves ``run`` unchanged, so the ledger writes nothing.
    """
    recorded = with_job(run, attempt_number, job_name, state, error, times=times)
    attempt = run.attempt(attempt_number)
    if attempt_number != recorded.attempts[-1].number or (
        attempt is not None and is_older_news(attempt, state)
    ):
        return recorded  # the run follows only its last attempt's job, and only forward
    status = _STATUS_OF_LIVE_JOB_STATE.get(state)
    if status is None or recorded.status not in LIVE_STATUSES:
        return recorded
    return replace(recorded, status=status)


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt's job ended and what was decided: written together, exactly once."""

    attempt: int
    job_name: str
    state: str  # the terminal JobState name
    error: Mapping[str, Any] | None  # {"code", "message", "class"}, or None on success
    decision: Mapping[
        str, Any
    ]  # the decision as recorded (shared.handlers.jobstate.decision_record)
    status: RunStatus  # the run's new status
    next_retry: RetryPlan | None = None
    times: JobTimes | None = None  # the job's times as read, for the attempt's history


def with_decision(run: Run, outcome: AttemptOutcome) -> Run:
    """``run`` with ``outcome`` recorded; unchanged if that attempt already has its decision.

    One repair: a decided attempt whose recorded state is live (a stale state written over its
    end before ``with_job`` refused that) gets the outcome's terminal state back, its decision and
    the run's status untouched; otherwise every reconcile tick would see a change, forever.
    """
    attempt = run.attempt(outcome.attempt)
    if attempt is not None and attempt.decision is not None:
        if attempt.job_name == outcome.job_name and not is_terminal_job_state(attempt.state):
            return with_job(
                run,
                outcome.attempt,
                outcome.job_name,
                outcome.state,
                outcome.error,
                times=outcome.times,
            )
        return run
    recorded = with_job(
        run, outcome.attempt, outcome.job_name, outcome.state, outcome.error, times=outcome.times
    )
    attempts = tuple(
        replace(a, decision=dict(outcome.decision)) if a.number == outcome.attempt else a
        for a in recorded.attempts
    )
    return with_status(replace(recorded, attempts=attempts), outcome.status, outcome.next_retry)


def with_retry_published(run: Run, republish_at: datetime) -> Run:
    """``run`` whose due retry was published: publish it again only from ``republish_at`` on."""
    if run.status is not RunStatus.WAITING_RETRY or run.next_retry is None:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status}, not waiting for a retry: nothing was published"
        )
    return replace(run, next_retry=replace(run.next_retry, at=republish_at))


WAITING_STATUSES = frozenset({RunStatus.WAITING_DATA, RunStatus.ACCEPTED, RunStatus.WAITING_RETRY})
"""A run in one of these has no job and no claimed attempt: cancelling it is a ledger write."""


def with_waiting_cancelled(run: Run) -> Run:
    """``run``, which waits for its next attempt (or its first), cancelled: none will start."""
    if run.status not in WAITING_STATUSES:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}, not waiting for an attempt: cancel its job"
        )
    return replace(run, status=RunStatus.CANCELLED, next_retry=None)


def with_recovery_published(run: Run, at: datetime) -> Run:
    """``run`` whose recovery retry (stale intent, never claimed) was published ``at``."""
    return replace(run, recovery_published_at=at)


def with_notice(run: Run, notice: str) -> Run:
    """``run`` with ``notice`` among the messages published."""
    return run if notice in run.notices else replace(run, notices=(*run.notices, notice))


_STATUS_OF_LIVE_JOB_STATE: dict[str, RunStatus] = {
    JobStateName.QUEUED: RunStatus.SUBMITTED,
    JobStateName.PENDING: RunStatus.SUBMITTED,
    JobStateName.RUNNING: RunStatus.RUNNING,
}


def is_older_news(attempt: Attempt, state: str) -> bool:
    """Whether ``state``, a live one, was seen before what ``attempt`` already records.

    A job's states only move forward and a terminal one is final, so once the attempt records a
    terminal state, or its end is decided, a live state can only be an observation made earlier
    and applied later (a reconcile listing, a slow hint, a create's answer): it must not replace
    the end, or the reconciler would see a "change" on every tick and decide again.
    """
    if is_terminal_job_state(state):
        return False
    return attempt.decision is not None or is_terminal_job_state(attempt.state)


def _refuse_if_terminal(run: Run, action: str) -> None:
    if run.status.is_terminal():
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}, which is final: cannot {action}"
        )


# Document <-> Run: plain maps Firestore stores natively (timestamps stay datetimes).


ACTIONS_OWED_FIELD = "actions_owed"
JOB_IDS_FIELD = "job_ids"
COMPLETION_NOTICE = "completion"
"""The notice a run gets once its completion message was published
(``shared.adapters.completions``)."""


def unsent_alerts(run: Run) -> list[Mapping[str, Any]]:
    """The alerts ``run``'s decisions ask for and it has not sent: one per reason, oldest first."""
    unsent: dict[str, Mapping[str, Any]] = {}
    for attempt in run.attempts:
        alert = (attempt.decision or {}).get("alert")
        if alert and alert["reason"] not in run.alerts:
            unsent.setdefault(alert["reason"], alert)
    return list(unsent.values())


def unpublished_completion(run: Run) -> Attempt | None:
    """The attempt whose decision asked for a completion message, while none is published."""
    if COMPLETION_NOTICE in run.notices:
        return None
    return next(
        (a for a in reversed(run.attempts) if a.decision and a.decision.get("complete")), None
    )


def owed_actions(run: Run) -> tuple[str, ...]:
    """What ``run``'s decisions still owe: each alert reason not sent, and the completion when a
    decision asked for one that is not published. The ledger stores whether this is empty
    (``actions_owed``) so that the reconciler finds ended runs whose publish failed."""
    owed = [alert["reason"] for alert in unsent_alerts(run)]
    if unpublished_completion(run) is not None:
        owed.append(COMPLETION_NOTICE)
    return tuple(owed)


def run_to_document(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "run_key": run.run_key,
        "route": run.route,
        "template": run.template,
        "trigger": dict(run.trigger),
        "params": dict(run.params),
        "status": run.status.value,
        "attempts": [_attempt_to_document(attempt) for attempt in run.attempts],
        "alerts": list(run.alerts),
        "notices": list(run.notices),
        "next_retry": dataclasses.asdict(run.next_retry) if run.next_retry else None,
        "operator_grant": run.operator_grant,
        "recovery_published_at": run.recovery_published_at,
        "no_placement_since": run.no_placement_since,
        "no_placement_skips": [_skip_to_document(skip) for skip in run.no_placement_skips],
        "data_wait": data_wait_to_document(run.data_wait) if run.data_wait else None,
        "start_deadline": run.start_deadline,
        "placement_order": (list(run.placement_order) if run.placement_order is not None else None),
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        ACTIONS_OWED_FIELD: bool(owed_actions(run)),  # derived, for the reconciler's query
        JOB_IDS_FIELD: job_ids(run),  # derived, for the job-state function's lookup
    }


def job_ids(run: Run) -> list[str]:
    """The numeric ids of ``run``'s jobs (the last part of each attempt's job name), in order."""
    ids = [a.job_name.rsplit("/", 1)[-1] for a in run.attempts if a.job_name is not None]
    return list(dict.fromkeys(ids))


def run_from_document(document: Mapping[str, Any]) -> Run:
    return Run(
        run_id=document["run_id"],
        run_key=document["run_key"],
        route=document["route"],
        template=document["template"],
        trigger=document.get("trigger") or {},
        params=document.get("params") or {},
        status=RunStatus(document["status"]),
        attempts=tuple(_attempt_from_document(a) for a in document.get("attempts") or ()),
        alerts=tuple(document.get("alerts") or ()),
        notices=tuple(document.get("notices") or ()),
        next_retry=RetryPlan(**document["next_retry"]) if document.get("next_retry") else None,
        operator_grant=document.get("operator_grant"),
        recovery_published_at=document.get("recovery_published_at"),
        no_placement_since=document.get("no_placement_since"),
        no_placement_skips=tuple(
            _skip_from_document(skip) for skip in document.get("no_placement_skips") or ()
        ),
        data_wait=data_wait_from_document(document.get("data_wait")),
        start_deadline=document.get("start_deadline"),
        placement_order=(
            tuple(document["placement_order"])
            if document.get("placement_order") is not None
            else None
        ),
        created_at=document.get("created_at"),
        updated_at=document.get("updated_at"),
    )


def _attempt_to_document(attempt: Attempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "placement": dict(attempt.placement),
        "region": attempt.region,
        "parent": attempt.parent,
        "intent_at": attempt.intent_at,
        "job_name": attempt.job_name,
        "state": attempt.state,
        "error": dict(attempt.error) if attempt.error else None,
        "decision": dict(attempt.decision) if attempt.decision else None,
        "cancel_requested_at": attempt.cancel_requested_at,
        "cancel_reason": attempt.cancel_reason,
        "duplicate_jobs": list(attempt.duplicate_jobs),
        "hint_reads": attempt.hint_reads,
        "job_created_at": attempt.job_created_at,
        "skips": [_skip_to_document(skip) for skip in attempt.skips],
        "job_kind": attempt.job_kind.value,
        "events": [{"state": event.state, "at": event.at} for event in attempt.events],
        "started_at": attempt.started_at,
        "ended_at": attempt.ended_at,
        "machine": attempt.machine,
        "gpus": attempt.gpus,
        "output_dir": attempt.output_dir,
    }


def _skip_to_document(skip: PlacementSkip) -> dict[str, Any]:
    return {
        "placement": dict(skip.placement),
        "region": skip.region,
        "class": skip.skip_class,
        "reason": skip.reason,
        "at": skip.at,
    }


def _skip_from_document(document: Mapping[str, Any]) -> PlacementSkip:
    return PlacementSkip(
        placement=document.get("placement") or {},
        region=document.get("region") or "",
        skip_class=document.get("class") or "",
        reason=document.get("reason") or "",
        at=document["at"],
    )


def _attempt_from_document(document: Mapping[str, Any]) -> Attempt:
    return Attempt(
        number=document["number"],
        placement=document.get("placement") or {},
        region=document["region"],
        parent=document["parent"],
        intent_at=document["intent_at"],
        job_name=document.get("job_name"),
        state=document.get("state", INTENT_STATE),
        error=document.get("error"),
        decision=document.get("decision"),
        cancel_requested_at=document.get("cancel_requested_at"),
        cancel_reason=document.get("cancel_reason"),
        duplicate_jobs=tuple(document.get("duplicate_jobs") or ()),
        hint_reads=document.get("hint_reads") or 0,
        job_created_at=document.get("job_created_at"),
        skips=tuple(_skip_from_document(skip) for skip in document.get("skips") or ()),
        job_kind=_job_kind_from_document(document),
        events=tuple(
            AttemptEvent(state=event["state"], at=event["at"])
            for event in document.get("events") or ()
        ),
        started_at=document.get("started_at"),
        ended_at=document.get("ended_at"),
        machine=document.get("machine"),
        gpus=document.get("gpus") or 0,
        output_dir=document.get("output_dir"),
    )


def _job_kind_from_document(document: Mapping[str, Any]) -> JobKind:
    stored = document.get("job_kind")
    if stored is None:
        return JobKind.CUSTOM_JOB  # written before kinds existed: every job was a CustomJob
    try:
        return JobKind(stored)
    except ValueError:
        known = ", ".join(kind.value for kind in JobKind)
        raise UnreadableRun(
            f"attempt {document.get('number')} has job_kind {stored!r}, which this version does "
            f"not know (it knows {known}): deploy the version that wrote it, or correct the "
            "attempt's job_kind in the ledger"
        ) from None
