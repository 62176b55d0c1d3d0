"""A template's placement chain: where to run, tried in order until one can take the job.

Users write::

    placement:
      - persistent_resource: a100-pool            # region defaults to the config's
      - flex_start: {max_wait: 2h}
      - flex_start:
          max_wait: 6h
          region: us-east4
          machine: {machine_type: a3-highgpu-1g, accelerator: {type: NVIDIA_H100_80GB, count: 1}}

``max_wait`` is required (docs/architecture.md, "The Vertex AI rules": the service default of one
day is easy to forget); ``0`` waits for as long as it takes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.config.fields import describe, read_duration, read_list, read_mapping, read_text
from shared.config.model import (
    FlexStartPlacement,
    MachineOverride,
    PersistentResourcePlacement,
    Placement,
)
from shared.config.problems import Problems, child, item
from shared.config.shorthand import MACHINE_TYPE, MACHINE_TYPE_RULE, read_accelerator

PLACEMENT_KINDS = ("persistent_resource", "flex_start")
PERSISTENT_RESOURCE_KEYS = frozenset({"persistent_resource", "region"})
FLEX_START_KEYS = frozenset({"max_wait", "region", "machine"})
MACHINE_KEYS = frozenset({"machine_type", "accelerator"})

REGION = re.compile(r"[a-z]+(-[a-z]+)+[0-9]+")
REGION_RULE = "a Google Cloud region such as us-central1 or europe-west4"
RESOURCE_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
RESOURCE_ID_RULE = (
    "a persistent resource ID: lowercase letters, digits and -, starting with a letter, "
    "at most 63 characters (the last part of projects/P/locations/R/persistentResources/ID)"
)


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
    """One entry of the chain: a ``persistent_resource`` or a ``flex_start``."""
    if not isinstance(value, Mapping):
        problems.add(
            path, f"expected persistent_resource: ID or flex_start: {{...}}, got {describe(value)}"
        )
        return None
    kinds = [kind for kind in PLACEMENT_KINDS if kind in value]
    if len(kinds) != 1:
        problems.add(
            path,
            "each placement names exactly one of persistent_resource or flex_start; "
            "split it into separate entries of the list",
        )
        return None
    if kinds[0] == "persistent_resource":
        return _persistent_resource(value, path, problems)
    return _flex_start(
        value["flex_start"], child(path, "flex_start"), problems, outer=value, outer_path=path
    )


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


def _flex_start(
    value: object,
    path: str,
    problems: Problems,
    *,
    outer: Mapping[str, Any],
    outer_path: str,
) -> FlexStartPlacement | None:
    for key in outer:
        if key != "flex_start":
            problems.add(child(outer_path, key), f"put {key} inside flex_start: {{...}}")
    if value is None:
        problems.add(path, 'needs max_wait, e.g. flex_start: {max_wait: 2h} ("0" waits forever)')
        return None
    flex = read_mapping(value, path, problems, allowed=FLEX_START_KEYS)
    if flex is None:
        return None
    max_wait = read_duration(flex.get("max_wait"), child(path, "max_wait"), problems, required=True)
    region = read_text(
        flex.get("region"), child(path, "region"), problems, pattern=REGION, rule=REGION_RULE
    )
    machine = None
    if flex.get("machine") is not None:
        machine = _machine_override(flex["machine"], child(path, "machine"), problems)
    if max_wait is None:
        return None
    return FlexStartPlacement(max_wait=max_wait, region=region, machine=machine)


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
