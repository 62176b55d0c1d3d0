"""The placement cooldown: a placement that just failed for capacity is tried last for a while.

After a stockout, an expired FLEX_START wait, a queue-watchdog cancel or a create refused for
capacity, the same placement (kind + region + machine) is likely to fail again for a while, so
new attempts try the other placements of their chain first (SkyPilot's ``EAGER_NEXT_REGION``
skips the region that just failed; docs/architecture.md, "Peers we learned from"). Pure rules:

- ``placement_key``: what identifies a placement across templates and runs: its kind, region and
  machine type (a persistent resource's id, a reservation's name stand for the machine; they fix
  it). Two templates with the same placement share its cooldown.
- ``cooldown_of``: how long: the template's ``cooldown``, else the config's (default 30m); 0 off.
- ``walk_order``: the order a walk tries the placements left: the ones not cooling, in chain
  order, then the cooling ones, in chain order. A cooling placement is never dropped: when
  every placement left is cooling, or after the others refused, it is tried all the same (the
  last one left is never skipped). ``passed_over`` names the cooling placements that some later
  placement goes before: those are recorded as skips (``SkipClass.COOLDOWN``).

The cooldowns themselves are kept in the ledger, shared by every instance
(``shared.model.cooldowns``); submission reads them only when more than one placement is left
to choose from, so a one-placement template pays no extra read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.config.model import (
    Config,
    FlexStartPlacement,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
    Template,
)
from shared.model.cooldowns import Cooldown

KEY_SEPARATOR = "|"  # in none of a kind, a region, a machine type, a resource id or a name


@dataclass(frozen=True)
class PlacementKey:
    """What a cooldown is kept for: a placement's kind, region and machine."""

    kind: str
    region: str
    machine: str

    @property
    def key(self) -> str:
        """The ledger's map key: ``kind|region|machine``."""
        return KEY_SEPARATOR.join((self.kind, self.region, self.machine))


def cooldown_of(config: Config, template: Template) -> timedelta:
    """How long a placement of ``template`` cools down after a capacity failure (0: never)."""
    return template.cooldown if template.cooldown is not None else config.cooldown


def placement_key(placement: Placement, template: Template, default_region: str) -> PlacementKey:
    """The cooldown key of ``placement`` of ``template`` (``default_region``: the config's)."""
    region = _region(placement, default_region)
    if isinstance(placement, PersistentResourcePlacement):
        return PlacementKey("persistent_resource", region, placement.resource_id)
    if isinstance(placement, ReservationPlacement) and placement.name:
        return PlacementKey("reservation", region, placement.name)
    machine = _machine_type(placement, template)
    return PlacementKey(_kind(placement), region, machine)


def cooling(
    keys: Mapping[int, PlacementKey],
    cooldowns: Mapping[str, Cooldown],
    now: datetime,
    length: timedelta,
) -> dict[int, Cooldown]:
    """The placements (by chain index) still cooling down at ``now`` for a template whose
    cooldown is ``length``: their last capacity failure was less than ``length`` ago.

    Measured from the failure (``since``) with the reader's own length, so that a template's
    ``cooldown`` holds whichever template's run failed there (the recorded ``until`` is the
    writer's, for ``status --placements``). A length of 0 cools nothing."""
    found: dict[int, Cooldown] = {}
    if length <= timedelta(0):
        return found
    for index, key in keys.items():
        cooldown = cooldowns.get(key.key)
        if cooldown is not None and now < cooldown.since + length:
            found[index] = cooldown
    return found


@dataclass(frozen=True)
class WalkOrder:
    """The order a walk tries the placements left, and the cooling ones some later one precedes."""

    order: tuple[int, ...]
    passed_over: tuple[int, ...]


def walk_order(indices: Sequence[int], cooling_indices: Collection[int]) -> WalkOrder:
    """``indices`` (chain order) with the cooling ones moved behind the others; see the module
    docstring. A cooling index with no placement after it that is not cooling stays where the
    chain puts it among the cooling ones, and is not passed over."""
    fresh = [index for index in indices if index not in cooling_indices]
    cooled = [index for index in indices if index in cooling_indices]
    passed_over = tuple(index for index in cooled if any(later > index for later in fresh))
    return WalkOrder(order=(*fresh, *cooled), passed_over=passed_over)


def _kind(placement: Placement) -> str:
    if isinstance(placement, FlexStartPlacement):
        return "flex_start"
    if isinstance(placement, SpotPlacement):
        return "spot"
    if isinstance(placement, OnDemandPlacement):
        return "on_demand"
    if isinstance(placement, ReservationPlacement):
        return "reservation"
    return "persistent_resource"


def _region(placement: Placement, default_region: str) -> str:
    if placement.region:
        return placement.region
    if isinstance(placement, ReservationPlacement) and placement.name:
        # projects/P/zones/us-central1-a/reservations/N: the zone's region
        parts = placement.name.split("/")
        if len(parts) >= 4 and parts[2] == "zones" and parts[3].count("-") >= 2:
            return parts[3].rsplit("-", 1)[0]
    return default_region


def _machine_type(placement: Placement, template: Template) -> str:
    override = getattr(placement, "machine", None)
    if override is not None:
        return str(override.machine_type)
    pools = template.job_spec.get("workerPoolSpecs") or ()
    spec = pools[0].get("machineSpec", {}) if pools and isinstance(pools[0], Mapping) else {}
    return str(spec.get("machineType") or "")
