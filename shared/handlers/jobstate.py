"""The job-state function: a hint names a job; read it, record it, decide, act.

``handle_job_event`` is what ``on_job_event`` calls for every message on the job-events topic
(our job-state messages and Cloud Logging entries, ``shared.decode.hints``). Events are hints, state
is read (docs/architecture.md, "Events are hints, state is read"):

1. decode the hint; one that names no job is logged (ERROR, so a misrouted log sink shows up)
   and acknowledged: there is no run to record it on, redelivery cannot fix it, and the
   reconciler sees the job's state anyway;
2. screen the hint without a Vertex AI read (``shared.policy.hint_screen``): a log entry of a
   task other than ``service`` is dropped at once; otherwise the ledger is asked which run records
   a job of the hint's id (``Ledger.find_runs_by_job_id``), and a hint for a job we did not make,
   for an attempt whose end is recorded, or that cannot change what the attempt records is dropped
   (one INFO line with ``hint_dropped``, the reason). A log hint's read is first counted on the
   attempt (``Ledger.claim_hint_read``): past ``HINT_READS_PER_ATTEMPT`` reads, log hints of the
   attempt are dropped (``read_budget``), so no number of lines can cost more. Only then is the
   job read, once, by the exact name the ledger records; a RESOURCE_EXHAUSTED answer drops the
   hint too (``throttled``: the reconciler reads the state anyway, and a redelivery would meet
   the same quota). The job is read by its kind's Get (``vertex.get_job``: a CustomJob, a
   HyperparameterTuningJob or a TrainingPipeline, as its CustomJob view, ``policy.job_views``).
   The job's labels ``vd-run``/``vd-attempt`` name the run and the attempt (a job without them
   is not ours: ignored), and it counts for the attempt only when its kind is the attempt's
   (``policy.duplicates.counts_for``): a pipeline's backing CustomJob carrying the pipeline's
   labels is ``OTHER_KIND``, neither the attempt's job nor a duplicate to cancel;
3. read the run. A job of an attempt that records ANOTHER job is a duplicate
   (``policy.duplicates``): it is cancelled and alerted once (``handlers.duplicates.settle``),
   noted on the attempt, and its state is never the attempt's (``DUPLICATE``). A state the
   attempt already records (with its decision, for a terminal state)
   changes nothing. A live state (queued, pending, running) is recorded. A terminal state of the
   run's last attempt is classified (``classify.classify``), decided (``decisions.decide``) and
   recorded in ONE compare-and-set with the decision, so the same hint twice makes one decision:
   a delivery that loses the race gets ``LedgerConflict`` (transient), and its redelivery finds
   the decision made. A capacity end first starts its placement's cooldown
   (``policy.cooldown``: new attempts try the other placements first). One exception: a
   FAILED job without an error that ended less than ``timing.ERROR_SETTLE_TIME`` ago is
   recorded but not decided (DEFERRED): Vertex AI sets the error about a minute after the end,
   and deciding on no error would alert instead of retrying.
   The hint is acknowledged; the reconciler's next tick (or a later hint) reads the job again
   and decides;
4. ``actions.ensure_actions``: what the recorded run requires (alerts once per reason, the
   completion once, a retry that is due now), also when nothing new was recorded, so an action
   whose publish failed last time is redone.

It returns a ``JobStateResult`` whenever the hint is done with, and raises only
``TransientError`` (the platform delivers the hint again).
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cloudevents.http import CloudEvent

from shared.decode import hints
from shared.logs import log
from shared.model import loglines
from shared.model.errors import MalformedEvent, PermanentError
from shared.policy.hint_screen import HintDrop

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1

    from shared.adapters.ledger import Attempt, JobTimes, Run, RunSnapshot
    from shared.config.model import Template
    from shared.decode.hints import JobHint
    from shared.handlers.services import Services
    from shared.policy.classify import Classification
    from shared.policy.decisions import Decision
    from shared.policy.hint_screen import Screened

RUN_LABEL = "vd-run"  # shared.policy.jobspec.RUN_LABEL, without importing the protos it needs
ATTEMPT_LABEL = "vd-attempt"

logger = logging.getLogger(__name__)


class JobStateOutcome(enum.StrEnum):
    """How one hint ended; every member means "acknowledge the hint"."""

    MALFORMED = "malformed"  # the hint names no job: logged and dropped
    DROPPED = "dropped"  # screened out without a Vertex AI read (``hint_screen.HintDrop``)
    NOT_FOUND = "not_found"  # the ledger's job name is not (or no longer) a job
    NOT_OURS = "not_ours"  # the job has no vd-run label: another system's job
    UNKNOWN_RUN = "unknown_run"  # labelled with a run (or attempt) the ledger does not have
    REFUSED = "refused"  # a permanent error, logged: e.g. the service refused to read the job
    UNCHANGED = "unchanged"  # the ledger already records this state (actions re-ensured)
    RECORDED = "recorded"  # a new live state, or a terminal state not to be decided
    DECIDED = "decided"  # a terminal state of the last attempt: classified, decided, recorded
    DEFERRED = "deferred"  # FAILED, its error not set yet: recorded, decided on a later read
    DUPLICATE = "duplicate"  # a second job of an attempt that records another: cancelled
    OTHER_KIND = "other_kind"  # labelled with an attempt of another kind: not its job, ignored


@dataclass(frozen=True)
class JobStateResult:
    outcome: JobStateOutcome
    run_id: str | None = None
    job_name: str | None = None
    state: str | None = None
    detail: str = ""


def handle_job_event(
    cloud_event: CloudEvent,
    services: Services | None = None,
    rng: random.Random | None = None,
) -> JobStateResult:
    """Handle one delivery of a job-state hint; see the module docstring for the contract."""
    from shared.handlers.services import default_services

    services = services or default_services()
    try:
        hint = hints.decode_hint(cloud_event)
    except MalformedEvent as error:
        log(
            logger,
            logging.ERROR,
            "job-state hint dropped",
            event_id=cloud_event.get("id"),
            error=str(error),
        )
        return JobStateResult(JobStateOutcome.MALFORMED, detail=str(error))
    screened, found = _screen(hint, services)
    if screened.drop is not None or screened.job_name is None:
        return _dropped(hint, screened.drop or HintDrop.NOT_OURS, screened.run_id)
    try:
        allowed = _hint_read_allowed(hint, screened, found, services)
    except PermanentError as error:  # the run or attempt went away since the screen read it
        return _refused(hint, error)
    if not allowed:
        return _dropped(hint, HintDrop.READ_BUDGET, screened.run_id)
    from shared.adapters import vertex

    try:
        job = _read_job(screened.job_name)
    except vertex.VertexThrottled as error:
        return _dropped(hint, HintDrop.THROTTLED, screened.run_id, error=str(error))
    except PermanentError as error:
        return _refused(hint, error)
    if job is None:
        log(
            logger,
            logging.WARNING,
            "hinted job not found",
            labels=_run_label(screened.run_id),
            job=screened.job_name,
        )
        return JobStateResult(
            JobStateOutcome.NOT_FOUND, screened.run_id, screened.job_name, detail="not found"
        )
    try:
        return apply_job_state(job, services, rng or random.Random())
    except PermanentError as error:
        # Redelivery cannot fix it; the reconciler keeps seeing the run, and the log alerts.
        log(
            logger,
            logging.CRITICAL,
            "job state not applied",
            labels={"run_id": job.labels.get(RUN_LABEL, "")},
            job=job.name,
            error=str(error),
        )
        return JobStateResult(JobStateOutcome.REFUSED, job_name=job.name, detail=str(error))


def apply_job_state(
    job: aiplatform_v1.CustomJob, services: Services, rng: random.Random
) -> JobStateResult:
    """Record what ``job`` (as just read) means for its run, then ensure the run's actions."""
    from shared.handlers.actions import ensure_actions

    result, snapshot = record_job_state(job, services, rng)
    if snapshot is not None:
        ensure_actions(snapshot, services)
    return result


def record_job_state(
    job: aiplatform_v1.CustomJob, services: Services, rng: random.Random
) -> tuple[JobStateResult, RunSnapshot | None]:
    """Record what ``job`` (as just read) means for its run; the run as recorded, when there is
    one, so that the caller ensures its actions (``apply_job_state`` does both)."""
    from shared.model.jobstates import is_terminal
    from shared.policy.duplicates import counts_for
    from shared.policy.job_views import job_times

    run_id, attempt_number = _run_and_attempt(job)
    state = job.state.name
    if run_id is None or attempt_number is None:
        return JobStateResult(JobStateOutcome.NOT_OURS, job_name=job.name, state=state), None
    snapshot = services.ledger.get_run(run_id)
    attempt = snapshot.run.attempt(attempt_number) if snapshot else None
    if snapshot is None or attempt is None:
        log(
            logger,
            logging.ERROR,
            "job names a run attempt the ledger does not have",
            labels={"run_id": run_id},
            job=job.name,
            attempt=attempt_number,
        )
        return JobStateResult(JobStateOutcome.UNKNOWN_RUN, run_id, job.name, state), None
    if not counts_for(job.name, attempt.job_kind):
        log(
            logger,
            logging.INFO,
            "job of another kind than its attempt's ignored (a pipeline's own training job?)",
            labels=_labels(snapshot),
            job=job.name,
            attempt=attempt_number,
            attempt_kind=attempt.job_kind.value,
        )
        detail = f"attempt {attempt_number} makes a {attempt.job_kind.resource}"
        result = JobStateResult(JobStateOutcome.OTHER_KIND, run_id, job.name, state, detail)
        return result, None
    if attempt.job_name is not None and attempt.job_name != job.name:
        return _duplicate(job, snapshot, attempt, services)
    # The job's own times and when it was read: the attempt's history (docs/architecture.md,
    # "Run history").
    times = job_times(job, services.now())
    if _already_recorded(attempt, state):
        outcome = JobStateOutcome.UNCHANGED
    elif is_terminal(state) and _decidable(snapshot, attempt_number):
        classification = classify_job(job, snapshot.run, attempt)
        if _error_still_to_come(job, classification, services.now(), snapshot):
            snapshot = services.ledger.record_observed_state(
                run_id, attempt_number, job.name, state, None, times
            )
            outcome = JobStateOutcome.DEFERRED
        else:
            snapshot = _decide_and_record(snapshot, job, classification, services, rng, times)
            outcome = JobStateOutcome.DECIDED
    else:
        snapshot = services.ledger.record_observed_state(
            run_id, attempt_number, job.name, state, _error_of(job), times
        )
        outcome = JobStateOutcome.RECORDED
        log_first_running(attempt, snapshot, job, services.now())
    log(
        logger,
        logging.INFO,
        f"job state {outcome}",
        labels=_labels(snapshot),
        job=job.name,
        state=state,
    )
    status = snapshot.run.status.value
    return JobStateResult(outcome, run_id, job.name, state, detail=status), snapshot


def _duplicate(
    job: aiplatform_v1.CustomJob, snapshot: RunSnapshot, attempt: Attempt, services: Services
) -> tuple[JobStateResult, RunSnapshot]:
    """``job`` carries the labels of an attempt that records another job: keep the recorded
    one, cancel and alert ``job`` unless that was done; the job's state is never recorded."""
    from shared.handlers import duplicates
    from shared.handlers.actions import trigger_line
    from shared.policy.duplicates import FoundJob, sort_out

    run = snapshot.run
    found = sort_out(
        run.run_id,
        attempt.number,
        attempt.job_name,
        [FoundJob(job.name, job.create_time)],
        already=attempt.duplicate_jobs,
        kind=attempt.job_kind,
    )
    if found is not None:
        _, _, snapshot = duplicates.settle(
            services.ledger, services.config, run, found, trigger=trigger_line(run)
        )
    else:
        log(
            logger,
            logging.INFO,
            "job state of a duplicate job ignored: it was cancelled and alerted already",
            labels=_labels(snapshot),
            job=job.name,
            state=job.state.name,
            kept=attempt.job_name,
        )
    result = JobStateResult(
        JobStateOutcome.DUPLICATE,
        run.run_id,
        job.name,
        job.state.name,
        detail=f"attempt {attempt.number} keeps {attempt.job_name}",
    )
    return result, snapshot


def _screen(hint: JobHint, services: Services) -> tuple[Screened, list[RunSnapshot]]:
    """The hint screened against the ledger (``hint_screen``), and the runs the ledger found:
    no ledger read for a log entry that is not a service line, and no Vertex AI read at all."""
    from shared.policy.hint_screen import Screened, screen, screen_task

    drop = screen_task(hint)
    if drop is not None:
        return Screened(drop), []
    found = services.ledger.find_runs_by_job_id(hint.job_id)
    return screen(hint, [snapshot.run for snapshot in found]), found


def _hint_read_allowed(
    hint: JobHint, screened: Screened, found: list[RunSnapshot], services: Services
) -> bool:
    """For a log hint, count the read in the ledger first (``HINT_READS_PER_ATTEMPT``): False
    when the attempt's budget is spent (by a concurrent delivery since the screen)."""
    from shared.policy.hint_screen import HINT_READS_PER_ATTEMPT

    if hint.source is not hints.HintSource.LOG_ENTRY or screened.attempt is None:
        return True
    known = next(s for s in found if s.run.run_id == screened.run_id)
    return services.ledger.claim_hint_read(known, screened.attempt, HINT_READS_PER_ATTEMPT)


def _dropped(
    hint: JobHint, reason: HintDrop, run_id: str | None, **fields: object
) -> JobStateResult:
    """Log the hint's drop (INFO, ``hint_dropped``: the dashboards count these) and say so."""
    log(
        logger,
        logging.INFO,
        "job-state hint not read",
        labels=_run_label(run_id),
        hint_dropped=reason.value,
        job_id=hint.job_id,
        source=hint.source.value,
        **fields,
    )
    return JobStateResult(JobStateOutcome.DROPPED, run_id, detail=reason.value)


def _refused(hint: JobHint, error: PermanentError) -> JobStateResult:
    # Refused, not missing (a job of another project, an id the service calls invalid):
    # redelivery cannot change the answer. The reconciler still lists our own jobs.
    log(
        logger,
        logging.ERROR,
        "hinted job cannot be read",
        job_id=hint.job_id,
        project=hint.project,
        error=str(error),
    )
    return JobStateResult(JobStateOutcome.REFUSED, detail=str(error))


def _read_job(job_name: str) -> aiplatform_v1.CustomJob | None:
    """The job ``job_name`` (of any kind, as its CustomJob view) as the ledger records it, read
    once; None when it does not exist."""
    from shared.adapters import vertex

    try:
        return vertex.get_job(job_name)
    except vertex.VertexNotFound:
        return None


def _run_label(run_id: str | None) -> dict[str, str]:
    return {"run_id": run_id} if run_id else {}


def _run_and_attempt(job: aiplatform_v1.CustomJob) -> tuple[str | None, int | None]:
    run_id = job.labels.get(RUN_LABEL)
    attempt = job.labels.get(ATTEMPT_LABEL, "")
    # isascii: str.isdigit also accepts digits such as "²", which int() refuses.
    return run_id, int(attempt) if attempt.isascii() and attempt.isdigit() else None


def _already_recorded(attempt: Attempt, state: str) -> bool:
    from shared.model.jobstates import is_terminal

    if attempt.state != state:
        return False
    return attempt.decision is not None or not is_terminal(state)


def _decidable(snapshot: RunSnapshot, attempt_number: int) -> bool:
    """Only the last attempt's end moves a live run; an older job's end is only recorded."""
    run = snapshot.run
    last = run.last_attempt
    return not run.status.is_terminal() and last is not None and last.number == attempt_number


def classify_job(job: aiplatform_v1.CustomJob, run: Run, attempt: Attempt | None) -> Classification:
    """``classify.classify`` with what the ledger knows of the job: the FLEX_START max wait of
    the attempt's recorded placement (before the job's own), and whether we asked for the job's
    cancel and why (an operator's: its end is our cancel, not an expiry; the queue watchdog's:
    capacity)."""
    from shared.model.runs import cancel_reason_of
    from shared.policy.classify import classify
    from shared.policy.max_wait import flex_start_max_wait

    return classify(
        job,
        max_wait=flex_start_max_wait(job, attempt),
        cancel_requested=attempt is not None and attempt.cancel_requested_at is not None,
        cancel_reason=cancel_reason_of(attempt) if attempt is not None else None,
    )


def _error_still_to_come(
    job: aiplatform_v1.CustomJob,
    classification: Classification,
    now: datetime,
    snapshot: RunSnapshot,
) -> bool:
    """Whether to wait for the error of a FAILED job that has none yet (``policy.classify``)."""
    from shared.config.model import FailureClass
    from shared.policy.classify import error_pending

    if classification.failure is not FailureClass.UNKNOWN:
        return False  # decided without the error: a FLEX_START wait that ran out
    left = error_pending(job, now)
    if left is None:
        return False
    log(
        logger,
        logging.INFO,
        "job end not decided yet: Vertex AI sets a failed job's error about a minute after its end",
        labels=_labels(snapshot),
        job=job.name,
        end_time=str(job.end_time or job.update_time),
        decide_by=str(now + left),
    )
    return True


def _decide_and_record(
    snapshot: RunSnapshot,
    job: aiplatform_v1.CustomJob,
    classification: Classification,
    services: Services,
    rng: random.Random,
    times: JobTimes,
) -> RunSnapshot:
    from shared.adapters.ledger import AttemptOutcome
    from shared.policy.decisions import decide

    run = snapshot.run
    # None when the template left the config: the end is still decided (never retried).
    template = services.config.templates.get(run.template)
    now = services.now()
    decision = decide(run, template, classification, now=now, rng=rng)
    attempt_number = run.last_attempt.number if run.last_attempt else 0
    _cool_down_after_capacity(run, template, classification, services, now)
    record = decision_record(
        decision, classification, job, now, completes=services.config.completions_topic is not None
    )
    recorded = services.ledger.record_decision(
        snapshot,
        AttemptOutcome(
            attempt=attempt_number,
            job_name=job.name,
            state=classification.state,
            error=classification.error_record(),
            decision=record,
            status=decision.status,
            next_retry=decision.retry,
            times=times,
        ),
    )
    # After the write, so that a delivery that lost the race logs nothing: one line per decision
    # (the "runs ended by outcome" metric counts them; shared/model/loglines.py).
    log(
        logger,
        logging.INFO,
        loglines.JOB_DECIDED_MESSAGE,
        labels=_labels(snapshot),
        job=job.name,
        outcome=record["outcome"],
        run_status=decision.status.value,
        explanation=decision.explanation,
    )
    return recorded


def _cool_down_after_capacity(
    run: Run,
    template: Template | None,
    classification: Classification,
    services: Services,
    now: datetime,
) -> None:
    """A job that ended for capacity (a stockout, an expired FLEX_START wait, a queue-watchdog
    cancel; ``classify`` says which) starts its placement's cooldown (``policy.cooldown``), so
    that new attempts try the others first.

    Written before the decision: a redelivery that finds the decision made does not come back
    here, while one after a lost decision write writes it again (the same entry). A failed
    write is logged, not raised: the cooldown only orders later walks; the decision is what
    must be recorded."""
    from shared.config.model import FailureClass
    from shared.handlers.cooldowns import start_cooldown
    from shared.policy.decisions import PlacementNotInChain, placement_index

    attempt = run.last_attempt
    if classification.failure is not FailureClass.CAPACITY or template is None or attempt is None:
        return
    try:
        placement = template.placements[placement_index(template, attempt)]
    except PlacementNotInChain:
        return  # the chain changed since: nothing of it to cool down
    start_cooldown(
        services.ledger,
        services.config,
        template,
        placement,
        now=now,
        reason=classification.message or classification.summary,
        run_id=run.run_id,
        labels={"run_id": run.run_id, "route": run.route, "template": run.template},
    )


def decision_record(
    decision: Decision,
    classification: Classification,
    job: aiplatform_v1.CustomJob,
    now: datetime,
    *,
    completes: bool = True,
) -> dict[str, Any]:
    """The decision as the ledger stores it on the attempt: what ``ensure_actions`` reads.

    ``completes`` is False when the config has no completions topic: no completion is then owed.
    """
    from shared.policy.records import console_url

    alert = None
    if decision.alert is not None:
        alert = {
            "reason": str(decision.alert.reason),
            "message": (
                f"{decision.alert.message}\njob: {job.name}\nconsole: {console_url(job.name)}"
            ),
            "what_to_do": decision.alert.what_to_do,
            "severity": decision.alert.severity.value,
        }
    return {
        "outcome": "succeeded" if classification.succeeded else _failure_name(classification),
        "summary": classification.summary,
        "evidence": classification.evidence,
        "explanation": decision.explanation,
        "alert": alert,
        "complete": decision.complete and completes,
        "output_directory": job.job_spec.base_output_directory.output_uri_prefix or None,
        "decided_at": now,
    }


def _failure_name(classification: Classification) -> str:
    return classification.failure.value if classification.failure else "unknown"


def _error_of(job: aiplatform_v1.CustomJob) -> Mapping[str, Any] | None:
    if not job.error.code and not job.error.message:
        return None
    return {"code": job.error.code, "message": job.error.message}


def _labels(snapshot: RunSnapshot) -> dict[str, str]:
    run = snapshot.run
    return {"run_id": run.run_id, "route": run.route, "template": run.template}


def log_first_running(
    before: Attempt, after: RunSnapshot, job: aiplatform_v1.CustomJob, now: datetime
) -> None:
    """Log the "job running" line (``shared.model.loglines.JOB_RUNNING``) when the write that
    made ``after`` recorded the attempt's first RUNNING: the attempt was not RUNNING before and
    is now. A later hint finds it recorded (UNCHANGED) and logs nothing; two deliveries of one
    hint at the same moment may both log it (rare, and a distribution tolerates it).

    ``time_to_running_s`` is the job's wait from its creation to its start, both as Vertex AI
    records them (one clock); ``now`` and the attempt's intent stand in for a time not set.
    """
    from shared.model.jobstates import JobStateName
    from shared.policy.records import placement_kind

    recorded = after.run.attempt(before.number)
    first = before.state != JobStateName.RUNNING
    if not first or recorded is None or recorded.state != JobStateName.RUNNING:
        return
    created, started = job.create_time or before.intent_at, job.start_time or now
    log(
        logger,
        logging.INFO,
        loglines.JOB_RUNNING_MESSAGE,
        labels=_labels(after),
        job=job.name,
        time_to_running_s=round(max((started - created).total_seconds(), 0.0), 3),
        placement_kind=placement_kind(before.placement),
        region=before.region,
    )
