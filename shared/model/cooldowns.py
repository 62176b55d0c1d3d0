"""Placements cooling down: what the ledger keeps of a placement that just failed for capacity.

Plain data, no cloud import. The rule that decides which placements cool down and what a walk
along the chain does with them is ``shared.policy.cooldown``; the store is the ledger
(``Ledger.placement_cooldowns``, ``Ledger.start_cooldown``), which keeps every placement's entry
in one small document, one map entry per placement key, each written by a merge so that
concurrent writers of different placements never clobber each other::

    vertex-dispatch-runs-placements/cooldowns
      placements: {KEY: {kind, region, machine, since, until, reason, run_id}}

``KEY`` is ``kind|region|machine`` (``policy.cooldown.PlacementKey.key``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

COOLDOWN_REASON_CHARS = 300
"""A cooldown's reason (the job's error, the service's refusal) is cut to this many characters."""


@dataclass(frozen=True)
class Cooldown:
    """A placement (kind + region + machine) that new attempts pass over until ``until``."""

    key: str  # kind|region|machine, the document's map key
    kind: str  # a placement kind (config.placements.PLACEMENT_KINDS)
    region: str
    machine: str  # machine type; a persistent resource's id or a reservation's name
    since: datetime  # when the capacity failure was seen
    until: datetime  # new attempts pass it over until then
    reason: str  # what failed, e.g. the stockout's message
    run_id: str = ""  # the run whose failure started it

    def __post_init__(self) -> None:
        if len(self.reason) > COOLDOWN_REASON_CHARS:
            object.__setattr__(self, "reason", self.reason[: COOLDOWN_REASON_CHARS - 1] + "…")


def cooldown_to_document(cooldown: Cooldown) -> dict[str, Any]:
    """One map entry of the cooldowns document (the key is the entry's name, not a field)."""
    return {
        "kind": cooldown.kind,
        "region": cooldown.region,
        "machine": cooldown.machine,
        "since": cooldown.since,
        "until": cooldown.until,
        "reason": cooldown.reason,
        "run_id": cooldown.run_id,
    }


def cooldowns_from_document(placements: Mapping[str, Any]) -> dict[str, Cooldown]:
    """The cooldowns of the document's ``placements`` map, by key; entries without a time
    (written by hand, or by a later version) are left out rather than guessed."""
    found: dict[str, Cooldown] = {}
    for key, entry in placements.items():
        if not isinstance(entry, Mapping):
            continue
        until, since = entry.get("until"), entry.get("since")
        if not isinstance(until, datetime):
            continue
        found[key] = Cooldown(
            key=key,
            kind=str(entry.get("kind") or ""),
            region=str(entry.get("region") or ""),
            machine=str(entry.get("machine") or ""),
            since=since if isinstance(since, datetime) else until,
            until=until,
            reason=str(entry.get("reason") or ""),
            run_id=str(entry.get("run_id") or ""),
        )
    return found
