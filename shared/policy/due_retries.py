"""When a retry message is due for a run: the one rule the owed actions and the reconciler share.

Three causes, read from the run as the ledger holds it:

- **planned**: the run's last decision planned a retry (``next_retry``) and its backoff has
  passed; ``actions.ensure_actions`` publishes it (and moves ``next_retry.at`` ahead by
  ``RETRY_REPUBLISH_AFTER``, so an unclaimed copy is published again, not every tick);
- **never claimed**: the run was accepted but no attempt was claimed within ``INTENT_LEASE``;
- **stale intent**: an attempt's intent outlived ``INTENT_LEASE`` without a job.

The last two are recoveries the reconcile tick publishes, each again only
``RECOVERY_REPUBLISH_AFTER`` after the last. Dispatch claims each attempt once, so a retry
published twice is harmless; these rules only keep the copies few.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from shared.config.durations import age_text
from shared.config.model import Template
from shared.model.runs import RETRY_WAITING_STATUSES, RetryPlan, Run, RunStatus
from shared.policy.decisions import PlacementNotInChain, placement_index
from shared.policy.timing import INTENT_LEASE, RECOVERY_REPUBLISH_AFTER


class RetryCause(enum.StrEnum):
    """Why a retry message is due."""

    PLANNED = "planned"  # the last decision planned it and its backoff has passed
    STALE_INTENT = "stale_intent"  # an intent outlived the lease with no job recorded
    NEVER_CLAIMED = "never_claimed"  # the run was accepted but no attempt was ever claimed


@dataclass(frozen=True)
class DueRetry:
    """A retry message to publish for a run."""

    run_id: str
    plan: RetryPlan
    cause: RetryCause


def due_retry(run: Run, template: Template | None, now: datetime) -> DueRetry | None:
    """The retry message ``run`` is due at ``now``, or None; ``template`` as the config has it
    now (None: it left the config, and a recovery starts the chain over)."""
    last = run.last_attempt
    planned = run.next_retry
    if run.status in RETRY_WAITING_STATUSES and planned is not None:
        return DueRetry(run.run_id, planned, RetryCause.PLANNED) if planned.at <= now else None
    if run.status is RunStatus.ACCEPTED and last is None:
        accepted_at = run.created_at or now
        if now - accepted_at < INTENT_LEASE or _recovery_in_flight(run, accepted_at, now):
            return None
        reason = f"reconcile: accepted {age_text(now - accepted_at)} ago and never claimed"
        return DueRetry(run.run_id, RetryPlan(now, 1, 0, reason), RetryCause.NEVER_CLAIMED)
    if run.status is RunStatus.SUBMITTING and last is not None and last.job_name is None:
        age = now - last.intent_at
        if age < INTENT_LEASE or _recovery_in_flight(run, last.intent_at, now):
            return None
        try:
            index = placement_index(template, last) if template is not None else 0
        except PlacementNotInChain:
            index = 0  # the chain changed: start over (dispatch refuses a gone template, alerted)
        reason = f"reconcile: attempt {last.number} has had no job for {age_text(age)}"
        return DueRetry(
            run.run_id, RetryPlan(now, last.number, index, reason), RetryCause.STALE_INTENT
        )
    return None


def _recovery_in_flight(run: Run, since: datetime, now: datetime) -> bool:
    """A recovery retry for the present condition (published after ``since``) went out less
    than ``RECOVERY_REPUBLISH_AFTER`` ago: dispatch has it, or will."""
    published = run.recovery_published_at
    return (
        published is not None and published >= since and now - published < RECOVERY_REPUBLISH_AFTER
    )
