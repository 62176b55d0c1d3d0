"""The run ledger: the Firestore store of runs, one document each, and compare-and-set updates.

The run model it stores (``Run``, ``Attempt``, ``RunStatus``, the pure ``with_*`` transitions, the
document conversion and the ledger's errors) lives in the cloud-free ``shared.model.runs`` and is
re-exported here, so ``from shared.adapters.ledger import Run`` keeps working. This module owns the
store: the ``Ledger`` class, ``default_ledger`` and the translation of Firestore errors into the
error tree. The ledger is what makes dispatch exactly-once, so it rests only on the two Firestore
primitives measured to hold under contention (docs/architecture.md, "Costs"):

- ``document.create()`` fails when the document exists: ``open_run`` is create-if-absent;
- an update with ``last_update_time`` as precondition is a compare-and-set: every other write
  names the snapshot it was computed from and fails if someone wrote in between.

Transactions are avoided: under contention they abort rather than queue. A compare-and-set that
loses raises ``LedgerConflict`` (transient) from ``claim_attempt``, whose whole point is that only
one delivery wins; the other writes re-read and re-apply their change a few times, which is safe
because each change is a pure function of the run that is idempotent when already applied.
The document's fields are listed in ``shared.model.runs``.

Beside the runs, one small document holds the placements cooling down after a capacity failure
(``shared.model.cooldowns``; ``placement_cooldowns``, ``start_cooldown``), in a collection of its
own too, each placement's entry written by a merge so that writers never clobber each other.
One document holds the reconciler's state (its round-robin cursor and Vertex AI
backoff, ``shared.model.reconciler_state``), in a collection of its own so that no query on runs
sees it; ``next_runs`` is the round-robin's ordered query.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry
from google.protobuf.message import DecodeError

from shared.adapters import clients
from shared.model.budgets import (
    CONFIG_SCOPE,
    TEMPLATE_SCOPE_PREFIX,
    BudgetBook,
    book_from_document,
    book_to_document,
)
from shared.model.cooldowns import Cooldown, cooldown_to_document, cooldowns_from_document
from shared.model.data_waits import DataWait
from shared.model.errors import BackendUnavailable
from shared.model.reconciler_state import (
    ReconcilerState,
    RunCursor,
    state_from_document,
    state_to_document,
)
from shared.model.runs import (
    ACTIONS_OWED_FIELD,
    CREATE_FAILED_STATE,
    INTENT_STATE,
    JOB_IDS_FIELD,
    LIVE_STATUSES,
    REOPENABLE_STATUSES,
    RETRY_WAITING_STATUSES,
    WAITING_STATUSES,
    Attempt,
    AttemptOutcome,
    CancelReason,
    InvalidTransition,
    JobTimes,
    LedgerConflict,
    LedgerRejected,
    PlacementSkip,
    RetryPlan,
    Run,
    RunNotFound,
    RunSnapshot,
    RunStatus,
    UnreadableRun,
    run_from_document,
    run_to_document,
    utc_now,
    with_alert,
    with_attempt_state,
    with_budget_wait,
    with_cancel_requested,
    with_claimed_attempt,
    with_data_ready,
    with_data_wait,
    with_decision,
    with_duplicate_jobs,
    with_hint_read,
    with_job,
    with_notice,
    with_observed_state,
    with_operator_grant,
    with_placement_wait,
    with_recovery_published,
    with_refused_create,
    with_reopened,
    with_retry_published,
    with_status,
    with_waiting_cancelled,
    without_alert,
)
from shared.policy.timing import COOLDOWNS_READ_EVERY, PLACEMENT_HISTORY_RUNS

if TYPE_CHECKING:
    from google.cloud import firestore
    from google.cloud.firestore_v1 import FieldFilter

__all__ = [
    "BUDGETS_SUFFIX",
    "CALL_TIMEOUT_SECONDS",
    "COOLDOWNS_DOCUMENT",
    "CREATE_FAILED_STATE",
    "DEFAULT_COLLECTION",
    "INTENT_STATE",
    "LIVE_STATUSES",
    "MAX_REAPPLY",
    "NEWEST_FIRST_FIELD",
    "RECONCILER_STATE_DOCUMENT",
    "REOPENABLE_STATUSES",
    "REQUIRED_ROLE",
    "ROUND_ROBIN_INDEX",
    "WAITING_STATUSES",
    "Attempt",
    "AttemptOutcome",
    "CancelReason",
    "InvalidTransition",
    "JobTimes",
    "Ledger",
    "LedgerConflict",
    "LedgerRejected",
    "PlacementSkip",
    "RetryPlan",
    "Run",
    "RunNotFound",
    "RunPage",
    "RunSnapshot",
    "RunStatus",
    "UnreadableRun",
    "default_ledger",
    "run_from_document",
    "run_to_document",
    "utc_now",
    "with_alert",
    "with_attempt_state",
    "with_cancel_requested",
    "with_claimed_attempt",
    "with_decision",
    "with_duplicate_jobs",
    "with_job",
    "with_notice",
    "with_observed_state",
    "with_reopened",
    "with_status",
]

DEFAULT_COLLECTION = "vertex-dispatch-runs"
# The field ``list_runs(newest_first=True)`` orders on: set once, by ``open_run``.
NEWEST_FIRST_FIELD = "created_at"
# The reconciler's round-robin (``Ledger.next_runs``): ``status in [...]`` ordered by created_at,
# then by document id (implicit in every index), after a cursor. Firestore serves it only from a
# composite index on exactly these fields, which deploy/terraform declares
# (``google_firestore_index.runs_by_status_oldest_first``); the query is built from this constant
# and tests/deploy checks the HCL against it. The Firestore emulator needs no index.
ROUND_ROBIN_INDEX: tuple[tuple[str, str], ...] = (
    ("status", "ASCENDING"),
    ("created_at", "ASCENDING"),
)
# The reconciler's state document: in a collection of its own (runs collection + this suffix), so
# the runs' queries never see it.
RECONCILER_STATE_SUFFIX = "-reconciler"
RECONCILER_STATE_DOCUMENT = "state"
# The placements cooling down (shared.model.cooldowns): one document in a collection of its own.
COOLDOWNS_SUFFIX = "-placements"
COOLDOWNS_DOCUMENT = "cooldowns"
COOLDOWNS_FIELD = "placements"
# The GPU-hour budgets (shared.model.budgets): one document per scope, in a collection of its own.
BUDGETS_SUFFIX = "-budgets"


CALL_TIMEOUT_SECONDS = 20.0
MAX_REAPPLY = 5
REQUIRED_ROLE = "roles/datastore.user"

_CALLER_INTERPRETED_ERRORS = (
    api_exceptions.AlreadyExists,
    api_exceptions.FailedPrecondition,
    api_exceptions.NotFound,
)
# The client's own retries would outlast the function: ``timeout`` bounds one try only, and the
# default retry goes on for up to 300 s (reads, queries) or 60 s (commits). Measured against a
# stopped emulator: a get raised after 257 s, a create after 59 s. A delivery must fail fast enough
# to be redelivered, so every call retries what the defaults retry (same errors), but for at most
# CALL_TIMEOUT_SECONDS in all.
_READ_RETRY = api_retry.Retry(
    predicate=api_retry.if_exception_type(
        api_exceptions.DeadlineExceeded,
        api_exceptions.InternalServerError,
        api_exceptions.ServiceUnavailable,
    ),
    initial=0.25,
    maximum=4.0,
    multiplier=2.0,
    timeout=CALL_TIMEOUT_SECONDS,
)
_WRITE_RETRY = api_retry.Retry(
    predicate=api_retry.if_exception_type(
        api_exceptions.ResourceExhausted, api_exceptions.ServiceUnavailable
    ),
    initial=0.25,
    maximum=4.0,
    multiplier=2.0,
    timeout=CALL_TIMEOUT_SECONDS,
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


@dataclass(frozen=True)
class RunPage:
    """The runs one reconcile tick reads (``Ledger.next_runs``), in the order they were read."""

    snapshots: list[RunSnapshot]
    wrapped: bool  # the end of the order was reached and reading went on from the oldest run

    @property
    def last(self) -> RunCursor | None:
        """Where the next page starts after: the last run read (None when none was)."""
        for snapshot in reversed(self.snapshots):
            run = snapshot.run
            if run.created_at is not None:  # open_run sets it on every run
                return RunCursor(run.created_at, run.run_id)
        return None


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
        # The cooldowns last read, and when (this ledger's clock): see placement_cooldowns.
        self._cooldowns_read: tuple[datetime, dict[str, Cooldown]] | None = None

    def open_run(self, run: Run) -> tuple[RunSnapshot, bool]:
        """Create ``run`` if no run has its id; else read the existing one. True when created."""
        now = self._clock()
        created = replace(run, created_at=now, updated_at=now)
        document = self._document(run.run_id)
        try:
            with _translated_errors("create", run.run_id):
                result = document.create(
                    run_to_document(created), retry=_WRITE_RETRY, timeout=CALL_TIMEOUT_SECONDS
                )
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
            snapshot = self._document(run_id).get(retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS)
        if not snapshot.exists:
            return None
        return _snapshot_of(snapshot)

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunSnapshot | None]:
        """The runs ``run_ids`` as stored now (None for one that does not exist), in one round
        trip (Firestore's batch get) however many there are."""
        if not run_ids:
            return {}
        references = [self._document(run_id) for run_id in run_ids]
        found: dict[str, RunSnapshot | None] = dict.fromkeys(run_ids)
        with _translated_errors("get", ", ".join(run_ids)):
            for snapshot in self._client.get_all(
                references, retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS
            ):
                if snapshot.exists:
                    found[snapshot.id] = _snapshot_of(snapshot)
        return found

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
        created_at: datetime | None = None,
        times: JobTimes | None = None,
    ) -> RunSnapshot:
        """Record the job of an attempt and its state (and the run's new status, if given;
        the job's create time as Vertex AI stamped it, if known; the job's times as read, for
        the attempt's history).

        ``known`` is the run as this caller last wrote it (e.g. the claim's snapshot): the
        compare-and-set is tried on it first, saving a read on the hot path of every submission.
        """

        def change(run: Run) -> Run:
            recorded = with_job(run, attempt_number, job_name, state, error, created_at, times)
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

    def record_refused_create(
        self,
        current: RunSnapshot,
        attempt_number: int,
        error: Mapping[str, Any],
        skips: tuple[PlacementSkip, ...],
    ) -> RunSnapshot:
        """Note that the service refused attempt ``attempt_number``'s create (nothing was made:
        CREATE_FAILED) and the placements its walk passed over, while the attempt still holds
        the intent ``current`` records (the claim this delivery wrote). Tried on ``current``
        first; a write beside it (an alert) is re-read and re-applied, but an intent another
        delivery took over meanwhile is not ours to mark: ``LedgerConflict``."""
        ours = current.run.attempt(attempt_number)

        def change(run: Run) -> Run:
            attempt = run.attempt(attempt_number)
            if (
                ours is None
                or attempt is None
                or (attempt.intent_at, attempt.placement)
                != (
                    ours.intent_at,
                    ours.placement,
                )
            ):
                raise LedgerConflict(
                    f"run {run.run_id} attempt {attempt_number} was taken over while its create "
                    "was being refused; deliver again to see the attempt as it is"
                )
            return with_refused_create(run, attempt_number, error, skips)

        return self._apply(current.run.run_id, change, current)[0]

    def set_status(
        self, run_id: str, status: RunStatus, next_retry: RetryPlan | None = None
    ) -> RunSnapshot:
        """Move the run to ``status`` (a terminal status is final), with its next retry if any."""
        return self._apply(run_id, lambda run: with_status(run, status, next_retry))[0]

    def wait_for_retry(
        self,
        current: RunSnapshot,
        next_retry: RetryPlan,
        since: datetime | None = None,
        skips: tuple[PlacementSkip, ...] = (),
    ) -> RunSnapshot:
        """Make the run wait for ``next_retry`` because no placement can take it, only if it is
        still ``current``; the wait's start (``no_placement_since``: ``since``, or the ledger's
        clock) is noted unless the run was waiting already, and ``skips``, why each placement
        could not take it (``no_placement_skips``).

        A delivery that found no placement must not overwrite what another delivery did
        meanwhile (created the job): otherwise ``LedgerConflict``, and the redelivery reads again.
        """
        changed = with_placement_wait(current.run, next_retry, since or self._clock(), skips)
        return self._write_if_unchanged(current, changed)

    def wait_for_budget(self, current: RunSnapshot, next_retry: RetryPlan) -> RunSnapshot:
        """Make the run wait for a GPU-hour budget (WAITING_BUDGET, ``next_retry`` published by
        the reconciler when due), only if it is still ``current``: a delivery that claimed the
        attempt meanwhile wins (``LedgerConflict``)."""
        return self._write_if_unchanged(current, with_budget_wait(current.run, next_retry))

    def fail_waiting(self, current: RunSnapshot) -> RunSnapshot:
        """End a run that waited too long for a placement (FAILED), if only its alerts changed
        since ``current`` (the caller claimed the give-up alert in between): a delivery that
        claimed an attempt or created a job meanwhile wins (``LedgerConflict``, transient: the
        redelivery reads the run again)."""
        return self.end_unmoved(current, RunStatus.FAILED)

    def end_unmoved(self, current: RunSnapshot, status: RunStatus) -> RunSnapshot:
        """Move the run to the terminal ``status`` if only its alerts changed since ``current``
        (the run this caller decided on: as it read it, or as its own claim wrote it). A
        delivery that claimed or took over an attempt, or created a job, meanwhile wins
        (``LedgerConflict``, transient: the redelivery decides on the run as it is)."""
        expected = current.run

        def change(run: Run) -> Run:
            if run.status is status:
                return run
            _check_unmoved(expected, run, f"being ended {status.value}")
            return with_status(run, status)

        return self._apply(expected.run_id, change, current)[0]

    def record_cancel_requested(
        self,
        run_id: str,
        attempt_number: int,
        reason: CancelReason = CancelReason.OPERATOR,
    ) -> RunSnapshot:
        """Note that the attempt's job was asked to cancel, and why (call it before the cancel
        call, so that however quickly the job ends, its end is read as the cancel it was)."""
        at = self._clock()
        return self._apply(
            run_id, lambda run: with_cancel_requested(run, attempt_number, at, reason)
        )[0]

    def record_duplicate_jobs(
        self, run_id: str, attempt_number: int, job_names: tuple[str, ...]
    ) -> RunSnapshot:
        """Note ``job_names`` as duplicates of the attempt's job, cancelled and alerted (call it
        after both: it is what tells later readers that nothing is left to do about them)."""
        return self._apply(run_id, lambda run: with_duplicate_jobs(run, attempt_number, job_names))[
            0
        ]

    def reopen(self, run_id: str, next_retry: RetryPlan) -> RunSnapshot:
        """Reopen a failed, rejected or cancelled run for an operator's retry ``next_retry``."""
        return self._apply(run_id, lambda run: with_reopened(run, next_retry))[0]

    def grant_operator_attempt(self, run_id: str, attempt: int) -> RunSnapshot:
        """Allow the operator's retry ``attempt`` of the run (``vertex-dispatch retry``)."""
        return self._apply(run_id, lambda run: with_operator_grant(run, attempt))[0]

    def record_alert(self, run_id: str, reason: str, unmoved: Run | None = None) -> bool:
        """Claim the alert ``reason`` for the run; True only for the one caller that claimed it.

        ``handlers.rejections.alert_once`` claims, sends, and gives the claim back
        (``release_alert``) when the send fails. ``unmoved``: the run as the caller decided on
        it; the claim is made only if the run did not move since (its alerts aside), else
        ``LedgerConflict``: an alert that the run ends must not go out for a run another
        delivery took on meanwhile.
        """

        def change(run: Run) -> Run:
            if unmoved is not None:
                _check_unmoved(unmoved, run, f"alerting {reason}")
            return with_alert(run, reason)

        return self._apply(run_id, change)[1]

    def release_alert(self, run_id: str, reason: str) -> None:
        """Give back the claim on ``reason``: its alert was not sent, the next caller sends it."""
        self._apply(run_id, lambda run: without_alert(run, reason))

    def record_observed_state(
        self,
        run_id: str,
        attempt_number: int,
        job_name: str,
        state: str,
        error: Mapping[str, Any] | None = None,
        times: JobTimes | None = None,
    ) -> RunSnapshot:
        """Record a job state that needs no decision (queued, pending, running, cancelling), and
        its times as read (``times``: the attempt's history)."""
        return self._apply(
            run_id,
            lambda run: with_observed_state(run, attempt_number, job_name, state, error, times),
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

    def record_retry_published(
        self, known: RunSnapshot, plan: RetryPlan, republish_at: datetime
    ) -> RunSnapshot:
        """Note that the due retry ``plan`` was published: the next publish waits until
        ``republish_at``. Tried on ``known`` first and re-read on a conflict (an alert recorded
        in the same pass, say); a run no longer waiting for ``plan`` (dispatch claimed it, an
        operator reopened the run, another pass noted this publish) is left as it is."""

        def change(run: Run) -> Run:
            if run.status not in RETRY_WAITING_STATUSES or run.next_retry != plan:
                return run
            return with_retry_published(run, republish_at)

        return self._apply(known.run.run_id, change, known)[0]

    def cancel_waiting(self, current: RunSnapshot) -> RunSnapshot:
        """Cancel a run that waits for an attempt, only if it is still ``current``: a dispatch
        that claims the attempt meanwhile wins (``LedgerConflict``), and one that claims after
        finds the run cancelled."""
        return self._write_if_unchanged(current, with_waiting_cancelled(current.run))

    def record_data_wait(self, current: RunSnapshot, wait: DataWait) -> RunSnapshot:
        """Note what a run still waits for (``with_data_wait``), only if it is still
        ``current`` (else ``LedgerConflict``)."""
        return self._write_if_unchanged(current, with_data_wait(current.run, wait))

    def fail_data_wait(self, current: RunSnapshot) -> RunSnapshot:
        """End a run WAITING_DATA that can never start: FAILED, only while it still waits
        (re-read on a conflict with a write that left it waiting, such as an alert's claim);
        ``LedgerConflict`` when it moved on (its data was found complete meanwhile)."""

        def change(run: Run) -> Run:
            if run.status is RunStatus.FAILED:
                return run
            if run.status is not RunStatus.WAITING_DATA:
                raise LedgerConflict(
                    f"run {run.run_id} is {run.status.value}, no longer waiting for its data: "
                    "it is not ended"
                )
            return with_status(run, RunStatus.FAILED)

        return self._apply(current.run.run_id, change, current)[0]

    def data_ready(self, current: RunSnapshot, wait: DataWait, at: datetime) -> RunSnapshot:
        """Move a run WAITING_DATA whose data is complete to ACCEPTED (``with_data_ready``),
        only if it is still ``current`` (else ``LedgerConflict``: another tick did it)."""
        return self._write_if_unchanged(current, with_data_ready(current.run, wait, at))

    def open_dataset_version(self, first: RunSnapshot, run: Run, version: int) -> RunSnapshot:
        """Open ``run``, version ``version`` (>= 2) of a quiet dataset, and note it as the
        dataset's ``latest_version`` on version 1's run ``first``: one atomic batch, which
        creates ``run`` only if absent and touches ``first`` only if still ``first`` (its
        ``data_wait.latest_version`` and ``updated_at``, nothing else). ``LedgerConflict``
        when either precondition fails: another delivery opened it, or version 1 changed since
        it was read; re-read version 1 to see which.
        """
        now = self._clock()
        created = replace(run, created_at=now, updated_at=now)
        batch = self._client.batch()
        batch.create(self._document(run.run_id), run_to_document(created))
        batch.update(
            self._document(first.run.run_id),
            {"data_wait.latest_version": version, "updated_at": now},
            option=self._client.write_option(last_update_time=first.update_time),
        )
        try:
            with _translated_errors("create", run.run_id):
                results = batch.commit(retry=_WRITE_RETRY, timeout=CALL_TIMEOUT_SECONDS)
        except (
            api_exceptions.AlreadyExists,
            api_exceptions.FailedPrecondition,
            api_exceptions.NotFound,
        ) as error:
            raise LedgerConflict(
                f"version {version} of run {first.run.run_id}'s dataset was opened, or that "
                "run changed, since it was read; read it again"
            ) from error
        return RunSnapshot(created, results[0].update_time)

    def record_recovery_published(self, current: RunSnapshot, at: datetime) -> RunSnapshot:
        """Note that the reconciler published a retry to recover ``current`` at ``at``; only if
        the run is still ``current`` (else ``LedgerConflict``: dispatch moved it meanwhile)."""
        return self._write_if_unchanged(current, with_recovery_published(current.run, at))

    def list_runs(
        self, statuses: Collection[RunStatus], limit: int = 100, *, newest_first: bool = False
    ) -> list[RunSnapshot]:
        """Up to ``limit`` runs whose status is one of ``statuses`` (at most 30), in no order.

        With ``newest_first``, the newest ``limit`` of them by ``created_at``, newest first: in
        production that query needs the composite index (status, created_at descending) that
        deploy/terraform declares (``google_firestore_index.runs_by_status_newest_first``).
        """
        from google.cloud.firestore_v1 import FieldFilter

        values = [status.value for status in statuses]
        newest = NEWEST_FIRST_FIELD if newest_first else None
        return self._query(FieldFilter("status", "in", values), limit, newest)

    def recent_runs(self, template: str, limit: int = PLACEMENT_HISTORY_RUNS) -> list[RunSnapshot]:
        """The newest ``limit`` runs of ``template`` by ``created_at``, newest first: the history
        that learned placement order and budgets read (a caller cuts it to its window). In
        production the query needs the composite index (template, created_at descending) that
        deploy/terraform declares (``google_firestore_index.runs_by_template_newest_first``)."""
        from google.cloud.firestore_v1 import FieldFilter

        return self._query(FieldFilter("template", "==", template), limit, NEWEST_FIRST_FIELD)

    def list_runs_owing_actions(self, limit: int = 100) -> list[RunSnapshot]:
        """Up to ``limit`` runs whose decisions still owe an alert or a completion (any status),
        in no order: mostly ended runs whose publish failed."""
        from google.cloud.firestore_v1 import FieldFilter

        return self._query(FieldFilter(ACTIONS_OWED_FIELD, "==", True), limit)

    def claim_hint_read(self, known: RunSnapshot, attempt_number: int, limit: int) -> bool:
        """Count one Vertex AI read for a log hint on the attempt, unless ``limit`` are counted
        already; True when counted (the read may be made). Tried on ``known`` first."""
        change = lambda run: with_hint_read(run, attempt_number, limit)  # noqa: E731
        return self._apply(known.run.run_id, change, known)[1]

    def find_runs_by_job_id(self, job_id: str) -> list[RunSnapshot]:
        """The runs whose attempts record a job of numeric id ``job_id`` (``customJobs/ID``):
        none for another system's job, one for ours. At most two are read: two would be a
        collision of ids that the caller resolves by reading the job."""
        from google.cloud.firestore_v1 import FieldFilter

        return self._query(FieldFilter(JOB_IDS_FIELD, "array_contains", job_id), 2)

    def next_runs(
        self, statuses: Collection[RunStatus], after: RunCursor | None, limit: int
    ) -> RunPage:
        """The next ``limit`` runs whose status is one of ``statuses``, in the order (created_at,
        run id), after ``after``; past the last one, on from the oldest (``wrapped``), up to and
        including ``after`` itself, so no run is read twice in one page.

        Two queries at most, each a range of the index ``ROUND_ROBIN_INDEX``: the cost is the
        runs read, however many runs the order holds.
        """
        from google.cloud.firestore_v1 import FieldFilter

        where = FieldFilter(ROUND_ROBIN_INDEX[0][0], "in", [status.value for status in statuses])
        first = self._ordered(where, limit, start_after=after)
        if after is None or len(first) >= limit:
            return RunPage(first, wrapped=False)
        rest = self._ordered(where, limit - len(first), end_at=after)
        return RunPage(first + rest, wrapped=True)

    def get_reconciler_state(self) -> ReconcilerState:
        """The reconciler's state as the last tick left it (the initial state before any)."""
        with _translated_errors("get", "reconciler state"):
            snapshot = self._state_document().get(retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS)
        fields = snapshot.to_dict() if snapshot.exists else None
        return state_from_document(fields) if fields else ReconcilerState()

    def put_reconciler_state(self, state: ReconcilerState) -> None:
        """Write the reconciler's state, whatever it was: the last tick to write wins (see
        ``handlers.reconcile``: two ticks at once read the same state and write nearly the same)."""
        with _translated_errors("set", "reconciler state"):
            self._state_document().set(
                state_to_document(state), retry=_WRITE_RETRY, timeout=CALL_TIMEOUT_SECONDS
            )

    def placement_cooldowns(self) -> dict[str, Cooldown]:
        """Every placement cooldown recorded, by key (expired ones included: the caller compares
        them with its clock). One read of one small document, reused by this ledger for
        ``COOLDOWNS_READ_EVERY`` (``policy.timing``) so that a busy instance does not add a
        read to every submission; its own ``start_cooldown`` writes are seen at once."""
        now = self._clock()
        last = self._cooldowns_read
        if last is not None and timedelta(0) <= now - last[0] < COOLDOWNS_READ_EVERY:
            return dict(last[1])
        with _translated_errors("get", "placement cooldowns"):
            snapshot = self._cooldowns_document().get(
                retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS
            )
        fields = snapshot.to_dict() if snapshot.exists else None
        placements = (fields or {}).get(COOLDOWNS_FIELD)
        found = cooldowns_from_document(placements) if isinstance(placements, Mapping) else {}
        self._cooldowns_read = (now, found)
        return dict(found)

    def start_cooldown(self, cooldown: Cooldown) -> None:
        """Record ``cooldown`` under its key, by a merge that leaves every other key as it is
        (two instances cooling two placements at once both land; the same placement twice: the
        last write wins, and both say about the same)."""
        with _translated_errors("set", "placement cooldowns"):
            self._cooldowns_document().set(
                {COOLDOWNS_FIELD: {cooldown.key: cooldown_to_document(cooldown)}},
                merge=True,
                retry=_WRITE_RETRY,
                timeout=CALL_TIMEOUT_SECONDS,
            )
        last = self._cooldowns_read
        if last is not None:
            self._cooldowns_read = (last[0], {**last[1], cooldown.key: cooldown})

    def budget_books(self, scopes: Sequence[str]) -> list[tuple[BudgetBook, datetime | None]]:
        """Each scope's budget book, read now (never cached: a reservation is decided on it),
        with its document's update time, the token of ``write_budget_books`` (None: no document
        yet)."""
        books: list[tuple[BudgetBook, datetime | None]] = []
        for scope in scopes:
            with _translated_errors("get", f"budget {scope}"):
                snapshot = self._budget_document(scope).get(
                    retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS
                )
            fields = snapshot.to_dict() if snapshot.exists else None
            books.append(
                (book_from_document(scope, fields), snapshot.update_time if fields else None)
            )
        return books

    def write_budget_books(self, writes: Sequence[tuple[BudgetBook, datetime | None]]) -> None:
        """Write every book in one atomic batch, each only if its document is as read at the
        given update time (None: only if it does not exist yet); otherwise ``LedgerConflict``
        and nothing is written: another submission reserved meanwhile, read again."""
        batch = self._client.batch()
        for book, known in writes:
            document = self._budget_document(book.scope)
            fields = book_to_document(book)
            if known is None:
                batch.create(document, fields)
            else:
                from google.cloud.firestore_v1 import DELETE_FIELD

                # A book written before its hours were kept lists every ended attempt
                # (``settled``); read into hours, it goes with the first write.
                fields["settled"] = DELETE_FIELD
                option = self._client.write_option(last_update_time=known)
                batch.update(document, fields, option=option)
        scopes = ", ".join(book.scope for book, _ in writes)
        try:
            with _translated_errors("update", f"budgets {scopes}"):
                batch.commit(retry=_WRITE_RETRY, timeout=CALL_TIMEOUT_SECONDS)
        except (
            api_exceptions.AlreadyExists,
            api_exceptions.FailedPrecondition,
            api_exceptions.NotFound,
        ) as error:
            raise LedgerConflict(
                f"budget {scopes} changed since it was read; read it again"
            ) from error

    def _budget_document(self, scope: str) -> firestore.DocumentReference:
        name = (
            scope if scope == CONFIG_SCOPE else scope.replace(TEMPLATE_SCOPE_PREFIX, "template-", 1)
        )
        collection = self._collection + BUDGETS_SUFFIX
        return self._client.collection(collection).document(name)

    def _cooldowns_document(self) -> firestore.DocumentReference:
        collection = self._collection + COOLDOWNS_SUFFIX
        return self._client.collection(collection).document(COOLDOWNS_DOCUMENT)

    def _ordered(
        self,
        where: FieldFilter,
        limit: int,
        *,
        start_after: RunCursor | None = None,
        end_at: RunCursor | None = None,
    ) -> list[RunSnapshot]:
        query = self._client.collection(self._collection).where(filter=where)
        for field_path, direction in ROUND_ROBIN_INDEX[1:]:
            query = query.order_by(field_path, direction=direction)
        query = query.order_by("__name__", direction=ROUND_ROBIN_INDEX[-1][1])
        order_field = ROUND_ROBIN_INDEX[1][0]
        if start_after is not None:
            query = query.start_after(
                {order_field: start_after.created_at, "__name__": start_after.run_id}
            )
        if end_at is not None:
            query = query.end_at({order_field: end_at.created_at, "__name__": end_at.run_id})
        query = query.limit(limit)
        with _translated_errors("query", f"{where.field_path} {where.op_string} {where.value}"):
            return [
                _snapshot_of(snapshot)
                for snapshot in query.stream(retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS)
            ]

    def _state_document(self) -> firestore.DocumentReference:
        collection = self._collection + RECONCILER_STATE_SUFFIX
        return self._client.collection(collection).document(RECONCILER_STATE_DOCUMENT)

    def _query(
        self, where: FieldFilter, limit: int, descending_by: str | None = None
    ) -> list[RunSnapshot]:
        query = self._client.collection(self._collection).where(filter=where)
        if descending_by is not None:
            query = query.order_by(descending_by, direction="DESCENDING")
        query = query.limit(limit)
        with _translated_errors("query", f"{where.field_path} {where.op_string} {where.value}"):
            return [
                _snapshot_of(snapshot)
                for snapshot in query.stream(retry=_READ_RETRY, timeout=CALL_TIMEOUT_SECONDS)
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
                    fields, option=option, retry=_WRITE_RETRY, timeout=CALL_TIMEOUT_SECONDS
                )
        except (api_exceptions.FailedPrecondition, api_exceptions.NotFound) as error:
            raise LedgerConflict(
                f"run {run_id} changed since it was read at {current.update_time.isoformat()}; "
                "another delivery is handling it"
            ) from error
        return RunSnapshot(stamped, result.update_time)

    def _document(self, run_id: str) -> firestore.DocumentReference:
        return self._client.collection(self._collection).document(run_id)


def _check_unmoved(expected: Run, run: Run, doing: str) -> None:
    """Raise ``LedgerConflict`` if ``run`` moved on from ``expected`` (its status, or its
    attempts: a claim, a takeover, a job), which the caller decided on."""
    if run.status is not expected.status or run.attempts != expected.attempts:
        raise LedgerConflict(
            f"run {run.run_id} moved on while {doing} ({run.status.value}); deliver again to "
            "decide on the run as it is"
        )


def _snapshot_of(document: firestore.DocumentSnapshot) -> RunSnapshot:
    """The run a document that exists holds, with the time it was written."""
    fields = document.to_dict()
    if fields is None:  # only for a document that does not exist, which callers rule out
        raise RunNotFound(f"ledger document {document.id} vanished while it was read")
    return RunSnapshot(run_from_document(fields), document.update_time)


def default_ledger(project: str | None = None, collection: str = DEFAULT_COLLECTION) -> Ledger:
    """The ledger on this process's shared Firestore client."""
    return Ledger(clients.firestore_client(project), collection)


_IMMUTABLE_FIELDS = ("run_id", "run_key", "route", "template", "trigger", "params", "created_at")


_RECORD_WRITES = frozenset({"create", "update"})


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
    except (ValueError, DecodeError, RecursionError) as error:
        # The client encodes a document before sending it and refuses, with these, values no
        # request can carry: an integer beyond int64, an empty map key (ValueError), maps nested
        # past protobuf's parser depth (DecodeError) or past Python's (RecursionError). Retrying
        # the same record cannot help. A read encodes no record: there such an error (a closed
        # channel is a ValueError too) says nothing about the data, so it is not a refusal.
        if operation not in _RECORD_WRITES:
            raise
        raise LedgerRejected(
            f"ledger {operation} of run {run_id} was refused by the Firestore client "
            f"({type(error).__name__}: {error}): the record holds a value Firestore cannot store"
        ) from error
