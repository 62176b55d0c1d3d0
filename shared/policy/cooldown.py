"""The placement cooldown: a placement that just failed for capacity is tried last for a while.

After a stockout, an expired FLEX_START wait, a queue-watchdog cancel or a create refused for
capacity, the same placement (kind + region + machine) is likely to fail again for a while, so
new attempts try the other placements of their chain first (SkyPilot's ``EAGER_NEXT_REGION``
skips the region that just failed; docs/architecture.md, "Peers we learned from"). Pure rules:

- ``placement_key``: what identifies a placement across templates and runs: its kind, region and
  machine (type and GPUs; a persistent resource's id, a reservation's name stand for the machine:
  they fix it). Two templates with the same placement share its cooldown.
- ``cooldown_of``: how long: the template's ``cooldown``, else the config's (default 30m); 0 off.
- ``walk_order``: the order a walk tries the placements left: the ones not cooling, in chain
  order, then the cooling ones, in chain order. A cooling placement is never dropped: when
  every placement left is cooling, or after the others refused, it is tried all the same (the
  last one left is never skipped). ``passed_over`` names the cooling placements that some later
  placement goes before: those not reached when the walk ends are recorded as skips
  (``SkipClass.COOLDOWN``).
- ``untried_passed_over`` and ``walk_indices``: a placement a run passed over for cooldown stays
  owed a try until the run tries it, so a reordered walk never ends a run early.

The cooldowns themselves are kept in the ledger, shared by every instance
(``shared.model.cooldowns``); submission reads them only when more than one placement is left
to choose from, so a one-placement template pays no extra read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.config.model import (
    Config,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    Template,
)
from shared.config.placements import kind_of
from shared.model.cooldowns import Cooldown
from shared.model.runs import Attempt, SkipClass
from shared.policy.records import chain_record, placement_record

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
    return PlacementKey(kind_of(placement), region, _machine(placement, template))


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
    """``indices`` (the run's order: the chain's, or its learned one) with the cooling ones moved
    behind the others; see the module docstring. A cooling index with no placement after it in
    ``indices`` that is not cooling stays where the order puts it among the cooling ones, and is
    not passed over."""
    position = {index: at for at, index in enumerate(indices)}
    fresh = [index for index in indices if index not in cooling_indices]
    cooled = [index for index in indices if index in cooling_indices]
    passed_over = tuple(
        index for index in cooled if any(position[later] > position[index] for later in fresh)
    )
    return WalkOrder(order=(*fresh, *cooled), passed_over=passed_over)


def _region(placement: Placement, default_region: str) -> str:
    # A named reservation's placement has its zone's region already (ReservationPlacement).
    return placement.region or default_region


def _machine(placement: Placement, template: Template) -> str:
    """The machine type, with its GPUs when it names them (``n1-standard-8`` carries a T4 or a
    V100 alike: a V100 stockout must not cool the T4 placement)."""
    override = getattr(placement, "machine", None)
    if override is not None:
        return _machine_text(
            override.machine_type, override.accelerator_type, override.accelerator_count
        )
    pools = template.job_spec.get("workerPoolSpecs") or ()
    spec = pools[0].get("machineSpec", {}) if pools and isinstance(pools[0], Mapping) else {}
    return _machine_text(
        str(spec.get("machineType") or ""),
        spec.get("acceleratorType"),
        int(spec.get("acceleratorCount") or 0),
    )


def _machine_text(machine_type: str, accelerator: object, count: int) -> str:
    if not accelerator or accelerator == "ACCELERATOR_TYPE_UNSPECIFIED":
        return machine_type
    return f"{machine_type}+{accelerator}x{count}"


def untried_passed_over(template: Template, attempts: Sequence[Attempt]) -> tuple[int, ...]:
    """The chain indices a walk of this run passed over for cooldown (a ``cooldown`` skip on one
    of its attempts) that no attempt of the run has run on or been refused on since.

    A cooldown reorders a walk, so a run may move past a placement it never tried; when the
    placements after its last one are used up (or a retry starts further down the chain), these
    are still owed a try: ``decisions.decide`` does not call the chain exhausted while one is
    left, and submission's walk includes them (``walk_indices``)."""
    tried: list[Mapping[str, Any]] = []
    deferred: list[Mapping[str, Any]] = []
    for attempt in attempts:
        tried.append(chain_record(attempt.placement))
        for skip in attempt.skips:
            (deferred if skip.skip_class == SkipClass.COOLDOWN else tried).append(
                dict(skip.placement)
            )
    return tuple(
        index
        for index, placement in enumerate(template.placements)
        if (record := placement_record(placement)) in deferred and record not in tried
    )


def walk_indices(
    template: Template,
    first: int,
    attempts: Sequence[Attempt],
    order: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """The chain indices a walk from ``first`` tries: ``first`` to the end of the run's
    ``order`` (the chain's when None; a learned one, ``policy.placement_order``), and before them
    any placement earlier in the order this run passed over for cooldown and never tried
    (``untried_passed_over``), in that order."""
    walked = tuple(order) if order is not None else tuple(range(len(template.placements)))
    start = walked.index(first) if first in walked else len(walked)  # past the end: owed only
    owed = set(untried_passed_over(template, attempts))
    return (*(index for index in walked[:start] if index in owed), *walked[start:])
