"""GPU quota: how many GPUs of each type a project's jobs may hold at once in a region.

Quota is not capacity. Capacity (capacity.py) is what the region has; quota is what the project is
allowed. Google's "Understand the custom training service" page: without enough quota, "Vertex AI
keeps the job queued until you have sufficient quotas". So a job whose GPUs exceed the remaining
quota stays QUEUED until running jobs end (or the limit is raised), where a lack of capacity
fails an on-demand job with a stockout.

Two kinds, as Google's per-region quotas have them ("Custom model training <GPU> per region" and
its "preemptible" twin):

- ``preemptible``: FLEX_START (Dynamic Workload Scheduler) jobs, which Google's "Schedule training
  jobs based on resource availability" page says use the preemptible quota (e.g.
  ``custom_model_training_preemptible_nvidia_h100_gpus``) though their VMs are not preempted;
  and Spot jobs (the emulator's assumption, from Spot VMs being preemptible);
- ``on_demand``: every other job with GPUs.

Jobs on a persistent resource use none: the resource holds its machines already. A (kind, region,
accelerator) without a limit is unlimited, which is the default for everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

# What a create refused for quota says (`quota_when_exceeded: refuse`): the wording of the real
# service's 429, quoted by third-party reports; the metric names follow Google's per-region quota
# names ("custom_model_training_nvidia_a100_gpus", its "_preemptible_" twin).
QUOTA_EXCEEDED_MESSAGE = "The following quota metrics exceed quota limits: {metrics}"
# AcceleratorType names whose quota metric drops more than "TESLA_" (the H100s come in 80GB only).
_METRIC_GPU_NAMES = {
    "NVIDIA_H100_80GB": "nvidia_h100",
    "NVIDIA_H100_MEGA_80GB": "nvidia_h100_mega",
    "NVIDIA_H200_141GB": "nvidia_h200",
}

QuotaLimits = Mapping[str, Mapping[str, Mapping[str, int]]]  # {kind: {region: {accelerator: N}}}


class QuotaKind(StrEnum):
    """Which of a region's GPU quotas a job counts against."""

    ON_DEMAND = "on_demand"
    PREEMPTIBLE = "preemptible"


def quota_metric(kind: QuotaKind, accelerator: str) -> str:
    """The quota metric of a GPU type: aiplatform.googleapis.com/custom_model_training_
    [preemptible_]<gpu>_gpus, e.g. NVIDIA_TESLA_A100 -> ..._nvidia_a100_gpus."""
    gpu = _METRIC_GPU_NAMES.get(accelerator, accelerator.lower().replace("tesla_", ""))
    preemptible = "preemptible_" if kind == QuotaKind.PREEMPTIBLE else ""
    return f"aiplatform.googleapis.com/custom_model_training_{preemptible}{gpu}_gpus"


class GpuQuota:
    """GPU quota limits per (kind, region, accelerator type) and the GPUs each job counts."""

    def __init__(self, limits: QuotaLimits) -> None:
        self._limits: dict[tuple[QuotaKind, str, str], int] = {
            (QuotaKind(kind), region, accelerator): limit
            for kind, per_region in limits.items()
            for region, per_accelerator in per_region.items()
            for accelerator, limit in per_accelerator.items()
        }
        self._holds: dict[str, tuple[QuotaKind, str, dict[str, int]]] = {}

    def set_limit(self, kind: QuotaKind, region: str, accelerator: str, limit: int | None) -> None:
        """Limit the GPUs of this type that jobs of `kind` may hold in the region; None lifts
        the limit. A limit below what is held takes nothing from running jobs."""
        if limit is None:
            self._limits.pop((kind, region, accelerator), None)
            return
        if limit < 0:
            raise ValueError(f"quota cannot be negative, got {limit}")
        self._limits[(kind, region, accelerator)] = limit

    def limit(self, kind: QuotaKind, region: str, accelerator: str) -> int | None:
        """The limit, or None when unlimited."""
        return self._limits.get((kind, region, accelerator))

    def used(self, kind: QuotaKind, region: str, accelerator: str) -> int:
        """GPUs of this type that jobs of `kind` hold in the region now."""
        return sum(
            demand.get(accelerator, 0)
            for holder_kind, holder_region, demand in self._holds.values()
            if (holder_kind, holder_region) == (kind, region)
        )

    def fits(self, kind: QuotaKind, region: str, demand: Mapping[str, int]) -> bool:
        """Whether every accelerator type of `demand` is within the remaining quota at once."""
        for accelerator, count in demand.items():
            limit = self.limit(kind, region, accelerator)
            if limit is not None and self.used(kind, region, accelerator) + count > limit:
                return False
        return True

    def exceeded(self, kind: QuotaKind, region: str, demand: Mapping[str, int]) -> list[str]:
        """The accelerator types of `demand` over the remaining quota, sorted."""
        return sorted(
            accelerator
            for accelerator, count in demand.items()
            if not self.fits(kind, region, {accelerator: count})
        )

    def hold(self, holder: str, kind: QuotaKind, region: str, demand: Mapping[str, int]) -> None:
        """Count `demand` GPUs of `holder` (a job name) against the quota until `release`."""
        self._holds[holder] = (kind, region, dict(demand))

    def release(self, holder: str) -> None:
        """Stop counting whatever `holder` holds (nothing if it holds nothing)."""
        self._holds.pop(holder, None)

    def snapshot(self) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
        """{kind: {region: {accelerator: {limit, used, remaining}}}} for every limited pair."""
        view: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
        for (kind, region, accelerator), limit in sorted(self._limits.items()):
            used = self.used(kind, region, accelerator)
            view.setdefault(kind.value, {}).setdefault(region, {})[accelerator] = {
                "limit": limit,
                "used": used,
                "remaining": max(0, limit - used),
            }
        return view
