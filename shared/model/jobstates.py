"""The states of a Vertex AI job, by the names the API uses, and how they group.

Every module that compares a job's state does it through this one enum (a ``StrEnum``, so a
member equals the name stored in the ledger, listed by Vertex AI or carried in a hint):
``aiplatform_v1.JobState`` is a proto enum that would import the protos to compare two strings.
"""

from __future__ import annotations

import enum
from typing import Final


class JobStateName(enum.StrEnum):
    """``aiplatform_v1.JobState`` by name (the REST API's spelling)."""

    UNSPECIFIED = "JOB_STATE_UNSPECIFIED"
    QUEUED = "JOB_STATE_QUEUED"  # created; waiting for its turn (or, under FLEX_START, for GPUs)
    PENDING = "JOB_STATE_PENDING"  # resources being provisioned
    RUNNING = "JOB_STATE_RUNNING"
    SUCCEEDED = "JOB_STATE_SUCCEEDED"
    FAILED = "JOB_STATE_FAILED"  # ``error`` is set about a minute after the end
    CANCELLING = "JOB_STATE_CANCELLING"
    CANCELLED = "JOB_STATE_CANCELLED"
    PAUSED = "JOB_STATE_PAUSED"
    EXPIRED = "JOB_STATE_EXPIRED"
    UPDATING = "JOB_STATE_UPDATING"
    PARTIALLY_SUCCEEDED = "JOB_STATE_PARTIALLY_SUCCEEDED"


TERMINAL_STATES: Final[frozenset[str]] = frozenset(
    {
        JobStateName.SUCCEEDED,
        JobStateName.FAILED,
        JobStateName.CANCELLED,
        JobStateName.EXPIRED,
        JobStateName.PARTIALLY_SUCCEEDED,
    }
)
"""The job will not change any more."""

WAITING_STATES: Final[frozenset[str]] = frozenset({JobStateName.QUEUED, JobStateName.PENDING})
"""Created but not started: waiting for capacity or for its machines."""


def is_terminal(state: str | enum.Enum) -> bool:
    """Whether a job state (an enum member or its name) is final."""
    name = state.name if isinstance(state, enum.Enum) and not isinstance(state, str) else state
    return name in TERMINAL_STATES
