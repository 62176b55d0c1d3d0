"""The persistent-resource rules, read live (docs/architecture.md, "The Vertex AI rules"):
``check_resource``.

The resource must exist and be RUNNING, share the job's network and CMEK key, have a pool whose
machine and boot disk equal each job pool's, and hold the replicas asked for.

No broken rule here rejects the run: this resource cannot take the job, and the chain moves on to
its next placement, as after a full pool. A missing, stopped or full resource is ``unavailable``
(it may take the job later: the run waits for it when no placement can take the job now). A
mismatch is ``unsuitable``: a persistent resource's network, CMEK key and pools are fixed when it
is created, while the template's network, key and machine are right for the chain's other
placements (FLEX_START, Spot and on-demand jobs run in any network with any key, on any machine
the rules allow), so rejecting the run would refuse a job the next placement can run; but the
resource will never take this job as written, so when no placement can take it and every reason
is a mismatch, submission rejects the run at once instead of waiting days for a retry that cannot
succeed. The network in particular is the VPC the job peers with; a resource created in another
VPC can never take it, but the service's own machines for the other placements can. Each message
says what would make the resource take the job (the template value to change, or the resource to
recreate).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from shared.aiplatform import (
    CustomJob,
    DiskSpec,
    MachineSpec,
    PersistentResource,
    ResourcePool,
    WorkerPoolSpec,
)
from shared.config.model import PersistentResourcePlacement
from shared.validation.subject import (
    DEFAULT_BOOT_DISK_SIZE_GB,
    DEFAULT_BOOT_DISK_TYPE,
    _accelerator,
    _machine_text,
    _pool_field,
    _used_pools,
)
from shared.validation.violations import Rule, Violation, ViolationKind


def _unavailable(field: str, rule: Rule, message: str) -> Violation:
    return Violation(field, rule, message, ViolationKind.UNAVAILABLE)


def _unsuitable(field: str, rule: Rule, message: str) -> Violation:
    return Violation(field, rule, message, ViolationKind.UNSUITABLE)


def _disk_key(disk: DiskSpec) -> tuple[str, int]:
    """A boot disk with Vertex's defaults filled in, so an unset disk equals pd-ssd 100 GB."""
    return (
        disk.boot_disk_type or DEFAULT_BOOT_DISK_TYPE,
        disk.boot_disk_size_gb or DEFAULT_BOOT_DISK_SIZE_GB,
    )


def _machine_key(spec: MachineSpec) -> tuple[str, str, int]:
    return (spec.machine_type, _accelerator(spec), spec.accelerator_count)


def _pool_ceiling(pool: ResourcePool) -> int:
    if "autoscaling_spec" in pool and pool.autoscaling_spec.max_replica_count:
        return pool.autoscaling_spec.max_replica_count
    return pool.replica_count


def check_resource(
    job: CustomJob, placement: PersistentResourcePlacement, resource: PersistentResource | None
) -> list[Violation]:
    """The rules read live from the persistent resource (docs/architecture.md, "The Vertex AI
    rules")."""
    if resource is None:
        return [
            _unavailable(
                "jobSpec.persistentResourceId",
                Rule.RESOURCE_EXISTS,
                f"persistent resource {placement.resource_id!r} was not found; create it, or "
                f"remove it from the template's placement chain",
            )
        ]
    return [
        *_resource_running(resource),
        *_resource_network(job, resource),
        *_resource_cmek(job, resource),
        *_resource_pools(job, resource),
    ]


def _resource_running(resource: PersistentResource) -> Iterator[Violation]:
    if resource.state != PersistentResource.State.RUNNING:
        yield _unavailable(
            "jobSpec.persistentResourceId",
            Rule.RESOURCE_RUNNING,
            f"persistent resource {resource.name} is {resource.state.name}, not RUNNING; the "
            f"next placement is tried (or wait until it runs again)",
        )


def _resource_network(job: CustomJob, resource: PersistentResource) -> Iterator[Violation]:
    spec = job.job_spec
    if spec.network != resource.network:
        yield _unsuitable(
            "jobSpec.network",
            Rule.RESOURCE_NETWORK,
            f"the job's network {_or_default(spec.network)} differs from persistent resource "
            f"{resource.name}'s {_or_default(resource.network)}; the next placement is tried "
            f"(to run here, set the template's jobSpec.network to the resource's)",
        )


def _resource_cmek(job: CustomJob, resource: PersistentResource) -> Iterator[Violation]:
    job_key = job.encryption_spec.kms_key_name
    resource_key = resource.encryption_spec.kms_key_name
    if job_key != resource_key:
        yield _unsuitable(
            "encryptionSpec.kmsKeyName",
            Rule.RESOURCE_CMEK,
            f"the job's CMEK key {_key_text(job_key)} differs from persistent resource "
            f"{resource.name}'s {_key_text(resource_key)}; the next placement is tried (to run "
            f"here, {_cmek_fix(resource_key)})",
        )


def _or_default(network: str) -> str:
    return repr(network) if network else "(the default network)"


def _key_text(key: str) -> str:
    return repr(key) if key else "(none: Google-managed encryption)"


def _cmek_fix(resource_key: str) -> str:
    if resource_key:
        return f"set the template's encryption_key to {resource_key!r}"
    return "remove the template's encryption_key, or recreate the resource with that key"


def _resource_pools(job: CustomJob, resource: PersistentResource) -> Iterator[Violation]:
    requested: dict[str, list[int]] = {}  # resource pool id -> indices of the job pools on it
    for index, pool in _used_pools(job):
        match = _matching_pool(pool, resource.resource_pools)
        if match is None:
            offered = "; ".join(
                f"{candidate.id}: {_machine_text(candidate.machine_spec)}, "
                f"{'/'.join(map(str, _disk_key(candidate.disk_spec)))} GB"
                for candidate in resource.resource_pools
            )
            yield _unsuitable(
                f"jobSpec.workerPoolSpecs[{index}]",
                Rule.RESOURCE_POOL_MATCH,
                f"worker pool {index} ({_machine_text(pool.machine_spec)}, "
                f"{'/'.join(map(str, _disk_key(pool.disk_spec)))} GB boot disk) matches no "
                f"pool of persistent resource {resource.name} exactly; the next placement is "
                f"tried (to run here, copy machineSpec and diskSpec from one of its pools: "
                f"{offered})",
            )
            continue
        requested.setdefault(match.id, []).append(index)
    pools_by_id = {pool.id: pool for pool in resource.resource_pools}
    for pool_id, indices in requested.items():
        yield from _pool_capacity(job, pools_by_id[pool_id], indices)


def _matching_pool(pool: WorkerPoolSpec, offered: Sequence[ResourcePool]) -> ResourcePool | None:
    wanted = (_machine_key(pool.machine_spec), _disk_key(pool.disk_spec))
    for candidate in offered:
        if (_machine_key(candidate.machine_spec), _disk_key(candidate.disk_spec)) == wanted:
            return candidate
    return None


def _pool_capacity(job: CustomJob, pool: ResourcePool, indices: list[int]) -> Iterator[Violation]:
    pools = job.job_spec.worker_pool_specs
    replicas = sum(pools[index].replica_count for index in indices)
    ceiling = _pool_ceiling(pool)
    free = ceiling - pool.used_replica_count
    field = _pool_field(indices[-1], "replicaCount")
    who = "worker pool " + ", ".join(map(str, indices))
    if replicas > ceiling:
        yield _unsuitable(
            field,
            Rule.RESOURCE_POOL_SIZE,
            f"{who} asks for {replicas} replicas on resource pool {pool.id!r}, which holds at "
            f"most {ceiling}; the next placement is tried (to run here, lower replicaCount to "
            f"{ceiling} or less, or grow the pool)",
        )
    elif replicas > free:
        yield _unavailable(
            field,
            Rule.RESOURCE_CAPACITY,
            f"{who} asks for {replicas} replicas on resource pool {pool.id!r}, where other jobs "
            f"use {pool.used_replica_count} of {ceiling}; the next placement is tried",
        )
