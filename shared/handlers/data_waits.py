"""How a run WAITING_DATA stops waiting: the two ends every kind of data wait shares.

``shared.handlers.data_checks`` has the reconciler check each waiting run, by its kind: a quiet
dataset in ``shared.handlers.quiet_datasets``, a manifest's missing files in
``shared.handlers.manifest_waits``. Both end the same two ways, which live here so that the rule
is one:

- **ready** (``data_ready``): the run becomes ACCEPTED by compare-and-set (of two ticks, one
  wins), then the tick publishes its first attempt's retry message on the requests topic, which
  dispatch admits as any first attempt (``policy.admission``). A publish that fails is recovered
  by the never-claimed rule (``policy.due_retries``) ``RECOVERY_REPUBLISH_AFTER`` later;
- **overdue** (``data_timed_out``): waiting longer than the config's ``data_timeout``, the run
  ends FAILED with one ``data_timeout`` alert saying what is missing; a run that can never start
  (its manifest or its route gone) ends the same way, with its own reason (``end_data_wait``).
  Either end is a compare-and-set on the run still WAITING_DATA: a tick that read the run
  before another tick started it never fails it.
"""

from __future__ import annotations

import enum
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters import retry_messages
from shared.adapters.ledger import RunSnapshot
from shared.logs import log
from shared.model.alerts import AlertReason
from shared.model.data_waits import DataWait
from shared.model.runs import RetryPlan

if TYPE_CHECKING:
    from shared.handlers.services import Services

logger = logging.getLogger(__name__)


class DataCheck(enum.StrEnum):
    """What one check of a waiting run found (and did)."""

    WAITING = "waiting"  # still incomplete
    READY = "ready"  # complete: moved to ACCEPTED and its first attempt published
    TIMED_OUT = "timed_out"  # over data_timeout: ended FAILED, alerted
    ENDED = "ended"  # can never be complete (e.g. its route left the config): FAILED, alerted
    NOT_CHECKED = "not_checked"  # nothing to learn yet (e.g. cannot be quiet before a time)


def data_ready(services: Services, snapshot: RunSnapshot, wait: DataWait, now: datetime) -> None:
    """The run's data is complete (``wait``, completed): ACCEPTED, then its first attempt's
    retry published. ``LedgerConflict`` when another tick (or an operator) moved it first."""
    mark_ready(services, snapshot, wait, now)
    publish_first_attempt(services, snapshot.run.run_id, now)


def mark_ready(
    services: Services, snapshot: RunSnapshot, wait: DataWait, now: datetime
) -> RunSnapshot:
    """``data_ready``'s compare-and-set alone (for a caller with work between it and the
    publish): the run ACCEPTED with ``wait``, its recovery publish noted at ``now``."""
    run = snapshot.run
    ready = services.ledger.data_ready(snapshot, wait, now)
    labels = {"run_id": run.run_id, "route": run.route, "template": run.template}
    log(logger, logging.INFO, "data complete: run accepted", labels=labels)
    return ready


def publish_first_attempt(services: Services, run_id: str, now: datetime) -> None:
    """Publish the first attempt's retry message of a run made ready; a failure raises, and the
    never-claimed recovery publishes it again later (``policy.due_retries``)."""
    topic = services.config.requests_topic
    if topic is None:
        raise retry_messages.RetryNotPublished(
            f"run {run_id}'s data is complete, but the config sets no requests_topic to "
            "publish its first attempt on: set requests_topic to the topic dispatch listens on"
        )
    retry_messages.publish_retry(run_id, RetryPlan(now, 1, 0, "its data is complete"), topic)


def data_timed_out(
    services: Services, snapshot: RunSnapshot, now: datetime, *, missing: str, what_to_do: str
) -> None:
    """End a run whose data did not complete within ``data_timeout``: FAILED, alerted once.

    ``missing`` says what the data still lacks; ``what_to_do`` how to get the run going.
    """
    run = snapshot.run
    wait = run.data_wait
    since = wait.since if wait is not None else run.created_at or now
    end_data_wait(
        services,
        snapshot,
        reason=AlertReason.DATA_TIMEOUT,
        message=(
            f"run {run.run_id} waited for its data since {since.isoformat()}, longer than "
            f"data_timeout ({services.config.data_timeout}): {missing}"
        ),
        what_to_do=what_to_do,
    )


def end_data_wait(
    services: Services, snapshot: RunSnapshot, *, reason: str, message: str, what_to_do: str
) -> None:
    """End a run WAITING_DATA that can never start (its data overdue, its manifest or its route
    gone): FAILED by compare-and-set, only while it still waits, then alerted once (``reason``).

    ``LedgerConflict`` when the run moved on meanwhile (another tick found its data complete
    and dispatch started it): nothing is ended, nothing alerted.
    """
    from shared.handlers.actions import trigger_line
    from shared.handlers.rejections import alert_once

    ended = services.ledger.fail_data_wait(snapshot)
    alert_once(
        services.ledger,
        ended.run,
        config=services.config,
        trigger=trigger_line(ended.run),
        reason=reason,
        message=message,
        what_to_do=what_to_do,
    )
