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
SPOT = aiplatform_v1.Scheduling.Strategy.SPOT
AffinityType = aiplatform_v1.ReservationAffinity.Type
# Strategies whose machines count against the region's preemptible GPU quota (quota.py).
PREEMPTIBLE_STRATEGIES = frozenset({FLEX_START, aiplatform_v1.Scheduling.Strategy.SPOT})


class Placement(StrEnum):
    """Where a job's machines come from."""

    FLEX_START = "flex_start"  # Dynamic Workload Scheduler: waits for all its GPUs at once
    PERSISTENT_RESOURCE = "persistent_resource"  # replicas of an already running cluster
    SPOT = "spot"  # like on demand (GPUs now, or a stockout), and may be preempted
    RESERVATION = "reservation"  # VMs of a Compute Engine reservation (reservations.py)
    ON_DEMAND = "on_demand"  # anything else: GPUs now, or a stockout


@dataclass(frozen=True)
class ReservationRequest:
    """What a job's `machineSpec.reservationAffinity` asks for: a named reservation
    (SPECIFIC_RESERVATION), or any matching one (ANY_RESERVATION, `name` None)."""

    name: str | None
    replicas: int  # VMs it needs: one per replica
    machine: tuple[str, str, int]  # (machine type, AcceleratorType name or "", GPUs per VM)


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
    """How `job` gets its machines (an ANY_RESERVATION job is ON_DEMAND until the simulation
    finds it a reservation)."""
    if job.job_spec.persistent_resource_id:
        return Placement.PERSISTENT_RESOURCE
    if job.job_spec.scheduling.strategy == FLEX_START:
        return Placement.FLEX_START
    if job.job_spec.scheduling.strategy == SPOT:
        return Placement.SPOT
    if affinity_type_of(job) == AffinityType.SPECIFIC_RESERVATION:
        return Placement.RESERVATION
    return Placement.ON_DEMAND


def affinity_type_of(job: aiplatform_v1.CustomJob) -> AffinityType:
    """The reservation affinity of the job's first active pool that sets one (the create-time
    checks make every pool agree)."""
    for _, pool in active_pools(job):
        kind = AffinityType(pool.machine_spec.reservation_affinity.reservation_affinity_type)
        if kind != AffinityType.TYPE_UNSPECIFIED:
            return kind
    return AffinityType.TYPE_UNSPECIFIED


def reservation_request_of(job: aiplatform_v1.CustomJob) -> ReservationRequest | None:
    """The reservation the job asks for; None without SPECIFIC_ or ANY_RESERVATION affinity.
    Read after the create-time checks, which refuse pools that disagree."""
    kind = affinity_type_of(job)
    if kind not in (AffinityType.SPECIFIC_RESERVATION, AffinityType.ANY_RESERVATION):
        return None
    pools = active_pools(job)
    first = machine_config(pools[0][1])
    accelerator = first.accelerator_type if first.has_gpus else ""
    name = None
    if kind == AffinityType.SPECIFIC_RESERVATION:
        values = pools[0][1].machine_spec.reservation_affinity.values
        name = values[0] if values else ""
    return ReservationRequest(
        name=name,
        replicas=sum(pool.replica_count for _, pool in pools),
        machine=(first.machine_type, accelerator, first.accelerator_count if accelerator else 0),
    )


def quota_kind_of(job: aiplatform_v1.CustomJob) -> QuotaKind | None:
    """The GPU quota `job` counts against; None on a persistent resource, which holds its
    machines already."""
    if job.job_spec.persistent_resource_id:
        return None
    if placement_of(job) == Placement.RESERVATION:
        return None  # the reservation's VMs are set aside already
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
