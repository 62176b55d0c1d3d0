"""What a CustomJob asks for: how it gets its machines, and how many GPUs or pool replicas.

Shared by the create-time checks and the simulation so that both read a job the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from google.cloud import aiplatform_v1

from vertex_ai_emulator.quota import QuotaKind

# The service's defaults for an unset disk_spec; a job and a resource pool that both leave it
# unset (or set these values) match.
DEFAULT_BOOT_DISK_TYPE = "pd-ssd"
DEFAULT_BOOT_DISK_SIZE_GB = 100

FLEX_START = aiplatform_v1.Scheduling.Strategy.FLEX_START
# Strategies whose machines count against the region's preemptible GPU quota (quota.py).
PREEMPTIBLE_STRATEGIES = frozenset({FLEX_START, aiplatform_v1.Scheduling.Strategy.SPOT})


class Placement(StrEnum):
    """Where a job's machines come from."""

    FLEX_START = "flex_start"  # Dynamic Workload Scheduler: waits for all its GPUs at once
    PERSISTENT_RESOURCE = "persistent_resource"  # replicas of an already running cluster
    ON_DEMAND = "on_demand"  # anything else: GPUs now, or a stockout


@dataclass(frozen=True)
class MachineConfig:
    """The machine and disk of one replica, with the service defaults filled in."""

    machine_type: str
    accelerator_type: str
    accelerator_count: int
    boot_disk_type: str
    boot_disk_size_gb: int

    @classmethod
    def of(
        cls, machine_spec: aiplatform_v1.MachineSpec, disk_spec: aiplatform_v1.DiskSpec
    ) -> MachineConfig:
        """The configuration a worker pool or a resource pool describes."""
        return cls(
            machine_type=machine_spec.machine_type,
            accelerator_type=aiplatform_v1.AcceleratorType(machine_spec.accelerator_type).name,
            accelerator_count=machine_spec.accelerator_count,
            boot_disk_type=disk_spec.boot_disk_type or DEFAULT_BOOT_DISK_TYPE,
            boot_disk_size_gb=disk_spec.boot_disk_size_gb or DEFAULT_BOOT_DISK_SIZE_GB,
        )

    @property
    def has_gpus(self) -> bool:
        """False for CPU-only machines, which never lack capacity in the emulator."""
        return (
            self.accelerator_count > 0 and self.accelerator_type != "ACCELERATOR_TYPE_UNSPECIFIED"
        )


def placement_of(job: aiplatform_v1.CustomJob) -> Placement:
    """How `job` gets its machines."""
    if job.job_spec.persistent_resource_id:
        return Placement.PERSISTENT_RESOURCE
    if job.job_spec.scheduling.strategy == FLEX_START:
        return Placement.FLEX_START
    return Placement.ON_DEMAND


def quota_kind_of(job: aiplatform_v1.CustomJob) -> QuotaKind | None:
    """The GPU quota `job` counts against; None on a persistent resource, which holds its
    machines already."""
    if job.job_spec.persistent_resource_id:
        return None
    if job.job_spec.scheduling.strategy in PREEMPTIBLE_STRATEGIES:
        return QuotaKind.PREEMPTIBLE
    return QuotaKind.ON_DEMAND


def is_placeholder_pool(index: int, pool: aiplatform_v1.WorkerPoolSpec) -> bool:
    """An empty pool spec after the first: the real API's way to skip a role in distributed
    training (e.g. workers but no parameter servers)."""
    return index > 0 and pool == aiplatform_v1.WorkerPoolSpec()


def active_pools(job: aiplatform_v1.CustomJob) -> list[tuple[int, aiplatform_v1.WorkerPoolSpec]]:
    """The worker pools that run replicas, with their index in `worker_pool_specs`."""
    return [
        (index, pool)
        for index, pool in enumerate(job.job_spec.worker_pool_specs)
        if not is_placeholder_pool(index, pool)
    ]


def machine_config(pool: aiplatform_v1.WorkerPoolSpec) -> MachineConfig:
    """The machine and disk every replica of `pool` runs on."""
    return MachineConfig.of(pool.machine_spec, pool.disk_spec)


def gpu_demand(job: aiplatform_v1.CustomJob) -> dict[str, int]:
    """GPUs the job needs at once, per accelerator type: sum of replicas x GPUs per replica."""
    demand: Counter[str] = Counter()
    for _, pool in active_pools(job):
        config = machine_config(pool)
        if config.has_gpus:
            demand[config.accelerator_type] += pool.replica_count * config.accelerator_count
    return dict(demand)


def resource_pool_capacity(pool: aiplatform_v1.ResourcePool) -> int:
    """Replicas a resource pool can run at most: its autoscaling maximum, else its size."""
    return pool.autoscaling_spec.max_replica_count or pool.replica_count


def matching_resource_pool(
    pool: aiplatform_v1.WorkerPoolSpec, resource: aiplatform_v1.PersistentResource
) -> aiplatform_v1.ResourcePool | None:
    """The first resource pool of `resource` whose machine and disk equal the worker pool's."""
    wanted = machine_config(pool)
    for candidate in resource.resource_pools:
        if MachineConfig.of(candidate.machine_spec, candidate.disk_spec) == wanted:
            return candidate
    return None


def resource_pool_demand(
    job: aiplatform_v1.CustomJob, resource: aiplatform_v1.PersistentResource
) -> dict[str, int]:
    """Replicas the job needs per resource pool id; worker pools with no match are left out
    (the create-time checks reject such jobs)."""
    demand: Counter[str] = Counter()
    for _, pool in active_pools(job):
        match = matching_resource_pool(pool, resource)
        if match is not None:
            demand[match.id] += pool.replica_count
    return dict(demand)
