"""The side effects a run's recorded state requires, carried out idempotently.

``ensure_actions`` reads only the run as the ledger holds it, never an event, so it can be called
as often as anyone likes: by the job-state function right after it recorded a decision, and by
the reconciler on every tick, which redoes whatever a failed publish left undone. What it does:

- **alerts**: each decided attempt whose decision carries an alert, unless the run already sent
  an alert for that reason (``rejections.alert_once``: one alert per run and reason);
- **completion**: a succeeded run whose completion message is not yet among its ``notices``,
  when the config has a ``completions_topic``;
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
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.adapters import completions, retry_messages
from shared.handlers.rejections import alert_once
from shared.logs import log
from shared.model.alerts import Severity
from shared.model.errors import TransientError
from shared.model.runs import (
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


def ensure_actions(snapshot: RunSnapshot, services: Services) -> ActionsTaken:
    """Carry out what ``snapshot``'s run requires and has not had yet; see the module docstring.

    Raises ``TransientError`` after trying every action if any of them failed transiently.
    """
    run = snapshot.run
    failures: list[TransientError] = []
    alerts = _ensure_alerts(snapshot, services, failures)
    completion = _ensure_completion(run, services, failures)
    retry = _ensure_retry(snapshot, services, failures)
    if failures:
        raise failures[0]
    return ActionsTaken(alerts=alerts, completion_published=completion, retry_published=retry)


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


def _ensure_completion(run: Run, services: Services, failures: list[TransientError]) -> bool:
    topic = services.config.completions_topic
    succeeded = unpublished_completion(run)
    if topic is None or succeeded is None:
        return False
    try:
        completions.publish_completion(completions.completion_message(run, succeeded), topic)
    except TransientError as error:
        failures.append(error)
        return False
    services.ledger.record_notice(run.run_id, completions.NOTICE)
    log(logger, logging.INFO, "completion published", labels=_labels(run), topic=topic)
    return True


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
