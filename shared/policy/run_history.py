"""What an attempt's history says: how long its job took to start, the GPU-hours it spent, how it
ended. Pure readings of ``shared.model.runs.Attempt``'s history fields, shared by learned placement
order (``policy.placement_order``), GPU-hour budgets (``policy.budgets``), ``status --history``
and resume (``previous_output``: which earlier attempt a new one resumes from).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from shared.model.jobstates import JobStateName
from shared.model.runs import CREATED_EVENT, Attempt

SECONDS_PER_HOUR = 3600.0


def created_at(attempt: Attempt) -> datetime | None:
    """When the attempt's job was created: the service's create_time when recorded, else the
    history's CREATED event; None while no job exists."""
    if attempt.job_created_at is not None:
        return attempt.job_created_at
    return next((event.at for event in attempt.events if event.state == CREATED_EVENT), None)


def time_to_start(attempt: Attempt) -> timedelta | None:
    """How long the attempt's job waited for machines: from its create to RUNNING. None when it
    never started (still waiting, or ended before starting) or its times are not recorded."""
    created = created_at(attempt)
    if created is None or attempt.started_at is None:
        return None
    return max(attempt.started_at - created, timedelta(0))


def gpu_hours_spent(attempt: Attempt, now: datetime) -> float:
    """The GPU-hours the attempt's job held machines for: (end, or ``now`` while it runs) minus
    its start, times the GPUs it holds. 0 for a job that never started."""
    if attempt.started_at is None:
        return 0.0
    end = attempt.ended_at or now
    held = max((end - attempt.started_at).total_seconds(), 0.0)
    return attempt.gpus * held / SECONDS_PER_HOUR


def outcome_class(attempt: Attempt) -> str | None:
    """How the attempt ended, as ``policy.classify`` named it (``capacity``, ``user_code``, ...),
    or ``succeeded``; None while it has not ended."""
    if attempt.state == JobStateName.SUCCEEDED:
        return "succeeded"
    if attempt.error is not None and attempt.error.get("class"):
        return str(attempt.error["class"])
    return None


# The states a job reaches only by running first: a history holding one of them (or a current
# state among them) says the job started, even where its start time was not recorded.
_STATES_AFTER_RUNNING = frozenset(
    {JobStateName.RUNNING, JobStateName.SUCCEEDED, JobStateName.PARTIALLY_SUCCEEDED}
)


def started(attempt: Attempt) -> bool:
    """Whether the attempt's job ever ran: its start is recorded, or its history (or its state)
    holds RUNNING or a state only a job that ran reaches."""
    if attempt.started_at is not None:
        return True
    if attempt.state in _STATES_AFTER_RUNNING:
        return True
    return any(event.state in _STATES_AFTER_RUNNING for event in attempt.events)


def previous_output(attempts: Sequence[Attempt], attempt_number: int) -> str | None:
    """The output directory attempt ``attempt_number`` resumes from: that of the latest earlier
    attempt whose job started (only a job that ran can have left a checkpoint); None when no
    earlier attempt started or it recorded no output directory."""
    earlier = [a for a in attempts if a.number < attempt_number and started(a)]
    if not earlier:
        return None
    return max(earlier, key=lambda a: a.number).output_dir
