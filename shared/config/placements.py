"""A template's placement chain: where to run, tried in order until one can take the job.

Users write::

    placement:
      - reservation: {name: projects/acme-ml/zones/us-central1-a/reservations/a100-res}
      - persistent_resource: a100-pool            # region defaults to the config's
      - spot: {region: us-east4}
      - flex_start: {max_wait: 2h}
      - flex_start:
          max_wait: 6h
          region: us-east4
          machine: {machine_type: a3-highgpu-1g, accelerator: {type: NVIDIA_H100_80GB, count: 1}}
      - on_demand:                                # "- spot:" or "- spot: {}": every default

``max_wait`` is required (docs/architecture.md, "The Vertex AI rules": the service default of one
day is easy to forget); ``0`` waits for as long as it takes. A reservation's ``name`` is the full
Compute Engine name ``projects/P/zones/Z/reservations/NAME``; its region is the zone's, and a
``region`` that says otherwise is an error (a job must be created where the reservation is).
Without a ``name`` the job takes any matching reservation of the region (ANY_RESERVATION).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.config.fields import (
    describe,
    read_duration,
    read_list,
    read_mapping,
    read_text,
    suggest,
)
from shared.config.model import (
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
)
from shared.config.problems import Problems, child, item
from shared.config.shorthand import MACHINE_TYPE, MACHINE_TYPE_RULE, read_accelerator
from shared.model.reservation_names import (
    reservation_name_pattern,
    reservation_region,
    reservation_zone,
)

PLACEMENT_KINDS = ("persistent_resource", "flex_start", "spot", "on_demand", "reservation")
PERSISTENT_RESOURCE_KEYS = frozenset({"persistent_resource", "region"})
FLEX_START_KEYS = frozenset({"max_wait", "region", "machine"})
SPOT_KEYS = frozenset({"region", "machine"})
ON_DEMAND_KEYS = frozenset({"region", "machine"})
RESERVATION_KEYS = frozenset({"name", "region", "machine"})
MACHINE_KEYS = frozenset({"machine_type", "accelerator"})

REGION = re.compile(r"[a-z]+(-[a-z]+)+[0-9]+")
REGION_RULE = "a Google Cloud region such as us-central1 or europe-west4"
RESOURCE_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
RESOURCE_ID_RULE = (
    "a persistent resource ID: lowercase letters, digits and -, starting with a letter, "
    "at most 63 characters (the last part of projects/P/locations/R/persistentResources/ID)"
)
# The reservation label Vertex AI matches a SPECIFIC_RESERVATION's values against (its
# ReservationAffinity.key reference: "To target a SPECIFIC_RESERVATION by name, use
# compute.googleapis.com/reservation-name"); the values hold the reservation's full name.
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"
RESERVATION_NAME_RULE = (
    "the reservation's full Compute Engine name, projects/PROJECT/zones/ZONE/reservations/NAME "
    "(e.g. projects/acme-ml/zones/us-central1-a/reservations/a100-res; `gcloud compute "
    "reservations describe NAME --zone ZONE` shows it as selfLink), or leave name out to take "
    "any matching reservation of the region"
)


_KEYS: Mapping[type, str] = {
    PersistentResourcePlacement: "persistent_resource",
    FlexStartPlacement: "flex_start",
    SpotPlacement: "spot",
    OnDemandPlacement: "on_demand",
    ReservationPlacement: "reservation",
}


def kind_of(placement: Placement) -> str:
    """The key a placement's kind is written under (one of ``PLACEMENT_KINDS``)."""
    return _KEYS[type(placement)]


# The old name (not to be confused with shared.policy.cooldown.placement_key, a cooldown key),
# kept so that work under way on policy/cooldown.py still imports; it goes when that moves over.


def read_placements(value: object, path: str, problems: Problems) -> tuple[Placement, ...] | None:
    """The ordered, non-empty chain; ``None`` when it is missing or wrong."""
    entries = read_list(value, path, problems)
    if entries is None:
        return None
    if not entries:
        problems.add(
            path, "is empty; list at least one placement, e.g. - flex_start: {max_wait: 2h}"
        )
        return None
    placements = [
        read_placement(entry, item(path, index), problems) for index, entry in enumerate(entries)
    ]
    if None in placements:
        return None
    return tuple(placement for placement in placements if placement is not None)


def read_placement(value: object, path: str, problems: Problems) -> Placement | None:
    """One entry of the chain: one of ``PLACEMENT_KINDS``."""
    if not isinstance(value, Mapping):
        problems.add(
            path,
            f"expected one of {_KINDS_TEXT} (e.g. flex_start: {{max_wait: 2h}}), "
            f"got {describe(value)}",
        )
        return None
    kinds = [kind for kind in PLACEMENT_KINDS if kind in value]
    if len(kinds) != 1:
        guess = "" if kinds else _misspelt_kind(value)
        problems.add(
            path,
            f"each placement names exactly one of {_KINDS_TEXT}{guess}; split it into separate "
            "entries of the list",
        )
        return None
    kind = kinds[0]
    if kind == "persistent_resource":
        return _persistent_resource(value, path, problems)
    _nothing_beside(kind, value, path, problems)
    inner, inner_path = value[kind], child(path, kind)
    if kind == "flex_start":
        return _flex_start(inner, inner_path, problems)
    if kind == "reservation":
        return _reservation(inner, inner_path, problems)
    return _spot_or_on_demand(kind, inner, inner_path, problems)


_KINDS_TEXT = ", ".join(PLACEMENT_KINDS[:-1]) + f" or {PLACEMENT_KINDS[-1]}"


def _misspelt_kind(value: Mapping[str, Any]) -> str:
    """ "; did you mean 'x'?" for the first key that looks like a misspelt kind."""
    for key in value:
        guess = suggest(str(key), PLACEMENT_KINDS)
        if guess:
            return guess
    return ""


def _nothing_beside(kind: str, outer: Mapping[str, Any], path: str, problems: Problems) -> None:
    """A kind written as ``kind: {...}`` keeps its keys inside: ``region`` beside it is a slip."""
    for key in outer:
        if key != kind:
            problems.add(child(path, key), f"put {key} inside {kind}: {{...}}")


def _persistent_resource(
    value: Mapping[str, Any], path: str, problems: Problems
) -> PersistentResourcePlacement | None:
    read_mapping(value, path, problems, allowed=PERSISTENT_RESOURCE_KEYS)
    resource_id = read_text(
        value.get("persistent_resource"),
        child(path, "persistent_resource"),
        problems,
        pattern=RESOURCE_ID,
        rule=RESOURCE_ID_RULE,
        required=True,
    )
    region = read_text(
        value.get("region"), child(path, "region"), problems, pattern=REGION, rule=REGION_RULE
    )
    if resource_id is None:
        return None
    return PersistentResourcePlacement(resource_id=resource_id, region=region)


def _flex_start(value: object, path: str, problems: Problems) -> FlexStartPlacement | None:
    if value is None:
        problems.add(path, 'needs max_wait, e.g. flex_start: {max_wait: 2h} ("0" waits forever)')
        return None
    flex = read_mapping(value, path, problems, allowed=FLEX_START_KEYS)
    if flex is None:
        return None
    max_wait = read_duration(flex.get("max_wait"), child(path, "max_wait"), problems, required=True)
    region = _region(flex, path, problems)
    machine = _machine(flex, path, problems)
    if max_wait is None:
        return None
    return FlexStartPlacement(max_wait=max_wait, region=region, machine=machine)


def _spot_or_on_demand(
    kind: str, value: object, path: str, problems: Problems
) -> SpotPlacement | OnDemandPlacement | None:
    """``spot`` or ``on_demand``: ``{region?, machine?}``; nothing written means every default."""
    allowed = SPOT_KEYS if kind == "spot" else ON_DEMAND_KEYS
    fields = read_mapping({} if value is None else value, path, problems, allowed=allowed)
    if fields is None:
        return None
    region = _region(fields, path, problems)
    machine = _machine(fields, path, problems)
    if problems.reported(path):
        return None
    if kind == "spot":
        return SpotPlacement(region=region, machine=machine)
    return OnDemandPlacement(region=region, machine=machine)


def _reservation(value: object, path: str, problems: Problems) -> ReservationPlacement | None:
    """``reservation: {name?, region?, machine?}``; the region defaults to the name's zone's."""
    fields = read_mapping({} if value is None else value, path, problems, allowed=RESERVATION_KEYS)
    if fields is None:
        return None
    name_path = child(path, "name")
    name = read_text(
        fields.get("name"),
        name_path,
        problems,
        pattern=reservation_name_pattern(),
        rule=RESERVATION_NAME_RULE,
    )
    region = _region(fields, path, problems)
    machine = _machine(fields, path, problems)
    zone_region = reservation_region(name) if name is not None else None
    if zone_region is not None and region is not None and region != zone_region:
        problems.add(
            child(path, "region"),
            f"is {region}, but reservation {name} is in zone {reservation_zone(name or '')} of "
            f"region {zone_region}: a job consumes a reservation only in its own region; set "
            f"region to {zone_region} or leave it out",
        )
    if problems.reported(path):
        return None
    return ReservationPlacement(name=name, region=region or zone_region, machine=machine)


def _region(fields: Mapping[str, Any], path: str, problems: Problems) -> str | None:
    return read_text(
        fields.get("region"), child(path, "region"), problems, pattern=REGION, rule=REGION_RULE
    )


def _machine(fields: Mapping[str, Any], path: str, problems: Problems) -> MachineOverride | None:
    if fields.get("machine") is None:
        return None
    return _machine_override(fields["machine"], child(path, "machine"), problems)


def _machine_override(value: object, path: str, problems: Problems) -> MachineOverride | None:
    machine = read_mapping(value, path, problems, allowed=MACHINE_KEYS, required=["machine_type"])
    if machine is None:
        return None
    machine_type = read_text(
        machine.get("machine_type"),
        child(path, "machine_type"),
        problems,
        pattern=MACHINE_TYPE,
        rule=MACHINE_TYPE_RULE,
    )
    accelerator: dict[str, Any] = {}
    if machine.get("accelerator") is not None:
        accelerator = read_accelerator(machine["accelerator"], child(path, "accelerator"), problems)
    if machine_type is None:
        return None
    return MachineOverride(
        machine_type=machine_type,
        accelerator_type=accelerator.get("acceleratorType"),
        accelerator_count=accelerator.get("acceleratorCount", 0),
    )
