"""The run ledger: one Firestore document per run, its attempts, and compare-and-set updates.

A run is everything one trigger caused; its document id is the run id (``r-`` + 24 hex digits,
docs/dispatch-contract.md). The ledger is what makes dispatch exactly-once, so it rests only on
the two Firestore primitives measured to hold under contention (DESIGN.md §5):

- ``document.create()`` fails when the document exists: ``open_run`` is create-if-absent;
- an update with ``last_update_time`` as precondition is a compare-and-set: every other write
  names the snapshot it was computed from and fails if someone wrote in between.

Transactions are avoided: under contention they abort rather than queue. A compare-and-set that
loses raises ``LedgerConflict`` (transient) from ``claim_attempt``, whose whole point is that only
one delivery wins; the other writes re-read and re-apply their change a few times, which is safe
because each change is a pure function of the run that is idempotent when already applied.

The document (field names as stored)::

    run_id, run_key, route, template   strings
    trigger                            the decoded trigger, a plain map
    params                             map of parameter name to value
    status                             a RunStatus value
    attempts                           list of {number, placement (map), region, parent,
                                       intent_at, job_name (null until the job exists),
                                       state, error (map or null), decision (map or null)}
    alerts                             list of alert reasons already sent
    notices                            list of other messages already published ("completion")
    next_retry                         null, or {at, attempt, placement_index, reason}: the
                                       retry the reconciler publishes once ``at`` has passed
    created_at, updated_at             timestamps
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as api_exceptions

from shared import clients
from shared.errors import BackendUnavailable, PermanentError, TransientError

if TYPE_CHECKING:
    from google.cloud import firestore

DEFAULT_COLLECTION = "vertex-dispatch-runs"
INTENT_STATE = "INTENT"
"""An attempt's state between its claim and the moment its job is known."""
CREATE_FAILED_STATE = "CREATE_FAILED"
"""An intent whose create call failed: nobody is creating its job now, but the job may exist."""

CALL_TIMEOUT_SECONDS = 20.0
MAX_REAPPLY = 5
REQUIRED_ROLE = "roles/datastore.user"

_CALLER_INTERPRETED_ERRORS = (
    api_exceptions.AlreadyExists,
    api_exceptions.FailedPrecondition,
    api_exceptions.NotFound,
)
_TRANSIENT_ERRORS = (
    api_exceptions.Aborted,
    api_exceptions.Cancelled,
    api_exceptions.DeadlineExceeded,
    api_exceptions.InternalServerError,
    api_exceptions.ResourceExhausted,
    api_exceptions.ServiceUnavailable,
    api_exceptions.Unknown,
    api_exceptions.RetryError,
)


class LedgerConflict(TransientError):
    """Someone else changed the run since it was read; deliver the event again to re-decide."""


class InvalidTransition(PermanentError):
    """A change that does not fit the run as recorded (e.g. a second job for one attempt)."""


class RunNotFound(PermanentError):
    """The run named by a retry message or an update has no ledger document."""


class LedgerRejected(PermanentError):
    """Firestore refused a ledger call for a reason retrying cannot fix (permission, size)."""


class RunStatus(enum.StrEnum):
    """Where a run stands. Only the job-state function moves a run past SUBMITTED."""

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


class Ledger:
    """The runs collection of one Firestore database."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str = DEFAULT_COLLECTION,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._client = client
        self._collection = collection
        self._clock = clock

    def open_run(self, run: Run) -> tuple[RunSnapshot, bool]:
        """Create ``run`` if no run has its id; else read the existing one. True when created."""
        now = self._clock()
        created = replace(run, created_at=now, updated_at=now)
        document = self._document(run.run_id)
        try:
            with _translated_errors("create", run.run_id):
                result = document.create(run_to_document(created), timeout=CALL_TIMEOUT_SECONDS)
            return RunSnapshot(created, result.update_time), True
        except api_exceptions.AlreadyExists:
            pass
        existing = self.get_run(run.run_id)
        if existing is None:  # created and deleted between our two calls
            raise LedgerConflict(f"run {run.run_id} vanished while being opened; retry")
        return existing, False

    def get_run(self, run_id: str) -> RunSnapshot | None:
        """The run ``run_id`` as stored now, or None."""
        with _translated_errors("get", run_id):
            snapshot = self._document(run_id).get(timeout=CALL_TIMEOUT_SECONDS)
        if not snapshot.exists:
            return None
        return RunSnapshot(run_from_document(snapshot.to_dict()), snapshot.update_time)

    def claim_attempt(self, current: RunSnapshot, attempt: Attempt) -> RunSnapshot:
        """Record ``attempt``'s intent, before CreateCustomJob, if ``current`` is still current.

        ``attempt.number`` is either the next number, or the last attempt's number when that
        attempt has no job yet (taking over an intent whose creator died). Raises
        ``LedgerConflict`` when the run changed since ``current`` was read: another delivery won.
        """
        claimed = with_claimed_attempt(current.run, attempt)
        return self._write_if_unchanged(current, claimed)

    def record_job(
        self,
        run_id: str,
        attempt_number: int,
        job_name: str,
        state: str,
        error: Mapping[str, Any] | None = None,
        status: RunStatus | None = None,
        known: RunSnapshot | None = None,
    ) -> RunSnapshot:
        """Record the job of an attempt and its state (and the run's new status, if given).

        ``known`` is the run as this caller last wrote it (e.g. the claim's snapshot): the
        compare-and-set is tried on it first, saving a read on the hot path of every submission.
        """

        def change(run: Run) -> Run:
            recorded = with_job(run, attempt_number, job_name, state, error)
            return with_status(recorded, status) if status else recorded

        return self._apply(run_id, change, known)[0]

    def mark_create_failed(
        self, run_id: str, attempt_number: int, error: Mapping[str, Any]
    ) -> RunSnapshot:
        """Note that attempt ``attempt_number``'s create call failed and nobody is retrying it.

        The job may still exist (an answer lost after the server created it): whoever takes the
        attempt over looks it up by label first, without waiting for the intent to age.
        """
        return self._apply(
            run_id, lambda run: with_attempt_state(run, attempt_number, CREATE_FAILED_STATE, error)
        )[0]

    def set_status(
        self, run_id: str, status: RunStatus, next_retry: RetryPlan | None = None
    ) -> RunSnapshot:
        """Move the run to ``status`` (a terminal status is final), with its next retry if any."""
        return self._apply(run_id, lambda run: with_status(run, status, next_retry))[0]

    def reopen(self, run_id: str) -> RunSnapshot:
        """Reopen a failed, rejected or cancelled run for an operator's retry."""
        return self._apply(run_id, with_reopened)[0]

    def record_alert(self, run_id: str, reason: str) -> bool:
        """Note that the alert ``reason`` was sent; True only the first time for that reason.

        Call it after ``send_alert`` succeeded (and skip sending when ``reason in run.alerts``):
        recording first would lose the alert if the publish then failed.
        """
        return self._apply(run_id, lambda run: with_alert(run, reason))[1]

    def record_observed_state(
        self,
        run_id: str,
        attempt_number: int,
        job_name: str,
        state: str,
        error: Mapping[str, Any] | None = None,
    ) -> RunSnapshot:
        """Record a job state that needs no decision (queued, pending, running, cancelling)."""
        return self._apply(
            run_id,
            lambda run: with_observed_state(run, attempt_number, job_name, state, error),
        )[0]

    def record_decision(self, current: RunSnapshot, outcome: AttemptOutcome) -> RunSnapshot:
        """Record an attempt's terminal state and what was decided, in one compare-and-set.

        The decision was computed from ``current``, so it is written only if the run is still
        ``current``: otherwise ``LedgerConflict`` (transient), and the redelivery reads the run
        again and finds the decision made, or makes it on fresh data. Never two decisions.
        """
        return self._write_if_unchanged(current, with_decision(current.run, outcome))

    def record_notice(self, run_id: str, notice: str) -> bool:
        """Note that the message ``notice`` (e.g. "completion") was published; True the first time.

        Like ``record_alert``: call it after the publish succeeded.
        """
        return self._apply(run_id, lambda run: with_notice(run, notice))[1]

    def list_runs(self, statuses: Collection[RunStatus], limit: int = 100) -> list[RunSnapshot]:
        """Up to ``limit`` runs whose status is one of ``statuses`` (at most 30), in no order."""
        from google.cloud.firestore_v1 import FieldFilter

        query = (
            self._client.collection(self._collection)
            .where(filter=FieldFilter("status", "in", [status.value for status in statuses]))
            .limit(limit)
        )
        with _translated_errors("query", f"status in {sorted(statuses)}"):
            return [
                RunSnapshot(run_from_document(snapshot.to_dict()), snapshot.update_time)
                for snapshot in query.stream(timeout=CALL_TIMEOUT_SECONDS)
            ]

    def _apply(
        self, run_id: str, change: Callable[[Run], Run], known: RunSnapshot | None = None
    ) -> tuple[RunSnapshot, bool]:
        """Apply ``change`` by compare-and-set, re-reading on conflict; True when it wrote.

        The first try uses ``known`` when given, instead of reading the run.
        """
        for _ in range(MAX_REAPPLY):
            current, known = known or self.get_run(run_id), None
            if current is None:
                raise RunNotFound(
                    f"run {run_id} is not in the ledger collection {self._collection!r}: it was "
                    "never opened, or was deleted; open it first"
                )
            changed = change(current.run)
            if changed == current.run:
                return current, False
            try:
                return self._write_if_unchanged(current, changed), True
            except LedgerConflict:
                continue
        raise LedgerConflict(
            f"run {run_id} kept changing under {MAX_REAPPLY} attempts to update it; retry later"
        )

    def _write_if_unchanged(self, current: RunSnapshot, changed: Run) -> RunSnapshot:
        stamped = replace(changed, updated_at=self._clock())
        fields = run_to_document(stamped)
        for immutable in _IMMUTABLE_FIELDS:
            del fields[immutable]
        option = self._client.write_option(last_update_time=current.update_time)
        run_id = current.run.run_id
        try:
            with _translated_errors("update", run_id):
                result = self._document(run_id).update(
                    fields, option=option, timeout=CALL_TIMEOUT_SECONDS
                )
        except (api_exceptions.FailedPrecondition, api_exceptions.NotFound) as error:
            raise LedgerConflict(
                f"run {run_id} changed since it was read at {current.update_time.isoformat()}; "
                "another delivery is handling it"
            ) from error
        return RunSnapshot(stamped, result.update_time)

    def _document(self, run_id: str) -> firestore.DocumentReference:
        return self._client.collection(self._collection).document(run_id)


def default_ledger(project: str | None = None, collection: str = DEFAULT_COLLECTION) -> Ledger:
    """The ledger on this process's shared Firestore client."""
    return Ledger(clients.firestore_client(project), collection)


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
) -> Run:
    """``run`` with attempt ``attempt_number``'s job and state; SUBMITTING becomes SUBMITTED."""
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
    updated = replace(
        attempt, job_name=job_name, state=state, error=error if error else attempt.error
    )
    attempts = tuple(updated if a.number == attempt_number else a for a in run.attempts)
    is_last = attempt_number == run.attempts[-1].number
    status = RunStatus.SUBMITTED if is_last and run.status is RunStatus.SUBMITTING else run.status
    return replace(run, attempts=attempts, status=status)


def with_attempt_state(
    run: Run, attempt_number: int, state: str, error: Mapping[str, Any] | None
) -> Run:
    """``run`` with attempt ``attempt_number``'s state (and error) replaced; its job unchanged."""
    attempt = run.attempt(attempt_number)
    if attempt is None:
        raise InvalidTransition(
            f"run {run.run_id} has no attempt {attempt_number}: claim the attempt first"
        )
    updated = replace(attempt, state=state, error=error if error else attempt.error)
    return replace(
        run, attempts=tuple(updated if a.number == attempt_number else a for a in run.attempts)
    )


REOPENABLE_STATUSES = frozenset({RunStatus.FAILED, RunStatus.REJECTED, RunStatus.CANCELLED})
"""Final statuses an operator may reopen (``vertex-dispatch retry``); a success stays final."""


def with_reopened(run: Run) -> Run:
    """``run`` waiting for the next attempt an operator asked for; unchanged if already open."""
    if not run.status.is_terminal():
        return run
    if run.status not in REOPENABLE_STATUSES:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}: only a failed, rejected or cancelled run "
            "can be retried; start a new run with a new trigger instead"
        )
    return replace(run, status=RunStatus.WAITING_RETRY, next_retry=None)


def with_status(run: Run, status: RunStatus, next_retry: RetryPlan | None = None) -> Run:
    """``run`` moved to ``status``; a terminal run accepts only its own status again."""
    if run.status.is_terminal() and status is not run.status:
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}, which is final: it cannot become "
            f"{status.value}; start a new run with a new trigger instead"
        )
    return replace(run, status=status, next_retry=next_retry)


def with_alert(run: Run, reason: str) -> Run:
    """``run`` with ``reason`` among its alerts sent."""
    return run if reason in run.alerts else replace(run, alerts=(*run.alerts, reason))


def with_observed_state(
    run: Run,
    attempt_number: int,
    job_name: str,
    state: str,
    error: Mapping[str, Any] | None = None,
) -> Run:
    """``run`` with a non-terminal job state seen; the run follows its last attempt's job.

    A job of the last attempt that runs makes the run RUNNING; one that waits for machines keeps
    it SUBMITTED. A run already decided (waiting for a retry, or final) keeps its status: an
    older, slower hint cannot move it back.
    """
    recorded = with_job(run, attempt_number, job_name, state, error)
    if attempt_number != recorded.attempts[-1].number:
        return recorded
    status = _STATUS_OF_LIVE_JOB_STATE.get(state)
    if status is None or recorded.status not in _LIVE_STATUSES:
        return recorded
    return replace(recorded, status=status)


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt's job ended and what was decided: written together, exactly once."""

    attempt: int
    job_name: str
    state: str  # the terminal JobState name
    error: Mapping[str, Any] | None  # {"code", "message", "class"}, or None on success
    decision: Mapping[str, Any]  # the decision as recorded (shared.jobstate.decision_record)
    status: RunStatus  # the run's new status
    next_retry: RetryPlan | None = None


def with_decision(run: Run, outcome: AttemptOutcome) -> Run:
    """``run`` with ``outcome`` recorded; unchanged if that attempt already has its decision."""
    attempt = run.attempt(outcome.attempt)
    if attempt is not None and attempt.decision is not None:
        return run
    recorded = with_job(run, outcome.attempt, outcome.job_name, outcome.state, outcome.error)
    attempts = tuple(
        replace(a, decision=dict(outcome.decision)) if a.number == outcome.attempt else a
        for a in recorded.attempts
    )
    return with_status(replace(recorded, attempts=attempts), outcome.status, outcome.next_retry)


def with_notice(run: Run, notice: str) -> Run:
    """``run`` with ``notice`` among the messages published."""
    return run if notice in run.notices else replace(run, notices=(*run.notices, notice))


_STATUS_OF_LIVE_JOB_STATE: dict[str, RunStatus] = {
    "JOB_STATE_QUEUED": RunStatus.SUBMITTED,
    "JOB_STATE_PENDING": RunStatus.SUBMITTED,
    "JOB_STATE_RUNNING": RunStatus.RUNNING,
}
_LIVE_STATUSES = frozenset({RunStatus.SUBMITTING, RunStatus.SUBMITTED, RunStatus.RUNNING})


def _refuse_if_terminal(run: Run, action: str) -> None:
    if run.status.is_terminal():
        raise InvalidTransition(
            f"run {run.run_id} is {run.status.value}, which is final: cannot {action}"
        )


# Document <-> Run: plain maps Firestore stores natively (timestamps stay datetimes).

_IMMUTABLE_FIELDS = ("run_id", "run_key", "route", "template", "trigger", "params", "created_at")


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
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }


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
    }


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
    )


@contextmanager
def _translated_errors(operation: str, run_id: str) -> Iterator[None]:
    """Firestore errors as the error tree, except those the caller interprets itself."""
    try:
        yield
    except (
        api_exceptions.AlreadyExists,
        api_exceptions.FailedPrecondition,
        api_exceptions.NotFound,
    ):
        raise  # answers the caller turns into meaning (exists already, changed, gone)
    except _TRANSIENT_ERRORS as error:
        raise BackendUnavailable(
            f"ledger {operation} of run {run_id} failed, retry: {error}"
        ) from error
    except (api_exceptions.PermissionDenied, api_exceptions.Unauthenticated) as error:
        raise LedgerRejected(
            f"ledger {operation} of run {run_id} was denied ({error}): grant the function's "
            f"service account {REQUIRED_ROLE} on the project"
        ) from error
    except api_exceptions.GoogleAPICallError as error:
        raise LedgerRejected(
            f"ledger {operation} of run {run_id} was refused: {error}; check the Firestore "
            "database (native mode, (default)) and the size of the trigger stored with the run"
        ) from error
