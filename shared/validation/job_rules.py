"""The rules on the job itself, for every placement: worker pools, replicas, program, machine
type and GPUs, hyperdisk boot disks, display name, labels, and the scheduling (strategy,
persistent resource, reservation affinity) its placement asks for.

Each is a ``StaticRule``: it reads nothing live. ``shared.validation.compose`` runs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Final

from shared.aiplatform import MachineSpec, ReservationAffinity, Scheduling, WorkerPoolSpec
from shared.config.encryption import key_location
from shared.config.model import (
    DISPLAY_NAME_MAX,
    PersistentResourcePlacement,
    ReservationPlacement,
)
from shared.config.placements import kind_of
from shared.policy import machines
from shared.policy.jobspec import reservation_affinity
from shared.validation.subject import (
    DEFAULT_BOOT_DISK_TYPE,
    NO_ACCELERATOR,
    _accelerator,
    _pool_field,
    _Subject,
    _used_pools,
)
from shared.validation.violations import Rule, Violation

MAX_LABELS: Final = 64
LABEL_KEY: Final = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE: Final = re.compile(r"[a-z0-9_-]{0,63}")


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
            yield Violation(
                type_field,
                Rule.MACHINE_ACCELERATOR,
                f"{machine} comes with {fixed.accelerator_type}, not {accelerator}; set "
                f"acceleratorType to {fixed.accelerator_type}, or for {accelerator} "
                f"{_machines_for(accelerator)}",
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


def _machines_for(accelerator: str) -> str:
    """Advice naming the machine types that can carry ``accelerator``: built in, or attached."""
    built_with = machines.machines_with(accelerator)
    # N1 GPUs are attached to any n1 machine type, so no table lists those machines by name.
    attached = [
        f"an {family}-* machine type" for family in sorted(machines.ATTACHABLE_GPU_FAMILIES)
    ]
    if built_with and accelerator in machines.ATTACHABLE_GPUS:
        return f"pick one of these machine types: {', '.join(built_with)}, or {attached[0]}"
    if built_with:
        return f"pick one of these machine types: {', '.join(built_with)}"
    if accelerator in machines.ATTACHABLE_GPUS:
        return f"pick {' or '.join(attached)} (e.g. n1-standard-8) and attach it there"
    return "no machine type is known to carry it: check the accelerator's name"


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


# --- encryption -----------------------------------------------------------------------------


def check_encryption_key(subject: _Subject) -> Iterator[Violation]:
    key = subject.job.encryption_spec.kms_key_name
    if not key:
        return
    location = key_location(key)
    if location != subject.region:
        yield Violation(
            "encryptionSpec.kmsKeyName",
            Rule.ENCRYPTION_KEY,
            f"the key {key} is in {location or 'no region'}, and the job is created in "
            f"{subject.region}: Vertex AI takes only a Cloud KMS key of the job's own region; "
            f"use a key in {subject.region}, or write locations/{{region}} in encryption_key "
            f"with a key ring of that name in every region of the chain",
        )


# --- placement ------------------------------------------------------------------------------


def check_placement(subject: _Subject) -> Iterator[Violation]:
    spec = subject.job.job_spec
    placement = subject.placement
    if isinstance(placement, PersistentResourcePlacement):
        yield from _persistent_resource_placement(subject, placement)
        return
    kind = kind_of(placement)
    strategy = spec.scheduling.strategy
    allowed = _STRATEGIES[kind]
    if strategy not in allowed:
        wanted = " or ".join(
            "no strategy" if name == Scheduling.Strategy.STRATEGY_UNSPECIFIED else name.name
            for name in allowed
        )
        yield Violation(
            "jobSpec.scheduling.strategy",
            Rule.PLACEMENT,
            f"the placement is {kind} but the strategy is {strategy.name}; set "
            f"scheduling.strategy to {wanted}",
        )
    if spec.persistent_resource_id:
        yield Violation(
            "jobSpec.persistentResourceId",
            Rule.PLACEMENT,
            f"a {kind} job does not run on a persistent resource; remove persistentResourceId",
        )
    if kind != "flex_start" and "max_wait_duration" in spec.scheduling:
        yield Violation(
            "jobSpec.scheduling.maxWaitDuration",
            Rule.PLACEMENT,
            f"maxWaitDuration is FLEX_START's wait for capacity; a {kind} job does not wait: "
            f"remove it",
        )
    yield from _reservation_affinity(subject, kind)


# The strategies each kind's job may carry (shared.policy.jobspec renders the first): a
# reservation's job leaves it unset, which Vertex AI reads as STANDARD.
_STRATEGIES: Final[Mapping[str, tuple[Scheduling.Strategy, ...]]] = {
    "flex_start": (Scheduling.Strategy.FLEX_START,),
    "spot": (Scheduling.Strategy.SPOT,),
    "on_demand": (Scheduling.Strategy.STANDARD,),
    "reservation": (Scheduling.Strategy.STRATEGY_UNSPECIFIED, Scheduling.Strategy.STANDARD),
}


def _persistent_resource_placement(
    subject: _Subject, placement: PersistentResourcePlacement
) -> Iterator[Violation]:
    spec = subject.job.job_spec
    if spec.persistent_resource_id != placement.resource_id:
        yield Violation(
            "jobSpec.persistentResourceId",
            Rule.PLACEMENT,
            f"the placement is persistent resource {placement.resource_id!r} but the job "
            f"names {spec.persistent_resource_id!r}; render the job for this placement",
        )
    if spec.scheduling.strategy == Scheduling.Strategy.FLEX_START:
        yield Violation(
            "jobSpec.scheduling.strategy",
            Rule.PLACEMENT,
            "a job on a persistent resource does not wait for FLEX_START capacity; remove "
            "scheduling.strategy",
        )


def _reservation_affinity(subject: _Subject, kind: str) -> Iterator[Violation]:
    """A reservation's job asks every used pool for its reservation; Spot and on-demand jobs
    ask for none (a reservation holds standard VMs: say so with a reservation placement)."""
    placement = subject.placement
    expected = (
        reservation_affinity(placement) if isinstance(placement, ReservationPlacement) else None
    )
    for index, pool in _used_pools(subject.job):
        affinity = pool.machine_spec.reservation_affinity
        field = _pool_field(index, "machineSpec.reservationAffinity")
        if expected is not None and affinity != expected:
            yield Violation(
                field,
                Rule.PLACEMENT,
                f"the placement is {describe_affinity(expected)} but worker pool {index} asks "
                f"for {describe_affinity(affinity)}; render the job for this placement",
            )
        elif expected is None and kind in ("spot", "on_demand") and _consumes(affinity):
            yield Violation(
                field,
                Rule.PLACEMENT,
                f"a {kind} job does not consume a reservation, and worker pool {index} asks "
                f"for {describe_affinity(affinity)}; remove reservationAffinity and add a "
                f"reservation placement to the chain instead",
            )


def _consumes(affinity: ReservationAffinity) -> bool:
    return affinity.reservation_affinity_type in (
        ReservationAffinity.Type.ANY_RESERVATION,
        ReservationAffinity.Type.SPECIFIC_RESERVATION,
    )


def describe_affinity(affinity: ReservationAffinity) -> str:
    """How a pool's reservationAffinity reads in a message."""
    kind = affinity.reservation_affinity_type
    if kind == ReservationAffinity.Type.SPECIFIC_RESERVATION:
        return f"reservation {', '.join(affinity.values) or '(no name)'}"
    if kind == ReservationAffinity.Type.ANY_RESERVATION:
        return "any matching reservation"
    if kind == ReservationAffinity.Type.NO_RESERVATION:
        return "no reservation"
    return "no reservationAffinity"
