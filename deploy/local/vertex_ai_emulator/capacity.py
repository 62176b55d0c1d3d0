"""Regional GPU capacity: how many GPUs of each type a region has, and which jobs hold them.

`total` is the size of the region's pool of that accelerator; jobs that hold GPUs (from the start
of provisioning until they end) count against it, so `free = total - held`. Lowering a total below
what is held never takes GPUs from running jobs: `free` is then 0 until enough of them end.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

CapacityKey = tuple[str, str]  # (region, accelerator type name)


class GpuCapacity:
    """GPU totals per (region, accelerator type) and the GPUs each job holds."""

    def __init__(self, totals: Mapping[str, Mapping[str, int]], unlisted_total: int) -> None:
        self._unlisted_total = unlisted_total
        self._totals: dict[CapacityKey, int] = {
            (region, accelerator): count
            for region, per_accelerator in totals.items()
            for accelerator, count in per_accelerator.items()
        }
        self._holds: dict[str, tuple[str, dict[str, int]]] = {}

    def set_total(self, region: str, accelerator: str, count: int) -> None:
        """Make the region own `count` GPUs of this type in all (held ones included)."""
        if count < 0:
            raise ValueError(f"capacity cannot be negative, got {count}")
        self._totals[(region, accelerator)] = count

    def total(self, region: str, accelerator: str) -> int:
        """All GPUs of this type in the region, held or not."""
        return self._totals.get((region, accelerator), self._unlisted_total)

    def held(self, region: str, accelerator: str) -> int:
        """GPUs of this type in the region that jobs hold now."""
        return sum(
            demand.get(accelerator, 0)
            for holder_region, demand in self._holds.values()
            if holder_region == region
        )

    def free(self, region: str, accelerator: str) -> int:
        """GPUs of this type a new job could take in the region now."""
        return max(0, self.total(region, accelerator) - self.held(region, accelerator))

    def fits(self, region: str, demand: Mapping[str, int]) -> bool:
        """Whether every accelerator type of `demand` has enough free GPUs at once."""
        return all(self.free(region, accelerator) >= count for accelerator, count in demand.items())

    def hold(self, holder: str, region: str, demand: Mapping[str, int]) -> None:
        """Take `demand` GPUs for `holder` (a job name) until `release`."""
        self._holds[holder] = (region, dict(demand))

    def release(self, holder: str) -> None:
        """Give back whatever `holder` holds (nothing if it holds nothing)."""
        self._holds.pop(holder, None)

    def snapshot(self) -> dict[str, dict[str, dict[str, int]]]:
        """{region: {accelerator: {total, held, free}}} for every pair configured or in use."""
        keys = set(self._totals) | {
            (region, accelerator)
            for region, demand in self._holds.values()
            for accelerator in demand
        }
        view: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for region, accelerator in sorted(keys):
            view[region][accelerator] = {
                "total": self.total(region, accelerator),
                "held": self.held(region, accelerator),
                "free": self.free(region, accelerator),
            }
        return dict(view)
