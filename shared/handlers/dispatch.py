"""Dispatch one event: decode → route → render → validate → record → submit, exactly once.

``dispatch_event`` is what both Cloud Functions call. It returns a ``DispatchResult`` whenever the
event is done with (a job created or found, nothing to do, or a permanent error recorded in the
ledger and alerted) and raises only ``TransientError``, so the platform delivers the event again.

An event that matches no route returns at once: nothing here imports a Google Cloud client until
a route has matched (the ledger, Vertex AI and Pub/Sub modules, and ``records``, are imported
inside the functions that need them), because an unmatched shard of a 100,000-object upload must
stay cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cloudevents.http import CloudEvent

from shared.config.model import Template
from shared.decode import events, routing
from shared.handlers.services import Services, default_services
from shared.logs import log
from shared.model import runkeys
from shared.model.errors import (
    PermanentError,
    PermissionMissing,
    RetryRejected,
    human_message,
)
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, Trigger

if TYPE_CHECKING:
    from shared.adapters.ledger import Run, RunSnapshot
    from shared.model.data_waits import DataWait

logger = logging.getLogger(__name__)


def dispatch_event(cloud_event: CloudEvent, services: Services | None = None) -> DispatchResult:
    """Handle one delivery of ``cloud_event``; see the module docstring for the contract."""
    services = services or default_services()
    trigger: Trigger | None = None
    try:
        trigger = events.decode(cloud_event)
        if isinstance(trigger, RetryRequest):
            return _continue_run(services, trigger)
        match = routing.route(trigger, services.config)
        if match is None:
            log(logger, logging.DEBUG, "event matches no route", event_id=cloud_event["id"])
            return DispatchResult(DispatchOutcome.IGNORED)
        if match.dataset is not None:  # completion: quiet: the object opens or joins a dataset
            from shared.handlers import quiet_arrivals

            assert isinstance(trigger, ObjectFinalized)
            return quiet_arrivals.arrive(services, trigger, match)
        if match.manifest_uri is not None and services.ledger.get_run(match.run_id) is None:
            # Read and check the manifest on its first delivery only: a redelivery finds its run
            # (waiting, or started) and never reads a manifest rewritten or deleted since.
            return _start_run(services, trigger, match, _check_manifest(services, trigger, match))
        return _start_run(services, trigger, match)
    except PermanentError as error:
        # Whatever permanent error the run's own handling did not settle (a malformed event, a
        # refused request, an unreadable manifest, a retry for an unknown run, a ledger refusal)
        # is recorded and alerted here, and the event acknowledged: retrying cannot help.
        return _reject_event(services, cloud_event, trigger, error)


def _start_run(
    services: Services,
    trigger: Trigger,
    match: routing.RouteMatch,
    data_wait: DataWait | None = None,
) -> DispatchResult:
    """Open the run (create-if-absent) and submit its first attempt; with ``data_wait``, open it
    WAITING_DATA instead: the reconciler starts it once its data is complete."""
    from shared.adapters.ledger import Run, RunStatus
    from shared.policy import deadlines, records

    labels = {"run_id": match.run_id, "route": match.route, "template": match.template}
    template = services.config.templates[match.template]
    # A redelivery's deadline is computed again but never written: open_run keeps the first.
    start_deadline = deadlines.start_deadline(
        deadlines.trigger_time(trigger), services.now(), match.start_by or template.start_by
    )
    snapshot, created = services.ledger.open_run(
        Run(
            run_id=match.run_id,
            run_key=match.run_key,
            route=match.route,
            template=match.template,
            trigger=records.trigger_record(trigger),
            params=dict(match.params),
            status=RunStatus.ACCEPTED if data_wait is None else RunStatus.WAITING_DATA,
            data_wait=data_wait,
            start_deadline=start_deadline,
        )
    )
    log(
        logger,
        logging.INFO,
        "run opened" if created else "run found (redelivery)",
        labels=labels,
        run_key=match.run_key,
        start_deadline=start_deadline.isoformat() if start_deadline else None,
    )
    if snapshot.run.status is RunStatus.WAITING_DATA:
        # Acknowledged: the run is recorded, and the reconciler (not a redelivery) starts it.
        detail = f"run {match.run_id} waits for its data"
        log(logger, logging.INFO, "run waits for its data", labels=labels)
        return DispatchResult(DispatchOutcome.WAITING_DATA, match.run_id, detail=detail)
    return _submit(services, snapshot, template, match.params, trigger, labels, 1, 0)


def _continue_run(services: Services, retry: RetryRequest) -> DispatchResult:
    """A retry message: an attempt of a run the ledger knows, validated like any request.

    ``admission.admit_retry`` decides what the message may do; a retry the run does not await
    is acknowledged without a job.
    """
    from shared.policy.admission import RetryVerdict, admit_retry

    snapshot = services.ledger.get_run(retry.run_id)
    if snapshot is None:
        raise RetryRejected(
            f"retry message names run {retry.run_id}, which is not in the ledger; only the "
            "job-state function publishes retries, for runs it has read"
        )
    run = snapshot.run
    labels = {"run_id": run.run_id, "route": run.route, "template": run.template}
    template = services.config.templates.get(run.template)
    admission = admit_retry(run, template, retry.attempt, retry.placement_index)
    match admission.verdict:
        case RetryVerdict.REFUSED:
            raise RetryRejected(admission.reason)
        case RetryVerdict.NOT_AWAITED:
            return _not_awaited(run, retry, labels, admission.reason)
        case RetryVerdict.END_RUN:
            return _end_run(services, snapshot, retry, labels, RetryRejected(admission.reason))
        case RetryVerdict.REOPEN:
            from shared.model.runs import RetryPlan
            from shared.policy.timing import RETRY_REPUBLISH_AFTER

            # Should every delivery of this message fail (and dead-letter), the reconciler
            # publishes the attempt again from then on: a reopened run is never left unmoved.
            lost_after = RetryPlan(
                services.now() + RETRY_REPUBLISH_AFTER,
                retry.attempt,
                retry.placement_index,
                "operator retry, republished because its delivery did not claim the attempt",
            )
            snapshot = services.ledger.reopen(run.run_id, lost_after)
    assert template is not None  # RESUME, START and REOPEN need it
    if admission.verdict is not RetryVerdict.RESUME:
        log(logger, logging.INFO, "retry received", labels=labels, attempt=retry.attempt)
    return _submit(
        services,
        snapshot,
        template,
        snapshot.run.params,
        retry,
        labels,
        retry.attempt,
        retry.placement_index,
    )


def _not_awaited(run: Run, retry: RetryRequest, labels: dict[str, str], why: str) -> DispatchResult:
    last = run.last_attempt
    detail = (
        f"run {run.run_id} is {run.status.value} (last attempt {last.number if last else 0}, "
        f"job {last.job_name if last else None}): a retry for attempt {retry.attempt} is "
        f"acknowledged without a job: {why}"
    )
    log(logger, logging.WARNING, "retry not acted on", labels=labels, detail=detail)
    return DispatchResult(DispatchOutcome.DUPLICATE, run.run_id, detail=detail)


def _submit(
    services: Services,
    snapshot: RunSnapshot,
    template: Template,
    params: Mapping[str, str],
    trigger: Trigger,
    labels: dict[str, str],
    attempt: int,
    first_placement: int,
) -> DispatchResult:
    from shared.handlers.submission import submit_attempt
    from shared.handlers.walk import Submission
    from shared.policy import records

    submission = Submission(
        config=services.config,
        ledger=services.ledger,
        template=template,
        params=params,
        trigger=records.describe_trigger(trigger),
        now=services.now,
        labels=labels,
    )
    try:
        result = submit_attempt(submission, snapshot, attempt, first_placement)
    except PermanentError as error:
        # Raised after the run was opened (a permission the function lacks, a ledger refusal):
        # the run itself ends and alerts, so that a redelivery or the reconciler's next retry
        # finds it over instead of failing the same way again under a new rejected event.
        return _end_run(services, snapshot, trigger, labels, error)
    log(
        logger,
        logging.INFO,
        f"dispatch {result.outcome}",
        labels=labels,
        job=result.job_name,
        outcome=result.outcome.value,
    )
    return result


def _end_run(
    services: Services,
    snapshot: RunSnapshot,
    trigger: Trigger,
    labels: dict[str, str],
    error: PermanentError,
) -> DispatchResult:
    """End an opened run on a permanent error its submission raised; alert once on its id.

    The run is read again first: the submission may have written it since ``snapshot`` (its
    own claim of an attempt), and ``finish_run`` ends only a run that has not moved since the
    snapshot it is given (a delivery that claims meanwhile wins; the redelivery decides again).
    """
    from shared.adapters.ledger import RunStatus
    from shared.handlers.rejections import finish_run
    from shared.model.alerts import AlertReason
    from shared.policy import records

    the_run_id = snapshot.run.run_id
    snapshot = services.ledger.get_run(the_run_id) or snapshot
    permission = isinstance(error, PermissionMissing)
    # REJECTED says nothing was ever submitted; a run some of whose attempts had jobs FAILED.
    submitted_before = any(attempt.job_name for attempt in snapshot.run.attempts)
    finish_run(
        services.ledger,
        snapshot,
        RunStatus.FAILED if permission or submitted_before else RunStatus.REJECTED,
        config=services.config,
        trigger=records.describe_trigger(trigger),
        reason=AlertReason.PERMISSION if permission else AlertReason.INVALID_REQUEST,
        message=human_message(error),
        what_to_do=(
            f"fix what the message names, then `vertex-dispatch retry {the_run_id}`"
            if permission or isinstance(error, RetryRejected)
            else "fix what the message names, then trigger again"
        ),
    )
    log(
        logger,
        logging.ERROR,
        "run ended on a permanent error",
        labels=labels,
        error=str(error),
        error_type=type(error).__name__,
    )
    return DispatchResult(DispatchOutcome.REJECTED, the_run_id, detail=str(error))


def _check_manifest(
    services: Services, trigger: Trigger, match: routing.RouteMatch
) -> DataWait | None:
    """The manifest's files, checked as the event's generation of it lists them: None when all
    are complete (the run starts now), else what the run will wait for (``manifest_waits``).
    A manifest that cannot be read or is invalid raises a permanent error: rejected."""
    from shared.handlers import manifest_waits

    assert isinstance(trigger, ObjectFinalized) and match.manifest_uri is not None
    found = manifest_waits.check_files(match.manifest_uri, trigger.generation)
    if not found.missing:
        return None
    now = services.now()
    return found.wait(match.manifest_uri, since=now, checked_at=now)


def _reject_event(
    services: Services, cloud_event: CloudEvent, trigger: Trigger | None, error: PermanentError
) -> DispatchResult:
    """Record a permanent error about the event itself, alert once, and acknowledge it."""
    from shared.adapters.ledger import LedgerRejected, Run, RunStatus
    from shared.handlers.rejections import alert_once
    from shared.model.alerts import AlertReason
    from shared.policy import records

    run_key = _rejected_run_key(cloud_event, trigger)
    the_run_id = runkeys.run_id(run_key)

    def rejected_run(record: Mapping[str, object]) -> Run:
        return Run(
            run_id=the_run_id,
            run_key=run_key,
            route="",
            template="",
            trigger=record,
            status=RunStatus.REJECTED,
        )

    envelope = _event_record(
        cloud_event, "UndecodableEvent" if trigger is None else "UnstorableEvent"
    )
    # When the ledger refused the trigger's record, writing it again would only fail again: the
    # rejection is recorded (and alerted) with the event's envelope instead.
    whole = None if trigger is None or isinstance(error, LedgerRejected) else trigger
    try:
        snapshot, _ = services.ledger.open_run(
            rejected_run(envelope if whole is None else records.trigger_record(whole))
        )
    except LedgerRejected:
        if whole is None:
            raise
        snapshot, _ = services.ledger.open_run(rejected_run(envelope))
    described = records.describe_trigger(trigger) if trigger else _describe_event(cloud_event)
    log(
        logger,
        logging.ERROR,
        "event rejected",
        labels={"run_id": the_run_id},
        error=str(error),
        error_type=type(error).__name__,
    )
    alert_once(
        services.ledger,
        snapshot.run,
        config=services.config,
        trigger=described,
        reason=AlertReason.INVALID_REQUEST,
        message=human_message(error),
        what_to_do="fix the sender as the message says; the event was acknowledged and dropped",
    )
    return DispatchResult(DispatchOutcome.REJECTED, the_run_id, detail=str(error))


def _rejected_run_key(cloud_event: CloudEvent, trigger: Trigger | None) -> str:
    """The run key a rejected event is recorded under: its request key, else the event's id."""
    if isinstance(trigger, JobRequest):
        return runkeys.request_run_key(trigger.message_id, trigger.idempotency_key)
    # printable: the event may have been refused for holding text that UTF-8 cannot encode.
    source, event_id = (events.printable(cloud_event.get(key)) for key in ("source", "id"))
    return f"rejected-event:{source}#{event_id}"


def _event_record(cloud_event: CloudEvent, kind: str = "UndecodableEvent") -> dict[str, object]:
    """What the ledger keeps of an event it cannot keep whole, because it could not be decoded
    (``UndecodableEvent``) or the ledger refused its record (``UnstorableEvent``): the envelope."""
    record: dict[str, object] = {
        "kind": kind,
        **{key: events.printable(cloud_event.get(key)) for key in ("type", "source", "id")},
    }
    if cloud_event.get("subject") is not None:  # optional in CloudEvents; Eventarc sets it for GCS
        record["subject"] = events.printable(cloud_event.get("subject"))
    return record


def _describe_event(cloud_event: CloudEvent) -> str:
    type_, source, event_id = (
        events.printable(cloud_event.get(key)) for key in ("type", "source", "id")
    )
    return f"CloudEvent {type_} from {source}, id {event_id}"
