"""The reconciler: each Cloud Scheduler tick, compare the ledger with Vertex AI and act on the gaps.

Vertex AI publishes no event when a job of any kind changes state (docs/architecture.md, "Events are
hints, state is read"), so this tick is what guarantees that nothing is missed. It is a Kueue-style
reconcile: read, compute what is owed, apply, and let the next tick repeat whatever did not happen.
One tick:

1. reads the next ``reconcile_max_runs`` active runs of a round-robin over them (the ledger's
   ``next_runs``: in the order created_at then run id, after the cursor the last tick left in
   the reconciler's state document, wrapping round to the oldest), so the runs read longest ago
   come first and every active run is read within ceil(active runs / reconcile_max_runs) ticks
   (``policy.reconcile_pace``);
2. per parent (project and region) and kind of job it watches (``reconcile_plan.Listing``) lists
   our jobs with ONE label-filtered List call per page (``ListCustomJobs``,
   ``ListHyperparameterTuningJobs`` or ``ListTrainingPipelines``, through ``vertex.list_jobs``,
   which returns each job's CustomJob view; ``labels.vd-run:*`` and ``create_time`` bounds around
   the intents of the runs read), never one Get per job, and stops paging as soon as every job it
   watches was seen: the calls grow with pages, not with jobs, and a kind no run of the page has
   is never listed;
3. plans, with the pure ``reconcile_plan.plan_tick``, what the ledger is owed:

   - a state change for every job whose state the ledger has not recorded, or whose terminal
     state it recorded but has not decided on: the tick records it itself
     (``jobstate.record_job_state`` on the job as listed, no second read of Vertex AI, eight at
     a time), then ensures the run's actions;
   - a retry message on the requests topic for every run whose intent outlived
     ``timing.INTENT_LEASE`` without a job (dispatch reattaches by label or takes over), or
     that was accepted but never claimed; published again only ``RECOVERY_REPUBLISH_AFTER``
     (10 min) later, noted on the run, so a slow dispatch is not handed a copy every tick;
   - duplicates: a listed job labelled with an attempt that records another job is cancelled,
     alerted (``duplicate_job``, once per run) and noted on the attempt
     (``handlers.duplicates.settle``; the rule is ``policy.duplicates``), once: a noted
     duplicate is not planned again;
   - the queue watchdog: a job QUEUED or PENDING longer than its limit
     (``watchdogs.queue_limit``: the template's ``max_queue``, else a FLEX_START max wait plus
     ``watchdog_grace``, else 24 h; cut to the run's deadline for a job without a max wait of
     its own) is alerted once, noted as our ``queue_timeout`` cancel and cancelled; its end is
     then capacity (the next placement of the chain, as the retry policy says; at the deadline
     no alert here: the decision's ``deadline_missed`` is the one). An intent still without a
     job after ``STUCK_INTENT_ALERT_AFTER`` is alerted;
   - a run waiting for a retry or a placement whose deadline (``start_by``) is too close to
     start by is alerted ``deadline_missed`` once and ended FAILED (``policy.deadlines``);

4. applies the plan, each action isolated: a failing one is counted and retried next tick; a
   List or Cancel call refused with RESOURCE_EXHAUSTED (``vertex.VertexThrottled``)
   ends the tick's Vertex AI calls, and the next ticks make none for a pause that doubles per
   throttled tick in a row (1, 2, 4... minutes, at most 15), while their ledger work goes on;
5. calls ``actions.ensure_actions`` on every run read, and on the ended runs whose decisions
   still owe an alert or a completion (the ledger's ``actions_owed`` flag): it publishes the
   retries whose backoff has passed and redoes any alert or completion a failed publish left
   undone (no I/O when nothing is owed). A sweep's or a pipeline's completion reads the job's
   result from Vertex AI (a Get): that read obeys the tick's pace like a List or a Cancel (not
   made while the tick makes no Vertex AI calls: the completion stays owed for a later tick; a
   throttled read throttles the tick) and counts in ``vertex_calls``;
6. writes the reconciler's state once: the cursor at the last run read, and the backoff.

Running two ticks at once is harmless: a state is recorded by compare-and-set (the loser of a
race gets ``LedgerConflict``, counted, and the next tick finds the state recorded), retries are
claimed once by dispatch, cancels are idempotent, and each watchdog alert is claimed in the ledger
before it is sent (``rejections.alert_once``), so one tick sends it. Both read the same state, so
the same page of runs, and each writes the cursor at the last run it read; the last write wins.
The two cursors differ only if runs started or ended between the two reads, and either way no
run is skipped: the runs between them are read again by the next tick. A backoff one of them set
may be overwritten by the other; the next tick then makes one call, is throttled again, and the
backoff is back: one call, not a storm.

Why the tick applies states rather than publishing a hint per change to ``on_job_event`` (the
first sketch of the design): a hint is re-published every tick until the job-state function has
recorded it, so whenever hints are handled more slowly than ticks come, each tick adds a copy of
every pending hint and the backlog grows without bound. In the 2,000-trigger soak that left 1,785
runs unrecorded after 15 minutes. Applying the listed state costs one ledger read and one write
per change (a hint cost a publish, a push, a Get and the same read and write), and a tick's work
is bounded by the changes it saw. ``on_job_event`` still takes low-latency hints from a log sink.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared.adapters import retry_messages, vertex
from shared.adapters.ledger import (
    CancelReason,
    LedgerConflict,
    Run,
    RunPage,
    RunSnapshot,
    RunStatus,
)
from shared.aiplatform import CustomJob
from shared.config.durations import age_text
from shared.handlers import actions, data_checks, duplicates, jobstate
from shared.handlers.rejections import alert_once
from shared.logs import log
from shared.model.alerts import AlertReason
from shared.model.errors import DispatchError
from shared.policy import deadlines
from shared.policy.due_retries import DueRetry
from shared.policy.duplicates import Duplicates
from shared.policy.reconcile_pace import VertexPace, next_state, vertex_paused
from shared.policy.reconcile_plan import (
    Listing,
    ListingKey,
    MissedDeadline,
    OverdueWait,
    StateChange,
    StuckIntent,
    plan_listings,
    plan_tick,
)
from shared.policy.records import console_url
from shared.policy.watchdogs import QueueLimitSource, alert_claim, describe_queue_limit

if TYPE_CHECKING:
    from cloudevents.abstract import CloudEvent

    from shared.handlers.services import Services
    from shared.model.reconciler_state import ReconcilerState

ACTIVE_STATUSES: tuple[RunStatus, ...] = (
    RunStatus.WAITING_DATA,
    RunStatus.ACCEPTED,
    RunStatus.SUBMITTING,
    RunStatus.SUBMITTED,
    RunStatus.RUNNING,
    RunStatus.WAITING_RETRY,
)
APPLY_WORKERS = 8
"""State changes a tick applies at once: each is a ledger read and a write, mostly waiting."""

logger = logging.getLogger(__name__)


class WatchdogReason(enum.StrEnum):
    """The alert reasons the reconciler sends (once per run; OVERDUE_WAIT once per attempt)."""

    OVERDUE_WAIT = "watchdog_overdue_wait"  # a job stayed queued past its limit (once per attempt)
    STUCK_INTENT = "watchdog_stuck_intent"  # an attempt stayed without a job


RECORDED_OUTCOMES = frozenset({jobstate.JobStateOutcome.RECORDED, jobstate.JobStateOutcome.DECIDED})


@dataclass(frozen=True)
class ReconcileReport:
    """What one tick read and did; logged as one structured line."""

    runs_read: int = 0  # active runs read: at most reconcile_max_runs
    round_wrapped: bool = False  # the tick reached the newest active run and went on from the
    # oldest: every active run was read since the last tick that wrapped
    cursor_run_id: str | None = None  # the run the tick stopped at: the next one starts after it
    vertex_calls: int = 0  # List pages, Cancel calls and completion reads made (every kind)
    vertex_pace: str = VertexPace.CALLED.value  # called | throttled | paused (VertexPace)
    vertex_throttles: int = 0  # throttled ticks in a row (0: no backoff)
    vertex_paused_until: str | None = None  # no Vertex AI call before this time (ISO 8601)
    ended_runs_owing_actions: int = 0  # ended runs whose alert or completion publish failed
    parents_listed: int = 0
    list_calls: int = 0  # List pages (ListCustomJobs, ListHyperparameterTuningJobs, ...)
    result_reads: int = 0  # Get calls reading a sweep's / pipeline's result for its completion
    listings: int = 0  # (parent, kind) listings made
    jobs_listed: int = 0
    states_recorded: int = 0  # job states applied to the ledger (decisions included)
    decisions_made: int = 0  # terminal states classified and decided
    ends_awaiting_error: int = 0  # FAILED ends read before Vertex AI set their error: decided later
    retries_published: Mapping[str, int] = field(default_factory=dict)  # per RetryCause
    actions_taken: Mapping[str, int] = field(default_factory=dict)  # by ensure_actions, per kind
    watchdog_cancels: int = 0  # Cancel calls of the queue watchdog
    duplicate_jobs_cancelled: int = 0  # duplicates of an attempt's job, cancelled and noted
    deadlines_missed: int = 0  # runs waiting past their deadline (start_by), ended FAILED
    alerts_sent: int = 0
    data_waits_checked: int = 0  # runs WAITING_DATA whose data the tick checked
    data_waits: Mapping[str, int] = field(default_factory=dict)  # per DataCheck value
    jobs_not_listed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    def log_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def run_reconcile(cloud_event: CloudEvent, services: Services | None = None) -> ReconcileReport:
    """The Cloud Scheduler tick (through Pub/Sub): one reconcile; the event's content is unused."""
    from shared.handlers.services import default_services

    services = services or default_services()
    return reconcile(services, services.now())


def reconcile(services: Services, now: datetime) -> ReconcileReport:
    """One reconcile pass at ``now``; see the module docstring. Raises only if the ledger fails."""
    config = services.config
    state = services.ledger.get_reconciler_state()
    page: RunPage = services.ledger.next_runs(
        ACTIVE_STATUSES, state.cursor, config.reconcile_max_runs
    )
    # The cursor moves on before any Vertex AI call, so that a tick killed on its way (the
    # function's timeout, a crash) does not make every next tick read this same page again and
    # starve the runs past it. The backoff is written at the end, from what the tick met.
    _put_state(services, next_state(state, now, last_read=page.last, pace=VertexPace.PAUSED))
    snapshots = page.snapshots
    runs = [snapshot.run for snapshot in snapshots]
    active = {run.run_id for run in runs}
    owing = [
        snapshot
        for snapshot in services.ledger.list_runs_owing_actions(limit=config.reconcile_max_runs)
        if snapshot.run.run_id not in active
    ]
    paused = vertex_paused(state, now)
    tick = _Tick(services, VertexPace.PAUSED if paused else VertexPace.CALLED)
    listings = plan_listings(runs)
    jobs: dict[str, CustomJob] = {}
    listed: set[ListingKey] = set()
    for listing in listings:
        found = tick.list_jobs(listing)
        if found is not None:
            jobs.update(found)
            listed.add(listing.key)
    plan = plan_tick(
        runs,
        jobs,
        services.config.templates,
        now=now,
        grace=config.watchdog_grace,
        listed=frozenset(listed),
    )
    read = {snapshot.run.run_id: snapshot for snapshot in snapshots}
    applied = tick.apply_changes(plan.changes, jobs)
    for retry in plan.retries:
        tick.publish_retry(retry, read[retry.run_id], now)
    for waited in plan.overdue:
        tick.cancel_overdue(read[waited.run_id].run, waited)
    for intent in plan.stuck:
        tick.alert_stuck_intent(read[intent.run_id].run, intent)
    for missed in plan.missed:
        tick.end_missed_deadline(read[missed.run_id], missed)
    for extra in plan.duplicates:
        tick.cancel_duplicates(read[extra.run_id].run, extra)
    for snapshot in (*snapshots, *owing):
        if snapshot.run.run_id not in applied:  # ensured already, on the freshly recorded run
            tick.ensure_actions(snapshot)
    data = data_checks.check_waiting_data(services, snapshots, now)
    tick.errors.extend(data.errors)
    left = next_state(state, now, last_read=page.last, pace=tick.pace)
    if not _put_state(services, left):
        tick.errors.append("writing the reconciler state failed: see the WARNING line")
    report = ReconcileReport(
        runs_read=len(runs),
        round_wrapped=page.wrapped,
        cursor_run_id=left.cursor.run_id if left.cursor else None,
        vertex_calls=tick.list_calls + tick.cancel_calls + tick.result_reads,
        vertex_pace=tick.pace.value,
        vertex_throttles=left.throttles,
        vertex_paused_until=(
            left.vertex_paused_until.isoformat() if left.vertex_paused_until else None
        ),
        ended_runs_owing_actions=len(owing),
        parents_listed=len({parent for parent, _ in listed}),
        listings=len(listed),
        list_calls=tick.list_calls,
        result_reads=tick.result_reads,
        jobs_listed=tick.jobs_listed,
        states_recorded=tick.states_recorded,
        decisions_made=tick.decisions_made,
        ends_awaiting_error=tick.ends_awaiting_error,
        retries_published=dict(tick.retries_published),
        actions_taken=dict(tick.actions_taken),
        watchdog_cancels=tick.cancels,
        duplicate_jobs_cancelled=tick.duplicates_cancelled,
        deadlines_missed=tick.deadlines_missed,
        alerts_sent=tick.alerts_sent,
        data_waits_checked=data.checked,
        data_waits=dict(data.results),
        jobs_not_listed=plan.unlisted,
        errors=tuple(tick.errors),
    )
    _log_report(report)
    return report


class _Tick:
    """The side effects of one tick, each isolated: a failure is counted, never raised."""

    def __init__(self, services: Services, pace: VertexPace = VertexPace.CALLED) -> None:
        self.services = services
        self.config = services.config
        self.pace = pace  # CALLED until a call is throttled; PAUSED: no call at all
        self.cancel_calls = 0
        self.list_calls = 0
        self.result_reads = 0
        self.jobs_listed = 0
        self.states_recorded = 0
        self.decisions_made = 0
        self.ends_awaiting_error = 0
        self._lock = threading.Lock()  # counters are bumped from apply_changes' threads too
        self.retries_published: dict[str, int] = {}
        self.actions_taken: dict[str, int] = {}
        self.cancels = 0
        self.duplicates_cancelled = 0
        self.deadlines_missed = 0
        self.alerts_sent = 0
        self.errors: list[str] = []

    def list_jobs(self, listing: Listing) -> dict[str, CustomJob] | None:
        """The jobs of ``listing`` (its kind, under its parent; CustomJob views), paging only until
        every watched job was seen; None on error or when the tick makes no more Vertex AI calls
        (paused, or throttled already)."""
        if self.pace is not VertexPace.CALLED:
            return None
        found: dict[str, CustomJob] = {}
        missing = set(listing.watched)
        try:
            for page in vertex.list_jobs(listing.parent, listing.kind, filter=listing.filter):
                self.list_calls += 1
                self.jobs_listed += len(page)
                for job in page:
                    found[job.name] = job
                    missing.discard(job.name)
                if not missing:
                    break  # later pages hold only older jobs nobody watches
        except vertex.VertexThrottled as error:
            self.list_calls += 1  # the refused page was a call too
            self._throttled(f"listing {listing.kind.collection} in {listing.parent}", error)
            return None
        except DispatchError as error:
            self._failed(f"listing {listing.kind.collection} in {listing.parent}", error)
            return None
        return found

    def apply_changes(
        self, changes: Sequence[StateChange], jobs: Mapping[str, CustomJob]
    ) -> set[str]:
        """Record each changed job's state (and decide its end), a few at a time; the run ids."""
        if not changes:
            return set()
        with ThreadPoolExecutor(APPLY_WORKERS, thread_name_prefix="reconcile-apply") as pool:
            results = list(pool.map(lambda c: self._apply(c, jobs[c.job_name]), changes))
        return {change.run_id for change, result in zip(changes, results, strict=True) if result}

    def _apply(self, change: StateChange, job: CustomJob) -> bool:
        try:
            result, snapshot = jobstate.record_job_state(job, self.services, random.Random())
        except DispatchError as error:
            # A lost race (LedgerConflict) or a ledger outage: the next tick applies it. A
            # permanent error (a ledger refusal) repeats each tick, logged.
            self._failed(
                f"recording {change.observed_state} of {change.job_name}", error, change.run_id
            )
            return False
        with self._lock:
            if result.outcome in RECORDED_OUTCOMES:
                self.states_recorded += 1
            if result.outcome is jobstate.JobStateOutcome.DECIDED:
                self.decisions_made += 1
            if result.outcome is jobstate.JobStateOutcome.DEFERRED:
                self.ends_awaiting_error += 1
        if snapshot is not None:
            self.ensure_actions(snapshot)
        return True

    def publish_retry(self, retry: DueRetry, snapshot: RunSnapshot, now: datetime) -> None:
        topic = self.config.requests_topic
        if topic is None:
            self.errors.append(
                f"run {retry.run_id} is due for a retry ({retry.cause}), but the config sets no "
                "requests_topic: set requests_topic to the topic dispatch listens on"
            )
            return
        try:
            retry_messages.publish_retry(retry.run_id, retry.plan, topic)
        except DispatchError as error:
            self._failed(f"publishing the retry of run {retry.run_id}", error, retry.run_id)
            return
        cause = retry.cause.value
        self.retries_published[cause] = self.retries_published.get(cause, 0) + 1
        try:
            self.services.ledger.record_recovery_published(snapshot, now)
        except LedgerConflict:
            pass  # the run moved since the tick read it: most likely dispatch took it over
        except DispatchError as error:  # published again next tick, which is harmless
            self._failed(f"noting the retry of run {retry.run_id}", error, retry.run_id)

    def cancel_overdue(self, run: Run, waited: OverdueWait) -> None:
        """Alert (once per attempt), note our ``queue_timeout`` cancel, then cancel the job.

        The alert comes first: should it fail, the job is left waiting, so the next tick finds it
        overdue again and tries all three; a job cancelled first would leave no tick to alert
        from. The note comes before the cancel call, so that however soon the job ends, its end
        is read as the watchdog's cancel (capacity: the run moves on) and never as an
        operator's; a note that fails leaves the job uncancelled for the next tick.
        Once a call of the tick was throttled, none of them is done: the next tick able to
        cancel does.
        """
        if self.pace is not VertexPace.CALLED:
            return
        last = run.last_attempt
        if last is None or last.job_name != waited.job_name:
            return  # the listing is of an older attempt's job
        # At the run's deadline the job is cancelled without the watchdog's alert: its end is
        # decided as the deadline missed, whose one alert names every placement tried.
        alerted = waited.source is QueueLimitSource.DEADLINE or self._alert_once(
            run,
            WatchdogReason.OVERDUE_WAIT,
            claim=alert_claim(WatchdogReason.OVERDUE_WAIT, f"attempt{last.number}"),
            message=(
                f"job {waited.job_name} (attempt {last.number}) was {waited.state} for "
                f"{age_text(waited.waited)}, more than {describe_queue_limit(waited.source)} "
                f"({age_text(waited.limit)}); the reconciler is cancelling it, and the run moves "
                "on as after a capacity failure (the next placement of the chain, as its retry "
                f"policy says). Console: {console_url(waited.job_name)}"
            ),
            what_to_do=(
                "check the job in the console, the region's capacity for its GPUs (or the "
                "persistent resource's free replicas), and the project's GPU quota there "
                "(Vertex AI keeps a job that lacks quota queued rather than refusing it); to let "
                "jobs of this template queue longer, raise its max_queue; or add a placement "
                "to the chain"
            ),
            attempt=last.number,
        )
        if not alerted:
            return
        try:
            self.services.ledger.record_cancel_requested(
                run.run_id, last.number, CancelReason.QUEUE_TIMEOUT
            )
        except DispatchError as error:
            self._failed(f"recording the cancel of {waited.job_name}", error, run.run_id)
            return
        try:
            self.cancel_calls += 1
            vertex.cancel_job(waited.job_name)
            self.cancels += 1
        except vertex.VertexThrottled as error:
            self._throttled(f"cancelling {waited.job_name}", error, run.run_id)
            return
        except vertex.VertexRejected:
            pass  # FAILED_PRECONDITION: it is cancelling or ended already (maybe by the service)
        except DispatchError as error:
            self._failed(f"cancelling {waited.job_name}", error, run.run_id)

    def end_missed_deadline(self, snapshot: RunSnapshot, missed: MissedDeadline) -> None:
        """A run waiting for a retry or a placement past its deadline: alert ``deadline_missed``
        (claimed once per run, before the end: an ended run is read by no later tick), then end
        it FAILED, only if it did not move since the tick read it (``Ledger.fail_waiting``: a
        retry dispatch claimed meanwhile wins, and its walk ends the run the same way)."""
        run = snapshot.run
        template = run.template
        last = run.last_attempt
        try:
            alert_once(
                self.services.ledger,
                run,
                config=self.config,
                trigger=run.run_key,
                reason=AlertReason.DEADLINE_MISSED,
                message=deadlines.missed_message(
                    run, template, "it is still waiting for a retry or a placement"
                ),
                what_to_do=deadlines.missed_what_to_do(run, template),
                attempt=last.number if last else 0,
            )
            self.services.ledger.fail_waiting(snapshot)
        except LedgerConflict:
            return  # the run moved on: dispatch's walk decides on it as it is now
        except DispatchError as error:
            self._failed(f"ending run {run.run_id} past its deadline", error, run.run_id)
            return
        self.deadlines_missed += 1
        log(
            logger,
            logging.ERROR,
            "run past its deadline while waiting; run failed",
            labels={"run_id": run.run_id},
            start_deadline=missed.deadline.isoformat(),
        )

    def cancel_duplicates(self, run: Run, extra: Duplicates) -> None:
        """Cancel the duplicates of an attempt's job, alert once, note them (all idempotent:
        whatever fails is counted, and the next tick, finding them un-noted, repeats it). Not
        while Vertex AI calls are throttled or paused: the next tick able to call does it."""
        if self.pace is not VertexPace.CALLED:
            return
        try:
            self.cancel_calls += len(extra.cancel)
            _, sent, _ = duplicates.settle(
                self.services.ledger, self.config, run, extra, trigger=run.run_key
            )
        except vertex.VertexThrottled as error:
            self._throttled(
                f"cancelling the duplicates {', '.join(extra.cancel)}", error, run.run_id
            )
            return
        except DispatchError as error:
            self._failed(f"cancelling the duplicates {', '.join(extra.cancel)}", error, run.run_id)
            return
        self.duplicates_cancelled += len(extra.cancel)
        self.alerts_sent += int(sent)

    def alert_stuck_intent(self, run: Run, intent: StuckIntent) -> None:
        self._alert_once(
            run,
            WatchdogReason.STUCK_INTENT,
            message=(
                f"attempt {intent.attempt} of run {run.run_id} has had no job for "
                f"{age_text(intent.age)} although the reconciler asked dispatch to recover it "
                "every 10 minutes since the intent lease expired"
            ),
            what_to_do=(
                "read the dispatch function's logs for this run_id (a create that keeps failing, "
                "a missing template, a dead-lettered retry) and fix what they name; check the "
                "requests topic's subscription reaches the function"
            ),
            attempt=intent.attempt,
        )

    def _alert_once(
        self,
        run: Run,
        reason: WatchdogReason,
        *,
        message: str,
        what_to_do: str,
        attempt: int,
        claim: str | None = None,
    ) -> bool:
        """``alert_once`` for the tick; False only when it failed (counted, and the claim given
        back, so the next tick tries again)."""
        try:
            sent = alert_once(
                self.services.ledger,
                run,
                config=self.config,
                trigger=run.run_key,
                reason=reason,
                message=message,
                what_to_do=what_to_do,
                claim=claim,
                attempt=attempt,
            )
        except DispatchError as error:  # AlertNotSent, or the ledger
            self._failed(f"alerting {reason} for run {run.run_id}", error, run.run_id)
            return False
        self.alerts_sent += int(sent)
        return True

    def ensure_actions(self, snapshot: RunSnapshot) -> None:
        """Whatever the run's recorded decisions still owe (due retry, alert, completion); a
        completion's result read only while the tick makes Vertex AI calls, counted."""
        reads = actions.VertexReads(allowed=self.pace is VertexPace.CALLED)
        try:
            taken = actions.ensure_actions(snapshot, self.services, vertex_reads=reads)
        except DispatchError as error:
            run_id = snapshot.run.run_id
            self._failed(f"carrying out the actions owed by run {run_id}", error, run_id)
            return
        finally:
            with self._lock:  # also called from apply_changes' threads
                self.result_reads += reads.made
                if reads.throttled:
                    self.pace = VertexPace.THROTTLED  # logged by _failed above
        done = {
            "alerts": len(taken.alerts),
            "completions": int(taken.completion_published),
            "backoff_retries": int(taken.retry_published),
        }
        with self._lock:  # also called from apply_changes' threads
            for action, count in done.items():
                if count:
                    self.actions_taken[action] = self.actions_taken.get(action, 0) + count

    def _throttled(self, action: str, error: Exception, run_id: str | None = None) -> None:
        """A Vertex AI request quota refused ``action``: no more Vertex AI calls this tick, and
        the backoff starts (``reconcile_pace.next_state``)."""
        self.pace = VertexPace.THROTTLED
        self._failed(f"{action} (throttled: no more Vertex AI calls this tick)", error, run_id)

    def _failed(self, action: str, error: Exception, run_id: str | None = None) -> None:
        self.errors.append(f"{action}: {error}")
        log(
            logger,
            logging.WARNING,
            f"reconcile: {action} failed; next tick retries",
            labels={"run_id": run_id} if run_id else None,
            error=str(error),
        )


def _put_state(services: Services, state: ReconcilerState) -> bool:
    """Write the reconciler's state; False (logged) when the ledger refused: the next tick then
    reads an older cursor and rereads a page, which is harmless."""
    try:
        services.ledger.put_reconciler_state(state)
    except DispatchError as error:
        log(
            logger,
            logging.WARNING,
            "reconcile: writing the reconciler state failed",
            error=str(error),
        )
        return False
    return True


def _log_report(report: ReconcileReport) -> None:
    level = logging.WARNING if report.errors or report.jobs_not_listed else logging.INFO
    log(logger, level, "reconcile tick", **report.log_fields())
