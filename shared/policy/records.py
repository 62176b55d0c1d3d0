"""Plain records of triggers and placements: what the ledger stores and alerts show.

Pure functions over the trigger and config dataclasses; Firestore stores the maps natively
(datetimes included), and the one-line descriptions are what a human reads in an alert.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from shared.config.durations import rest_duration
from shared.config.model import FlexStartPlacement, Placement
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger

PLACEMENT_KINDS = ("flex_start", "persistent_resource")
"""The keys of a placement record (``placement_record``): one per kind of placement."""

CONSOLE_URL = (
    "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job_id}/cpu"
    "?project={project}"
)
"""Where a human looks at a CustomJob in the Google Cloud console."""


def console_url(job_name: str) -> str:
    """The Google Cloud console page of the CustomJob ``job_name``, for alerts to link to."""
    parts = job_name.split("/")
    project, region, job_id = parts[1], parts[3], parts[-1]
    return CONSOLE_URL.format(region=region, job_id=job_id, project=project)


def trigger_record(trigger: Trigger) -> dict[str, Any]:
    """The trigger as a plain map, with its kind, for the ledger."""
    record = dataclasses.asdict(trigger)
    record["kind"] = type(trigger).__name__
    return record


def describe_trigger(trigger: Trigger) -> str:
    """One line saying what started (or continued) a run."""
    if isinstance(trigger, ObjectFinalized):
        return f"gs://{trigger.bucket}/{trigger.name} (generation {trigger.generation})"
    if isinstance(trigger, JobRequest):
        key = f", idempotency_key {trigger.idempotency_key}" if trigger.idempotency_key else ""
        return f"job request, message {trigger.message_id}{key}"
    if isinstance(trigger, ScheduleTick):
        return f"schedule {trigger.schedule} at {trigger.tick_time.isoformat()}"
    if isinstance(trigger, RetryRequest):
        why = f" ({trigger.reason})" if trigger.reason else ""
        return f"retry of run {trigger.run_id}, attempt {trigger.attempt}{why}"
    raise TypeError(f"not a trigger: {type(trigger).__name__}")


def placement_record(placement: Placement) -> dict[str, Any]:
    """A placement as a plain map, as the ledger and alerts show it."""
    if isinstance(placement, FlexStartPlacement):
        flex: dict[str, Any] = {"max_wait": rest_duration(placement.max_wait)}
        if placement.region:
            flex["region"] = placement.region
        if placement.machine:
            flex["machine"] = dataclasses.asdict(placement.machine)
        return {"flex_start": flex}
    record: dict[str, Any] = {"persistent_resource": placement.resource_id}
    if placement.region:
        record["region"] = placement.region
    return record


def placement_kind(record: Mapping[str, Any]) -> str:
    """Which kind of placement a ``placement_record`` is: its key (``flex_start`` or
    ``persistent_resource``), the token logs and metrics group by; ``unknown`` for neither."""
    return next((kind for kind in PLACEMENT_KINDS if kind in record), "unknown")


def describe_placement(placement: Placement) -> str:
    """One line naming a placement, for logs and messages."""
    if isinstance(placement, FlexStartPlacement):
        where = f" in {placement.region}" if placement.region else ""
        machine = f" on {placement.machine.machine_type}" if placement.machine else ""
        return f"FLEX_START (max wait {rest_duration(placement.max_wait)}){where}{machine}"
    where = f" in {placement.region}" if placement.region else ""
    return f"persistent resource {placement.resource_id}{where}"
