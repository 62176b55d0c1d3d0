"""The watchdogs' rules: how long a job may stay queued, and what a run no placement takes is due.

Pure, so that each rule is a table of cases (docs/architecture.md, "Watchdogs"):

- ``queue_limit``: how long a job may stay QUEUED or PENDING before the reconciler cancels it
  and the run moves on as after a capacity failure. The template's ``max_queue`` when set (for
  every placement of its chain); otherwise, for a FLEX_START placement that bounds its wait, the
  max wait plus ``watchdog_grace`` (Vertex AI should have ended the job by then); otherwise (a
  persistent resource's queue, FLEX_START with ``max_wait: 0``) ``DEFAULT_MAX_QUEUE``, 24 h.
  A job without a max wait of its own is held to the run's deadline (``start_by``) when that
  comes first (``policy.deadlines``).
- ``no_placement_due``: for a run that has waited since ``no_placement_since`` for a placement
  that can take it, whether to alert now (after ``no_placement_alert``, then once in each
  following day) and whether to give up (after ``no_placement_give_up``).

An alert of a watchdog is claimed in the ledger under a key of its own (``alert_claim``), not
under its bare reason: the queue watchdog alerts once per attempt (a run may fall back onto a
placement that leaves it queued too), and the no-placement watchdog once per day of each wait.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from shared.aiplatform import CustomJob
from shared.config.model import DEFAULT_MAX_QUEUE, Config, Template
from shared.model.runs import Attempt
from shared.policy.deadlines import deadline_queue_limit
from shared.policy.max_wait import flex_start_max_wait

NO_PLACEMENT_REALERT_EVERY: Final = timedelta(days=1)
"""A run that still finds no placement is alerted again at most this often."""


class QueueLimitSource(enum.StrEnum):
    """Where a job's queue limit came from: said in the alert, so the fix is the right key."""

    MAX_QUEUE = "max_queue"  # the template's max_queue
    MAX_WAIT = "max_wait"  # the FLEX_START max wait plus watchdog_grace
    DEFAULT = "default"  # no max wait of its own: DEFAULT_MAX_QUEUE
    DEADLINE = "deadline"  # no max wait of its own, and the run's start_by comes first


@dataclass(frozen=True)
class QueueLimit:
    """How long a job may stay QUEUED or PENDING, and why that long."""

    limit: timedelta
    source: QueueLimitSource


def queue_limit(
    template: Template | None,
    job: CustomJob,
    attempt: Attempt | None,
    grace: timedelta,
    deadline: datetime | None = None,
) -> QueueLimit:
    """How long ``job`` (the job of ``attempt``, a run of ``template`` as the config has it now;
    None when it left the config) may stay QUEUED or PENDING; see the module docstring.

    ``deadline`` (the run's, while it binds: ``deadlines.deadline_of``) cuts the limit of a job
    without a max wait of its own to end at the deadline (``deadlines.deadline_queue_limit``,
    measured from the job's create_time); a FLEX_START job's max wait was cut when it was
    created, and the service ends it there."""
    max_wait = flex_start_max_wait(job, attempt)
    if template is not None and template.max_queue is not None:
        limit = QueueLimit(template.max_queue, QueueLimitSource.MAX_QUEUE)
    elif max_wait is not None:
        return QueueLimit(max_wait + grace, QueueLimitSource.MAX_WAIT)
    else:
        limit = QueueLimit(DEFAULT_MAX_QUEUE, QueueLimitSource.DEFAULT)
    created = job.create_time if job.create_time and job.create_time.timestamp() > 0 else None
    if max_wait is None and created is not None:
        cut = deadline_queue_limit(limit.limit, deadline, created)
        if cut is not None:
            return QueueLimit(cut, QueueLimitSource.DEADLINE)
    return limit


def describe_queue_limit(source: QueueLimitSource) -> str:
    """Where a queue limit came from, as an alert says it."""
    return {
        QueueLimitSource.MAX_QUEUE: "the template's max_queue",
        QueueLimitSource.MAX_WAIT: "its FLEX_START max wait plus the watchdog grace (Vertex AI "
        "should have ended it by then)",
        QueueLimitSource.DEFAULT: "the default max_queue of a placement without a max wait of "
        "its own (set max_queue on the template to change it)",
        QueueLimitSource.DEADLINE: "the run's deadline (start_by): a job not running by then "
        "is cancelled, and the run ends with a deadline_missed alert",
    }[source]


@dataclass(frozen=True)
class NoPlacementLimits:
    """When a run no placement takes is alerted, and when it is given up."""

    alert_after: timedelta
    give_up_after: timedelta


def no_placement_limits(config: Config, template: Template) -> NoPlacementLimits:
    """The template's own limits, else the config's."""
    return NoPlacementLimits(
        template.no_placement_alert or config.no_placement_alert,
        template.no_placement_give_up or config.no_placement_give_up,
    )


@dataclass(frozen=True)
class NoPlacementDue:
    """What a run that found no placement again is due: an alert (claimed under
    ``alert_claim``), giving up, or neither (both empty)."""

    waited: timedelta
    give_up: bool = False
    alert_claim: str | None = None  # claim this key, then alert; None: no alert is due


def no_placement_due(
    since: datetime, now: datetime, limits: NoPlacementLimits, reason: str
) -> NoPlacementDue:
    """What a run waiting for a placement since ``since`` is due at ``now``.

    From ``give_up_after`` on: give up (its final alert claimed once per wait). From
    ``alert_after`` on: the alert of the current day of the wait (day 0 from ``alert_after``,
    day 1 a day later, ...), each claimed once, so a run is alerted at most once a day however
    often dispatch retries it; a day missed (no retry came in it) is not made up.
    """
    waited = max(now - since, timedelta(0))
    if waited >= limits.give_up_after:
        return NoPlacementDue(waited, give_up=True, alert_claim=alert_claim(reason, since, "end"))
    if waited < limits.alert_after:
        return NoPlacementDue(waited)
    day = (waited - limits.alert_after) // NO_PLACEMENT_REALERT_EVERY
    return NoPlacementDue(waited, alert_claim=alert_claim(reason, since, f"day{day}"))


def alert_claim(reason: str, *scope: object) -> str:
    """The key an alert of ``reason`` is claimed under in the run's ``alerts`` when it may be
    sent more than once per run: ``reason@scope`` (an attempt, a wait's start and its day)."""
    parts = [_scope_text(part) for part in scope]
    return "@".join([reason, "/".join(parts)]) if parts else reason


def claim_reason(claim: str) -> str:
    """The alert reason a claim key (``alert_claim``) was made for."""
    return claim.split("@", 1)[0]


def _scope_text(part: object) -> str:
    if isinstance(part, datetime):
        return part.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(part)
