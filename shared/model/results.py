"""What dispatching one event came to: the answer the Cloud Function maps to "return"."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DispatchOutcome(enum.StrEnum):
    """How one delivery ended; every member means "acknowledge the event"."""

    IGNORED = "ignored"  # matched no route: dropped at once
    SUBMITTED = "submitted"  # this delivery created the job
    REATTACHED = "reattached"  # an earlier delivery created the job; found by label and recorded
    DUPLICATE = "duplicate"  # the run already has this attempt's job, or is over
    WAITING = "waiting"  # no placement can take the job now; the run waits for a retry
    # recorded, waiting for its data: a quiet dataset's object opened or joined the waiting
    # version, or a manifest's files are not all there yet
    WAITING_DATA = "waiting_data"
    WAITING_BUDGET = "waiting_budget"  # over a GPU-hour budget: the run waits for it to free
    REJECTED = "rejected"  # a permanent error, recorded and alerted; nothing was created


@dataclass(frozen=True)
class DispatchResult:
    outcome: DispatchOutcome
    run_id: str | None = None
    job_name: str | None = None
    detail: str = ""
