"""Plain records of triggers and placements: what the ledger stores and alerts show.

Pure functions over the trigger and config dataclasses; Firestore stores the maps natively
(datetimes included), and the one-line descriptions are what a human reads in an alert.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from shared.config.durations import rest_duration
from shared.config.model import (
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
)
from shared.config.placements import PLACEMENT_KINDS  # a placement record's keys, one per kind
from shared.model.job_kinds import JobKind, kind_of_job_name
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger

CONSOLE_URL = (
    "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job_id}/cpu"
    "?project={project}"
)
"""Where a human looks at a CustomJob in the Google Cloud console."""
CONSOLE_URLS: dict[JobKind, str] = {
    JobKind.CUSTOM_JOB: CONSOLE_URL,
    JobKind.HYPERPARAMETER_TUNING_JOB: (
        "https://console.cloud.google.com/vertex-ai/locations/{region}/training/"
        "hyperparameter-tuning-jobs/{job_id}?project={project}"
    ),
    JobKind.TRAINING_PIPELINE: (
        "https://console.cloud.google.com/vertex-ai/locations/{region}/training/"
        "training-pipelines/{job_id}?project={project}"
    ),
}
"""The console page of each kind of job (the console's Training section lists each kind on a
tab of its own)."""


def console_url(job_name: str) -> str:
    """The Google Cloud console page of the job ``job_name`` (any kind; its collection says which
    page), for alerts to link to. A name of no known kind gets the CustomJob page."""
    parts = job_name.split("/")
    project, region, job_id = parts[1], parts[3], parts[-1]
    page = CONSOLE_URLS[kind_of_job_name(job_name) or JobKind.CUSTOM_JOB]
    return page.format(region=region, job_id=job_id, project=project)


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


DEADLINE_MAX_WAIT_KEY = "deadline_max_wait"
"""In a FLEX_START placement record: the max wait the job was created with when the run's
deadline cut the placement's own (``policy.deadlines``). The record keeps ``max_wait`` as the
chain has it, so that it still names its placement (``chain_record``)."""


def placement_record(
    placement: Placement, *, deadline_max_wait: timedelta | None = None
) -> dict[str, Any]:
    """A placement as a plain map, as the ledger and alerts show it.

    One key per kind (``PLACEMENT_KINDS``), holding what the config set; a spot, on-demand or
    reservation placement with nothing set is an empty map (``{"spot": {}}``). A reservation's
    region is always set (the zone's, see ``ReservationPlacement``), so it is recorded. A
    FLEX_START placement whose wait a deadline cut also records the cut wait
    (``DEADLINE_MAX_WAIT_KEY``).
    """
    if isinstance(placement, PersistentResourcePlacement):
        record: dict[str, Any] = {"persistent_resource": placement.resource_id}
        if placement.region:
            record["region"] = placement.region
        return record
    fields: dict[str, Any] = {}
    if isinstance(placement, FlexStartPlacement):
        fields["max_wait"] = rest_duration(placement.max_wait)
        if deadline_max_wait is not None:
            fields[DEADLINE_MAX_WAIT_KEY] = rest_duration(deadline_max_wait)
    if isinstance(placement, ReservationPlacement) and placement.name:
        fields["name"] = placement.name
    if placement.region:
        fields["region"] = placement.region
    if placement.machine:
        fields["machine"] = dataclasses.asdict(placement.machine)
    return {_KIND_KEYS[type(placement)]: fields}


def chain_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded placement as its chain's ``placement_record`` has it: without the wait a
    deadline cut (``DEADLINE_MAX_WAIT_KEY``), so that an attempt's placement is found in the
    chain however long its job was let wait."""
    plain = dict(record)
    flex = plain.get("flex_start")
    if isinstance(flex, Mapping) and DEADLINE_MAX_WAIT_KEY in flex:
        plain["flex_start"] = {k: v for k, v in flex.items() if k != DEADLINE_MAX_WAIT_KEY}
    return plain


_KIND_KEYS: dict[type, str] = {
    FlexStartPlacement: "flex_start",
    SpotPlacement: "spot",
    OnDemandPlacement: "on_demand",
    ReservationPlacement: "reservation",
}


def placement_kind(record: Mapping[str, Any]) -> str:
    """Which kind of placement a ``placement_record`` is: its key (one of ``PLACEMENT_KINDS``),
    the token logs and metrics group by; ``unknown`` for none of them."""
    return next((kind for kind in PLACEMENT_KINDS if kind in record), "unknown")


def describe_placement(placement: Placement) -> str:
    """One line naming a placement, for logs and messages."""
    where = f" in {placement.region}" if placement.region else ""
    if isinstance(placement, PersistentResourcePlacement):
        return f"persistent resource {placement.resource_id}{where}"
    machine = _machine_text(placement.machine)
    if isinstance(placement, FlexStartPlacement):
        return f"FLEX_START (max wait {rest_duration(placement.max_wait)}){where}{machine}"
    if isinstance(placement, SpotPlacement):
        return f"Spot VMs{where}{machine}"
    if isinstance(placement, OnDemandPlacement):
        return f"on demand (STANDARD){where}{machine}"
    if placement.name:
        return f"reservation {placement.name}{where}{machine}"
    return f"any matching reservation{where}{machine}"


def _machine_text(machine: MachineOverride | None) -> str:
    return f" on {machine.machine_type}" if machine else ""
