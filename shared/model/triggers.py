"""What can start (or continue) a run: the decoded form of every event the functions receive.

``shared.decode.events`` builds these from CloudEvents; ``shared.decode.routing`` matches them
against the config's routes. Plain frozen dataclasses: cheap to build, easy to write test tables
with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ObjectFinalized:
    """A Cloud Storage object was written (``google.cloud.storage.object.v1.finalized``)."""

    bucket: str
    name: str
    generation: int
    metageneration: int
    size: int
    event_id: str
    event_time: datetime | None = None
    content_type: str | None = None
    # When this generation was written (the object's ``updated``, Cloud Storage's clock), when
    # the event carries it: the time a quiet dataset's rule compares with its listings.
    updated: datetime | None = None


@dataclass(frozen=True)
class JobRequest:
    """A request on the requests topic to run a template with parameters."""

    message_id: str
    attributes: Mapping[str, str]
    body: Mapping[str, Any]
    publish_time: datetime | None = None
    idempotency_key: str | None = None  # the `idempotency_key` attribute, when the sender set one


@dataclass(frozen=True)
class ScheduleTick:
    """A Cloud Scheduler tick for a named schedule (its body or attributes name it)."""

    message_id: str
    schedule: str
    tick_time: datetime  # the scheduled time when the body carries it, else the publish time
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RetryRequest:
    """The job-state function asking dispatch to start the next attempt of an existing run."""

    message_id: str
    run_id: str
    attempt: int  # the attempt number to start (the first attempt is 1)
    placement_index: int  # index into the template's placement chain
    reason: str


Trigger = ObjectFinalized | JobRequest | ScheduleTick | RetryRequest
