"""Validation: every rule a CustomJob must pass before anything is created, as plain data.

Each rule is one small function from the job (and its placement, guards and region) to the
``Violation``s it finds; ``validate_job`` composes them. A violation names the REST field path,
the rule, and what to change, and says whose move it is:

- ``invalid``: the template, the request or the guards are wrong; a human must change them;
- ``unavailable``: this placement cannot take the job now (its persistent resource is missing,
  not RUNNING or full); the placement chain moves on to the next placement.

The rules come from DESIGN.md §3 (FLEX_START, persistent resources, machine types, labels) and
from the config's guards. ``check_templates`` lints a whole config for ``vertex-dispatch validate``
without reading anything live.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from google.cloud.aiplatform_v1 import (
    CustomJob,
    DiskSpec,
    MachineSpec,
    PersistentResource,
    ResourcePool,
    Scheduling,
    WorkerPoolSpec,
)

from shared import machines
from shared.config.model import (
    Config,
    FlexStartPlacement,
    Guards,
    PersistentResourcePlacement,
    Placement,
    Template,
)
from shared.errors import InvalidJobSpec
from shared.jobspec import DISPLAY_NAME_MAX, is_skipped_pool, placeholders, render_job


class ViolationKind(enum.StrEnum):
    """Whose move a violation is."""

    INVALID = "invalid"  # a human must change the template, the request or the guards
    UNAVAILABLE = "unavailable"  # this placement cannot take the job now; try the next one


class Rule(enum.StrEnum):
    """The rule ids a violation carries; stable, for logs, alerts and tests."""

    JOB_SPEC = "job-spec"  # the template's job spec parses and renders
    WORKER_POOLS = "worker-pools"  # at least one worker pool; the first is not empty
    FIRST_POOL_REPLICAS = "first-pool-replicas"  # the chief pool runs exactly one replica
    REPLICAS = "replicas"  # every other used pool runs at least one replica
    PROGRAM = "program"  # each pool runs a container image or a Python package
    MACHINE_ACCELERATOR = "machine-accelerator"  # machine type and GPUs agree (shared.machines)
    HYPERDISK_BOOT_DISK = "hyperdisk-boot-disk"  # A3 Ultra and A4 boot from hyperdisk-balanced
    DISPLAY_NAME = "display-name"  # 1 to 128 characters
    LABELS = "labels"  # <= 64 labels; keys and values <= 63 of [a-z0-9_-]; keys start a-z
    PLACEMENT = "placement"  # the job carries the scheduling its placement asks for
    FLEX_START_GPU = "flex-start-gpu"  # DWS serves L4, A100, H100, H200 and B200 only
    FLEX_START_TIMEOUT = "flex-start-timeout"  # scheduling.timeout <= 7 days
    FLEX_START_SAME_MACHINE = "flex-start-same-machine"  # every pool on one machine configuration
    FLEX_START_MAX_WAIT = "flex-start-max-wait"  # maxWaitDuration set explicitly
    GUARD_IMAGE = "guard-image"  # images start with an allowed prefix
    GUARD_SERVICE_ACCOUNT = "guard-service-account"  # the job runs as an allowed account
    GUARD_REGION = "guard-region"  # the job runs in an allowed region
    GUARD_GPUS = "guard-gpus"  # GPUs of all replicas <= max_gpus_per_job
    GUARD_GPU_HOURS = "guard-gpu-hours"  # GPUs x timeout hours <= max_gpu_hours_per_job
    RESOURCE_EXISTS = "resource-exists"  # the persistent resource was found
    RESOURCE_RUNNING = "resource-running"  # ... and is RUNNING
    RESOURCE_NETWORK = "resource-network"  # the job's network and CMEK key are the resource's
    RESOURCE_POOL_MATCH = "resource-pool-match"  # machine and disk equal a resource pool's
    RESOURCE_POOL_SIZE = "resource-pool-size"  # replicas <= the pool's (max) replica count
    RESOURCE_CAPACITY = "resource-capacity"  # replicas <= what other jobs leave free


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (REST field path), which rule, and what to change."""

    field: str  # e.g. jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType
    rule: Rule
    message: str
    kind: ViolationKind = ViolationKind.INVALID

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.rule}, {self.kind}]"


# Vertex AI's defaults for what a job leaves unset (DESIGN.md §3 and the API reference).
DEFAULT_TIMEOUT: Final = timedelta(days=7)
DEFAULT_BOOT_DISK_TYPE: Final = "pd-ssd"
DEFAULT_BOOT_DISK_SIZE_GB: Final = 100
FLEX_START_MAX_TIMEOUT: Final = timedelta(days=7)
MAX_LABELS: Final = 64
LABEL_KEY: Final = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE: Final = re.compile(r"[a-z0-9_-]{0,63}")
NO_ACCELERATOR: Final = "ACCELERATOR_TYPE_UNSPECIFIED"


@dataclass(frozen=True)
class _Subject:
    """What every static rule looks at."""

    job: CustomJob
    placement: Placement
    guards: Guards
    region: str


StaticRule = Callable[[_Subject], Iterable[Violation]]


def _pool_field(index: int, path: str) -> str:
    return f"jobSpec.workerPoolSpecs[{index}].{path}"


def _used_pools(job: CustomJob) -> list[tuple[int, WorkerPoolSpec]]:
    """The pools that run something: Vertex lets a job leave a later pool empty (``{}``)."""
    return [
        (index, pool)
        for index, pool in enumerate(job.job_spec.worker_pool_specs)
        if index == 0 or not is_skipped_pool(pool)
    ]


def _accelerator(spec: MachineSpec) -> str:
    return spec.accelerator_type.name  # ACCELERATOR_TYPE_UNSPECIFIED when the pool has no GPU


def _machine_text(spec: MachineSpec) -> str:
    if _accelerator(spec) == NO_ACCELERATOR:
        return f"{spec.machine_type} without GPUs"
    return f"{spec.machine_type} with {spec.accelerator_count} x {_accelerator(spec)}"


def _gpus(pool: WorkerPoolSpec) -> int:
    accelerator = _accelerator(pool.machine_spec)
    if not machines.is_gpu(accelerator):
        return 0
    return pool.replica_count * pool.machine_spec.accelerator_count


def _timeout(job: CustomJob) -> timedelta:
    scheduling = job.job_spec.scheduling
    return scheduling.timeout if "timeout" in scheduling else DEFAULT_TIMEOUT


def _hours(duration: timedelta) -> str:
    return f"{duration.total_seconds() / 3600:g} h"


# --- the worker pools -----------------------------------------------------------------------


def check_worker_pools(subject: _Subject) -> Iterator[Violation]:
    pools = subject.job.job_spec.worker_pool_specs
    if not pools or pools[0] == WorkerPoolSpec():
        yield Violation(
            "jobSpec.workerPoolSpecs[0]",
            Rule.WORKER_POOLS,
            "the first worker pool is missing or empty; describe the chief's machine, replica "
            "count and container (or Python package) in workerPoolSpecs[0]",
        )


def check_replicas(subject: _Subject) -> Iterator[Violation]:
    for index, pool in _used_pools(subject.job):
        if index == 0 and pool.replica_count != 1:
            yield Violation(
                _pool_field(0, "replicaCount"),
                Rule.FIRST_POOL_REPLICAS,
                f"the first worker pool (the chief) must run exactly 1 replica, not "
                f"{pool.replica_count}; set replicaCount to 1 and put further workers in "
                f"workerPoolSpecs[1]",
            )
        elif index > 0 and pool.replica_count < 1:
            yield Violation(
                _pool_field(index, "replicaCount"),
                Rule.REPLICAS,
                f"worker pool {index} runs {pool.replica_count} replicas; set replicaCount to 1 "
                f"or more, or leave the whole pool empty ({{}}) to skip it",
            )


def check_program(subject: _Subject) -> Iterator[Violation]:
    for index, pool in _used_pools(subject.job):
        if "python_package_spec" in pool:
            package = pool.python_package_spec
            if not package.executor_image_uri:
                yield _missing(index, "pythonPackageSpec.executorImageUri", "an executor image")
            if not package.package_uris:
                yield _missing(index, "pythonPackageSpec.packageUris", "the package's gs:// URIs")
            if not package.python_module:
                yield _missing(index, "pythonPackageSpec.pythonModule", "the module to run")
        elif not pool.container_spec.image_uri:
            yield _missing(index, "containerSpec.imageUri", "the container image to run")


def _missing(index: int, path: str, what: str) -> Violation:
    return Violation(
        _pool_field(index, path),
        Rule.PROGRAM,
        f"worker pool {index} does not say {what}; set {path}",
    )


def check_machine_accelerator(subject: _Subject) -> Iterator[Violation]:
    for index, pool in _used_pools(subject.job):
        yield from _machine_accelerator(index, pool.machine_spec)


def _machine_accelerator(index: int, spec: MachineSpec) -> Iterator[Violation]:
    machine = spec.machine_type
    accelerator = _accelerator(spec)
    family = machines.machine_family(machine)
    fixed = machines.fixed_gpus(machine)
    type_field = _pool_field(index, "machineSpec.acceleratorType")
    count_field = _pool_field(index, "machineSpec.acceleratorCount")
    if not machine:
        yield Violation(
            _pool_field(index, "machineSpec.machineType"),
            Rule.MACHINE_ACCELERATOR,
            f"worker pool {index} names no machine type; set machineType, e.g. a2-highgpu-1g",
        )
    elif fixed is not None:
        if accelerator != fixed.accelerator_type:
            others = ", ".join(machines.machines_with(accelerator)) or "none"
            yield Violation(
                type_field,
                Rule.MACHINE_ACCELERATOR,
                f"{machine} comes with {fixed.accelerator_type}, not {accelerator}; set "
                f"acceleratorType to {fixed.accelerator_type}, or for {accelerator} pick one "
                f"of these machine types: {others}",
            )
        if spec.accelerator_count != fixed.count:
            yield Violation(
                count_field,
                Rule.MACHINE_ACCELERATOR,
                f"{machine} comes with {fixed.count} GPU(s), not {spec.accelerator_count}; set "
                f"acceleratorCount to {fixed.count}, or pick the {family} machine type with "
                f"{spec.accelerator_count} GPUs",
            )
    elif family in machines.FIXED_GPU_FAMILIES:
        known = ", ".join(
            name for name in machines.FIXED_GPU_MACHINES if name.startswith(f"{family}-")
        )
        yield Violation(
            _pool_field(index, "machineSpec.machineType"),
            Rule.MACHINE_ACCELERATOR,
            f"{machine} is not a known {family} machine type; use one of: {known}",
        )
    elif family in machines.ATTACHABLE_GPU_FAMILIES:
        yield from _attached_gpus(index, spec)
    elif family in machines.CPU_ONLY_FAMILIES and (
        accelerator != NO_ACCELERATOR or spec.accelerator_count
    ):
        yield Violation(
            type_field,
            Rule.MACHINE_ACCELERATOR,
            f"{machine} takes no GPUs; remove acceleratorType and acceleratorCount, or pick a "
            f"GPU machine type such as a2-highgpu-1g or g2-standard-8",
        )


def _attached_gpus(index: int, spec: MachineSpec) -> Iterator[Violation]:
    accelerator = _accelerator(spec)
    if accelerator == NO_ACCELERATOR:
        if spec.accelerator_count:
            yield Violation(
                _pool_field(index, "machineSpec.acceleratorType"),
                Rule.MACHINE_ACCELERATOR,
                f"acceleratorCount is {spec.accelerator_count} but no acceleratorType is set; "
                f"set one of: {', '.join(sorted(machines.ATTACHABLE_GPUS))}",
            )
        return
    if accelerator not in machines.ATTACHABLE_GPUS:
        yield Violation(
            _pool_field(index, "machineSpec.acceleratorType"),
            Rule.MACHINE_ACCELERATOR,
            f"{spec.machine_type} cannot carry {accelerator}; attach one of "
            f"{', '.join(sorted(machines.ATTACHABLE_GPUS))}, or pick a machine type built "
            f"with {accelerator}: {', '.join(machines.machines_with(accelerator)) or 'none'}",
        )
    if spec.accelerator_count not in machines.ATTACHABLE_GPU_COUNTS:
        yield Violation(
            _pool_field(index, "machineSpec.acceleratorCount"),
            Rule.MACHINE_ACCELERATOR,
            f"{spec.machine_type} takes 1, 2, 4 or 8 attached GPUs, not "
            f"{spec.accelerator_count}; set acceleratorCount to one of those",
        )


def check_hyperdisk(subject: _Subject) -> Iterator[Violation]:
    for index, pool in _used_pools(subject.job):
        machine = pool.machine_spec.machine_type
        disk_type = pool.disk_spec.boot_disk_type or DEFAULT_BOOT_DISK_TYPE
        if machine in machines.HYPERDISK_ONLY_MACHINES and (
            disk_type != machines.HYPERDISK_BOOT_DISK_TYPE
        ):
            yield Violation(
                _pool_field(index, "diskSpec.bootDiskType"),
                Rule.HYPERDISK_BOOT_DISK,
                f"{machine} boots from {machines.HYPERDISK_BOOT_DISK_TYPE} only, and this pool "
                f"asks for {disk_type}; set diskSpec.bootDiskType to "
                f"{machines.HYPERDISK_BOOT_DISK_TYPE}",
            )


# --- names and labels -----------------------------------------------------------------------


def check_display_name(subject: _Subject) -> Iterator[Violation]:
    length = len(subject.job.display_name)
    if not 1 <= length <= DISPLAY_NAME_MAX:
        yield Violation(
            "displayName",
            Rule.DISPLAY_NAME,
            f"the display name has {length} characters; Vertex AI takes 1 to "
            f"{DISPLAY_NAME_MAX}: change the template's display_name",
        )


def check_labels(subject: _Subject) -> Iterator[Violation]:
    labels = subject.job.labels
    if len(labels) > MAX_LABELS:
        yield Violation(
            "labels",
            Rule.LABELS,
            f"the job has {len(labels)} labels, Vertex AI takes at most {MAX_LABELS} (3 are "
            f"vertex-dispatch's own); remove {len(labels) - MAX_LABELS} from the template",
        )
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key):
            yield Violation(
                f"labels.{key}",
                Rule.LABELS,
                f"label key {key!r} must be 1 to 63 lowercase letters, digits, '_' or '-', "
                f"starting with a letter; rename it",
            )
        if not LABEL_VALUE.fullmatch(value):
            yield Violation(
                f"labels.{key}",
                Rule.LABELS,
                f"label value {value!r} must be at most 63 lowercase letters, digits, '_' or "
                f"'-'; change it",
            )


# --- placement and FLEX_START ---------------------------------------------------------------


def check_placement(subject: _Subject) -> Iterator[Violation]:
    spec = subject.job.job_spec
    strategy = spec.scheduling.strategy
    placement = subject.placement
    if isinstance(placement, PersistentResourcePlacement):
        if spec.persistent_resource_id != placement.resource_id:
            yield Violation(
                "jobSpec.persistentResourceId",
                Rule.PLACEMENT,
                f"the placement is persistent resource {placement.resource_id!r} but the job "
                f"names {spec.persistent_resource_id!r}; render the job for this placement",
            )
        if strategy == Scheduling.Strategy.FLEX_START:
            yield Violation(
                "jobSpec.scheduling.strategy",
                Rule.PLACEMENT,
                "a job on a persistent resource does not wait for FLEX_START capacity; remove "
                "scheduling.strategy",
            )
        return
    if strategy != Scheduling.Strategy.FLEX_START:
        yield Violation(
            "jobSpec.scheduling.strategy",
            Rule.PLACEMENT,
            f"the placement is flex_start but the strategy is {strategy.name}; set "
            f"scheduling.strategy to FLEX_START",
        )
    if spec.persistent_resource_id:
        yield Violation(
            "jobSpec.persistentResourceId",
            Rule.PLACEMENT,
            "a FLEX_START job does not run on a persistent resource; remove persistentResourceId",
        )


def check_flex_start_gpu(subject: _Subject) -> Iterator[Violation]:
    allowed = ", ".join(sorted(machines.FLEX_START_GPUS))
    for index, pool in _used_pools(subject.job):
        accelerator = _accelerator(pool.machine_spec)
        if accelerator not in machines.FLEX_START_GPUS:
            yield Violation(
                _pool_field(index, "machineSpec.acceleratorType"),
                Rule.FLEX_START_GPU,
                f"FLEX_START serves only L4, A100, H100, H200 and B200 GPUs ({allowed}), and "
                f"this pool asks for {accelerator}; pick one of those GPUs and a machine type "
                f"built with it, or place the job on a persistent resource",
            )


def check_flex_start_timeout(subject: _Subject) -> Iterator[Violation]:
    timeout = _timeout(subject.job)
    if timeout > FLEX_START_MAX_TIMEOUT:
        yield Violation(
            "jobSpec.scheduling.timeout",
            Rule.FLEX_START_TIMEOUT,
            f"FLEX_START jobs run for at most 7 days ({_hours(FLEX_START_MAX_TIMEOUT)}); the "
            f"timeout is {_hours(timeout)}: set the template's timeout to 7d or less",
        )


def check_flex_start_same_machine(subject: _Subject) -> Iterator[Violation]:
    pools = _used_pools(subject.job)
    if not pools:
        return
    first = pools[0][1].machine_spec
    for index, pool in pools[1:]:
        if pool.machine_spec != first:
            yield Violation(
                _pool_field(index, "machineSpec"),
                Rule.FLEX_START_SAME_MACHINE,
                f"FLEX_START needs every worker pool on the same machine configuration; pool 0 "
                f"uses {_machine_text(first)}, pool {index} uses "
                f"{_machine_text(pool.machine_spec)}: make them equal, or use a persistent "
                f"resource placement",
            )


def check_flex_start_max_wait(subject: _Subject) -> Iterator[Violation]:
    if "max_wait_duration" not in subject.job.job_spec.scheduling:
        yield Violation(
            "jobSpec.scheduling.maxWaitDuration",
            Rule.FLEX_START_MAX_WAIT,
            "FLEX_START without maxWaitDuration waits 1 day by Vertex AI's default; set the "
            "placement's max_wait explicitly (0 waits forever)",
        )


# --- guards ---------------------------------------------------------------------------------


def _images(job: CustomJob) -> Iterator[tuple[str, str]]:
    """(field path, image) for every used pool's container or executor image."""
    for index, pool in _used_pools(job):
        if "python_package_spec" in pool:
            path = "pythonPackageSpec.executorImageUri"
            yield _pool_field(index, path), pool.python_package_spec.executor_image_uri
        else:
            yield _pool_field(index, "containerSpec.imageUri"), pool.container_spec.image_uri


def check_guard_image(subject: _Subject) -> Iterator[Violation]:
    prefixes = subject.guards.image_prefixes
    if not prefixes:
        return
    for field, image in _images(subject.job):
        if image and not image.startswith(prefixes):  # a missing image is check_program's
            yield Violation(
                field,
                Rule.GUARD_IMAGE,
                f"image {image!r} does not start with an allowed prefix "
                f"({', '.join(prefixes)}); push it under one of them, or add its prefix to "
                f"guards.images",
            )


def check_guard_service_account(subject: _Subject) -> Iterator[Violation]:
    allowed = subject.guards.service_accounts
    account = subject.job.job_spec.service_account
    if allowed and account not in allowed:
        shown = repr(account) if account else "the Vertex AI default service agent"
        yield Violation(
            "jobSpec.serviceAccount",
            Rule.GUARD_SERVICE_ACCOUNT,
            f"the job would run as {shown}, which guards.service_accounts does not allow; set "
            f"the template's service account to one of: {', '.join(allowed)}",
        )


def check_guard_region(subject: _Subject) -> Iterator[Violation]:
    allowed = subject.guards.regions
    if allowed and subject.region not in allowed:
        yield Violation(
            "region",
            Rule.GUARD_REGION,
            f"region {subject.region!r} is not allowed (guards.regions: {', '.join(allowed)}); "
            f"set the placement's region to one of them, or add it to guards.regions",
        )


def check_guard_gpus(subject: _Subject) -> Iterator[Violation]:
    ceiling = subject.guards.max_gpus_per_job
    gpus = sum(_gpus(pool) for _, pool in _used_pools(subject.job))
    if ceiling is not None and gpus > ceiling:
        yield Violation(
            "jobSpec.workerPoolSpecs",
            Rule.GUARD_GPUS,
            f"the job asks for {gpus} GPUs over all replicas; guards.max_gpus_per_job allows "
            f"{ceiling}: lower replicaCount or acceleratorCount, or raise the guard",
        )


def check_guard_gpu_hours(subject: _Subject) -> Iterator[Violation]:
    ceiling = subject.guards.max_gpu_hours_per_job
    gpus = sum(_gpus(pool) for _, pool in _used_pools(subject.job))
    if ceiling is None or gpus == 0:
        return
    timeout = _timeout(subject.job)
    gpu_hours = gpus * timeout.total_seconds() / 3600
    if gpu_hours > ceiling:
        # A job without a timeout may run Vertex AI's default of 7 days: count that.
        unset = "" if "timeout" in subject.job.job_spec.scheduling else " (Vertex's default)"
        yield Violation(
            "jobSpec.scheduling.timeout",
            Rule.GUARD_GPU_HOURS,
            f"{gpus} GPUs for up to {_hours(timeout)}{unset} make {gpu_hours:g} GPU-hours; "
            f"guards.max_gpu_hours_per_job allows {ceiling:g}: set the template's timeout to "
            f"at most {ceiling / gpus:g} h, ask for fewer GPUs, or raise the guard",
        )


STATIC_RULES: Final[tuple[StaticRule, ...]] = (
    check_worker_pools,
    check_replicas,
    check_program,
    check_machine_accelerator,
    check_hyperdisk,
    check_display_name,
    check_labels,
    check_placement,
    check_guard_image,
    check_guard_service_account,
    check_guard_region,
    check_guard_gpus,
    check_guard_gpu_hours,
)
FLEX_START_RULES: Final[tuple[StaticRule, ...]] = (
    check_flex_start_gpu,
    check_flex_start_timeout,
    check_flex_start_same_machine,
    check_flex_start_max_wait,
)


# --- the persistent resource, read live -----------------------------------------------------


def _unavailable(field: str, rule: Rule, message: str) -> Violation:
    return Violation(field, rule, message, ViolationKind.UNAVAILABLE)


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
    """The rules read live from the persistent resource (DESIGN.md §3, seed 001)."""
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
        yield Violation(
            "jobSpec.network",
            Rule.RESOURCE_NETWORK,
            f"the job's network {spec.network!r} differs from the persistent resource's "
            f"{resource.network!r}; set the template's network to the resource's",
        )
    job_key = job.encryption_spec.kms_key_name
    resource_key = resource.encryption_spec.kms_key_name
    if job_key != resource_key:
        yield Violation(
            "encryptionSpec.kmsKeyName",
            Rule.RESOURCE_NETWORK,
            f"the job's CMEK key {job_key!r} differs from the persistent resource's "
            f"{resource_key!r}; use the resource's key",
        )


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
            yield Violation(
                f"jobSpec.workerPoolSpecs[{index}]",
                Rule.RESOURCE_POOL_MATCH,
                f"worker pool {index} ({_machine_text(pool.machine_spec)}, "
                f"{'/'.join(map(str, _disk_key(pool.disk_spec)))} GB boot disk) matches no "
                f"pool of persistent resource {resource.name} exactly; copy machineSpec and "
                f"diskSpec from one of its pools ({offered})",
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
        yield Violation(
            field,
            Rule.RESOURCE_POOL_SIZE,
            f"{who} asks for {replicas} replicas on resource pool {pool.id!r}, which holds at "
            f"most {ceiling}; lower replicaCount to {ceiling} or less, or grow the pool",
        )
    elif replicas > free:
        yield _unavailable(
            field,
            Rule.RESOURCE_CAPACITY,
            f"{who} asks for {replicas} replicas on resource pool {pool.id!r}, where other jobs "
            f"use {pool.used_replica_count} of {ceiling}; the next placement is tried",
        )


# --- composition ----------------------------------------------------------------------------


def validate_spec(
    job: CustomJob, placement: Placement, guards: Guards, *, region: str
) -> list[Violation]:
    """Every rule that needs nothing live: what ``vertex-dispatch validate`` can check offline."""
    subject = _Subject(job=job, placement=placement, guards=guards, region=region)
    rules = STATIC_RULES
    if isinstance(placement, FlexStartPlacement):
        rules += FLEX_START_RULES
    return [violation for rule in rules for violation in rule(subject)]


def validate_job(
    job: CustomJob,
    placement: Placement,
    guards: Guards,
    persistent_resource: PersistentResource | None = None,
    *,
    region: str,
) -> list[Violation]:
    """Every rule, the live persistent-resource ones included; an empty list means "create it".

    For a persistent-resource placement, ``persistent_resource`` is the resource as just read
    (None: it was not found). ``region`` is where the job would be created.
    """
    violations = validate_spec(job, placement, guards, region=region)
    if isinstance(placement, PersistentResourcePlacement):
        violations += check_resource(job, placement, persistent_resource)
    return violations


def verdict(violations: Iterable[Violation]) -> ViolationKind | None:
    """INVALID if a human must act, UNAVAILABLE if only this placement is blocked, else None."""
    kinds = {violation.kind for violation in violations}
    if ViolationKind.INVALID in kinds:
        return ViolationKind.INVALID
    return ViolationKind.UNAVAILABLE if kinds else None


def describe(violations: Iterable[Violation]) -> str:
    """One line per violation, for error messages, logs and alerts."""
    return "\n".join(str(violation) for violation in violations)


# --- linting a whole config -----------------------------------------------------------------

LINT_RUN_ID: Final = "r-000000000000000000000000"


@dataclass(frozen=True)
class TemplateProblem:
    """A violation found while linting: which template and which placement of its chain."""

    where: str  # e.g. templates.resnet-a100.placement[1]
    violation: Violation

    def __str__(self) -> str:
        return f"{self.where}: {self.violation}"


def check_templates(config: Config) -> list[TemplateProblem]:
    """Render every template for every placement with sample parameters and validate it.

    Live checks (the persistent resource's state, pools and capacity) are skipped: linting reads
    nothing from Google Cloud. A template that does not parse or render is one problem.
    """
    return [
        problem
        for template in config.templates.values()
        for problem in _check_template(config, template)
    ]


def _check_template(config: Config, template: Template) -> list[TemplateProblem]:
    where = f"templates.{template.name}"
    try:
        samples = {name: f"sample-{name}" for name in placeholders(template)}
    except InvalidJobSpec as error:
        return [TemplateProblem(where, Violation("jobSpec", Rule.JOB_SPEC, str(error)))]
    if not template.placements:
        return [
            TemplateProblem(
                where,
                Violation(
                    "placement",
                    Rule.PLACEMENT,
                    "the template has no placement; add persistent_resource or flex_start",
                ),
            )
        ]
    problems = []
    for index, placement in enumerate(template.placements):
        place = f"{where}.placement[{index}]"
        try:
            rendered = render_job(
                template,
                samples,
                placement,
                project=config.project,
                default_region=config.region,
                run_id=LINT_RUN_ID,
                attempt=1,
            )
        except InvalidJobSpec as error:
            problems.append(TemplateProblem(place, Violation("jobSpec", Rule.JOB_SPEC, str(error))))
            continue
        violations = validate_spec(
            rendered.custom_job, placement, config.guards, region=rendered.region
        )
        problems.extend(TemplateProblem(place, violation) for violation in violations)
    return problems
