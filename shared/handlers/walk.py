"""One delivery's walk along a template's placement chain for one attempt: what it submits
(``Submission``) and what it has seen so far (``Walk``), shared by ``handlers.submission``, which
walks, and ``handlers.walk_ends``, which ends a walk that created no job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shared.adapters.ledger import Ledger, PlacementSkip, RunSnapshot
from shared.config.model import Config, Placement, Template
from shared.model.runs import SkipClass
from shared.policy.records import describe_placement, placement_record


@dataclass(frozen=True)
class Submission:
    """What one pass of dispatch needs to submit an attempt of a run."""

    config: Config
    ledger: Ledger
    template: Template
    params: Mapping[str, str]
    trigger: str  # one line for alerts
    now: Callable[[], datetime]
    labels: Mapping[str, str] = field(default_factory=dict)  # log labels (run id, route)


@dataclass
class Walk:
    """One delivery's walk along the chain for one attempt: the run as this delivery last wrote
    it, the placements passed over so far (what the ledger records with the intent), and the
    lines an alert lists."""

    snapshot: RunSnapshot
    attempt_number: int
    now: Callable[[], datetime]
    skips: list[PlacementSkip] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    claimed: bool = False  # this delivery wrote the attempt's intent
    last_refusal: Mapping[str, str] | None = None  # the last create refused: message, class
    # Placements moved to the end of the walk for cooldown (by chain index), not reached yet:
    # recorded as skips only if the walk ends before it reaches them.
    cooling: dict[int, PlacementSkip] = field(default_factory=dict)

    def skip(self, placement: Placement, region: str, skip_class: SkipClass, reason: str) -> None:
        self.skips.append(self._skip(placement, region, skip_class, reason))
        self.lines.append(f"{describe_placement(placement)}: {reason}")

    def defer(self, index: int, placement: Placement, region: str, reason: str) -> None:
        """Placement ``index`` is cooling down: the walk tries it after the others."""
        self.cooling[index] = self._skip(placement, region, SkipClass.COOLDOWN, reason)

    def reach(self, index: int) -> None:
        """The walk has come to placement ``index``: a deferred one is no skip any more."""
        self.cooling.pop(index, None)

    def recorded_skips(self) -> tuple[PlacementSkip, ...]:
        """What the attempt records: the placements passed over, those still deferred last."""
        return (*self.skips, *self.cooling.values())

    def _skip(
        self, placement: Placement, region: str, skip_class: SkipClass, reason: str
    ) -> PlacementSkip:
        return PlacementSkip(
            placement_record(placement), region, skip_class.value, reason, self.now()
        )

    @property
    def reasons(self) -> str:
        return "\n".join(self.lines)
