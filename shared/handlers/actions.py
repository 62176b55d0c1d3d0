"""The side effects a run's recorded state requires, carried out idempotently.

``ensure_actions`` reads only the run as the ledger holds it, never an event, so it can be called
as often as anyone likes: by the job-state function right after it recorded a decision, and by
the reconciler on every tick, which redoes whatever a failed publish left undone. What it does:

- **alerts**: each decided attempt whose decision carries an alert, unless the run already sent
  an alert for that reason (``rejections.alert_once``: one alert per run and reason);
- **completion**: a succeeded run whose completion message is not yet among its ``notices``,
  when the config has a ``completions_topic``; a sweep's or a pipeline's message carries what the
  job produced (the best trial, the uploaded model), read from Vertex AI when it is published
  (one read per published completion; a failed read fails that completion like a failed publish,
  and the next pass reads again, except for a job Vertex AI no longer has: see ``_job_result``).
  A caller that paces its Vertex AI calls (the reconciler's tick) passes ``VertexReads``: while
  it makes no calls, the read is not made and the completion waits (still owed) for a pass that
  may call;
- **retry**: a run WAITING_RETRY whose ``next_retry.at`` has passed, published to the requests
  topic; then ``next_retry.at`` moves ``RETRY_REPUBLISH_AFTER`` ahead, so the next tick does not
  publish it again while the message waits its turn (the claim that follows clears
  ``next_retry``). Publishing twice is harmless (dispatch claims each attempt once), but a copy
  per tick while ``on_request`` is behind would make its backlog grow without bound; the
  republish is only for a message that never led to a claim (dead-lettered, say). So that
  write must not be lost to the earlier actions' own writes (an alert recorded in the same
  pass): the ledger re-reads the run on a conflict and leaves a run that no longer waits for
  this retry as it is (``Ledger.record_retry_published``).

Each action is tried even when an earlier one failed; a transient failure is raised at the end,
so the delivery is retried and the actions that succeeded are not repeated (the ledger says so).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.adapters import completions, retry_messages
from shared.handlers.rejections import alert_once
from shared.logs import log
from shared.model.alerts import Severity
from shared.model.errors import PermanentError, PermissionMissing, TransientError
from shared.model.job_kinds import JobKind
from shared.model.runs import (
    Attempt,
    Run,
    RunSnapshot,
    unpublished_completion,
    unsent_alerts,
)
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger
from shared.policy.due_retries import RetryCause, due_retry
from shared.policy.records import describe_trigger
from shared.policy.timing import RETRY_REPUBLISH_AFTER

if TYPE_CHECKING:
    from shared.handlers.services import Services

NO_REQUESTS_TOPIC = "no_requests_topic"
"""The alert reason when a retry is due but the config names no topic to publish it on."""

_TRIGGER_KINDS: dict[str, type[Trigger]] = {
    kind.__name__: kind for kind in (ObjectFinalized, JobRequest, ScheduleTick, RetryRequest)
}

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActionsTaken:
    """What one pass of ``ensure_actions`` did (not what earlier passes had done)."""

    alerts: tuple[str, ...] = ()  # reasons sent now
    completion_published: bool = False
    retry_published: bool = False
    completion_deferred: bool = False  # owed, but its result read waits for Vertex AI calls


@dataclass
class VertexReads:
    """The Vertex AI reads one pass may make for completions, and what they met: the reconciler
    pauses its calls after a throttle, and counts every call it makes (``ReconcileReport``)."""

    allowed: bool = True  # False: make no call; a completion needing one waits, still owed
    made: int = 0  # calls made (a refused call counts: it drew on the request quota)
    throttled: bool = False  # a call was refused for a request quota (``VertexThrottled``)


def ensure_actions(
    snapshot: RunSnapshot, services: Services, *, vertex_reads: VertexReads | None = None
) -> ActionsTaken:
    """Carry out what ``snapshot``'s run requires and has not had yet; see the module docstring.

    ``vertex_reads``: the caller's pacing of Vertex AI reads, updated with the calls made
    (default: reads allowed, not reported). Raises ``TransientError`` after trying every action
    if any of them failed transiently.
    """
    run = snapshot.run
    reads = vertex_reads if vertex_reads is not None else VertexReads()
    failures: list[TransientError] = []
    alerts = _ensure_alerts(snapshot, services, failures)
    completion = _ensure_completion(run, services, reads, failures)
    retry = _ensure_retry(snapshot, services, failures)
    if failures:
        raise failures[0]
    return ActionsTaken(
        alerts=alerts,
        completion_published=completion is _Completion.PUBLISHED,
        retry_published=retry,
        completion_deferred=completion is _Completion.DEFERRED,
    )


def _ensure_alerts(
    snapshot: RunSnapshot, services: Services, failures: list[TransientError]
) -> tuple[str, ...]:
    run = snapshot.run
    sent: list[str] = []
    for alert in unsent_alerts(run):
        try:
            alert_once(
                services.ledger,
                snapshot.run,
                config=services.config,
                trigger=trigger_line(run),
                reason=alert["reason"],
                message=alert["message"],
                what_to_do=alert["what_to_do"],
                severity=Severity(alert.get("severity", Severity.ERROR.value)),
                attempt=_decided_by(run, alert["reason"]),
            )
        except TransientError as error:
            failures.append(error)
            continue
        sent.append(alert["reason"])
    return tuple(sent)


def _decided_by(run: Run, reason: str) -> int:
    """The attempt whose decision asks for the alert ``reason`` (the oldest, as
    ``unsent_alerts`` picks it): a decision never changes, so neither does the alert's id."""
    return next(
        a.number
        for a in run.attempts
        if ((a.decision or {}).get("alert") or {}).get("reason") == reason
    )


class _Completion(enum.Enum):
    NONE = "none"  # none owed, or no topic
    PUBLISHED = "published"
    DEFERRED = "deferred"  # its result needs a Vertex AI read the caller does not allow now
    FAILED = "failed"  # a transient failure, in ``failures``


def _ensure_completion(
    run: Run, services: Services, reads: VertexReads, failures: list[TransientError]
) -> _Completion:
    topic = services.config.completions_topic
    succeeded = unpublished_completion(run)
    if topic is None or succeeded is None:
        return _Completion.NONE
    reads_job = succeeded.job_kind is not JobKind.CUSTOM_JOB and succeeded.job_name is not None
    if reads_job and not reads.allowed:
        return _Completion.DEFERRED
    try:
        result = _job_result(run, succeeded, reads) if reads_job else None
        completions.publish_completion(
            completions.completion_message(run, succeeded, result), topic
        )
    except TransientError as error:
        failures.append(error)
        return _Completion.FAILED
    services.ledger.record_notice(run.run_id, completions.NOTICE)
    log(logger, logging.INFO, "completion published", labels=_labels(run), topic=topic)
    return _Completion.PUBLISHED


def _job_result(run: Run, succeeded: Attempt, reads: VertexReads) -> dict[str, Any] | None:
    """What the succeeded attempt's sweep or pipeline produced, read now (one call).

    Only a job Vertex AI no longer has (``VertexNotFound``: deleted) gets its completion without
    it, its result keys null, and a WARNING: there is nothing left to wait for. Any other failed
    read raises ``TransientError``, so the completion is not published this time and the next
    pass (the delivery's retry, the next reconcile tick) reads again: a permission denied (logged
    ERROR, naming the permission: IAM grants and their propagation fix it in minutes), a throttle,
    an outage. Publishing nulls then would lose a sweep's best trial for good."""
    from shared.adapters import vertex  # a CustomJob-only process never needs the adapter here

    job_name = succeeded.job_name
    assert job_name is not None  # the caller reads only a recorded job
    reads.made += 1
    try:
        return vertex.job_result(job_name)
    except vertex.VertexNotFound as error:
        log(
            logger,
            logging.WARNING,
            "completion published without the job's result: Vertex AI no longer has the job",
            labels=_labels(run),
            job=job_name,
            error=str(error),
        )
        return None
    except vertex.VertexThrottled:
        reads.throttled = True
        raise
    except PermanentError as error:
        permission = isinstance(error, PermissionMissing)
        log(
            logger,
            logging.ERROR,
            "completion not published: the job's result cannot be read"
            + ("; grant the permission the error names" if permission else ""),
            labels=_labels(run),
            job=job_name,
            error=str(error),
        )
        raise TransientError(
            f"reading the result of {job_name} for the completion of run {run.run_id} failed "
            f"(published once it can be read): {error}"
        ) from error


def _ensure_retry(
    snapshot: RunSnapshot, services: Services, failures: list[TransientError]
) -> bool:
    run = snapshot.run
    due = due_retry(run, services.config.templates.get(run.template), services.now())
    if due is None or due.cause is not RetryCause.PLANNED:
        return False  # a recovery is the reconcile tick's to publish
    plan = due.plan
    topic = services.config.requests_topic
    if topic is None:
        _alert_no_requests_topic(snapshot, services, failures)
        return False
    try:
        retry_messages.publish_retry(run.run_id, plan, topic)
    except TransientError as error:
        failures.append(error)
        return False
    try:
        services.ledger.record_retry_published(
            snapshot, plan, services.now() + RETRY_REPUBLISH_AFTER
        )
    except TransientError as error:
        failures.append(error)  # published all the same; at worst it is published again
    log(
        logger,
        logging.INFO,
        "retry published",
        labels=_labels(run),
        attempt=plan.attempt,
        placement_index=plan.placement_index,
        reason=plan.reason,
    )
    return True


def _alert_no_requests_topic(
    snapshot: RunSnapshot, services: Services, failures: list[TransientError]
) -> None:
    try:
        alert_once(
            services.ledger,
            snapshot.run,
            config=services.config,
            trigger=trigger_line(snapshot.run),
            reason=NO_REQUESTS_TOPIC,
            message=(
                f"run {snapshot.run.run_id} is due for a retry, but the config "
                f"{services.config.source} has no requests_topic to publish it on"
            ),
            what_to_do=(
                "set requests_topic in the config to the topic on_request listens to; the "
                "reconciler then publishes the retry on its next tick"
            ),
            severity=Severity.CRITICAL,
        )
    except TransientError as error:
        failures.append(error)


def trigger_line(run: Run) -> str:
    """One line saying what started ``run``, rebuilt from the trigger the ledger recorded."""
    record: dict[str, Any] = dict(run.trigger)
    kind = _TRIGGER_KINDS.get(str(record.pop("kind", "")))
    if kind is None:
        return run.run_key
    names = {field.name for field in dataclasses.fields(kind)}
    try:
        return describe_trigger(kind(**{k: v for k, v in record.items() if k in names}))
    except TypeError:  # a record written by an older version, missing a field
        return run.run_key


def _labels(run: Run) -> dict[str, str]:
    return {"run_id": run.run_id, "route": run.route, "template": run.template}
