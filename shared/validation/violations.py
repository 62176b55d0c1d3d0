"""Violations: what a broken rule reports, and how a list of them is judged.

A ``Violation`` names the REST field path, the ``Rule`` and what to change, and says whose move it
is (``ViolationKind``): ``invalid`` means a human must change the template, the request or the
guards; ``unsuitable`` means this placement can never take this job as written (the chain moves
on; with no placement left a human must act); ``unavailable`` means this placement cannot take the
job now and the placement chain moves on. ``verdict`` and ``describe`` turn a list of violations
into a decision and a message.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class ViolationKind(enum.StrEnum):
    """Whose move a violation is."""

    INVALID = "invalid"  # a human must change the template, the request or the guards
    # This placement can never take the job as written (a persistent resource or reservation of
    # another machine, network or key): try the next one, and when none can take it, a human
    # must change the template or the placement (submission rejects the run at once).
    UNSUITABLE = "unsuitable"
    UNAVAILABLE = "unavailable"  # this placement cannot take the job now; try the next one


class Rule(enum.StrEnum):
    """The rule ids a violation carries; stable, for logs, alerts and tests."""

    JOB_SPEC = "job-spec"  # the template's job spec parses and renders
    WORKER_POOLS = "worker-pools"  # at least one worker pool; the first is not empty
    FIRST_POOL_REPLICAS = "first-pool-replicas"  # the chief pool runs exactly one replica
    REPLICAS = "replicas"  # every other used pool runs at least one replica
    PROGRAM = "program"  # each pool runs a container image or a Python package
    MACHINE_ACCELERATOR = (
        "machine-accelerator"  # machine type and GPUs agree (shared.policy.machines)
    )
    HYPERDISK_BOOT_DISK = "hyperdisk-boot-disk"  # A3 Ultra and A4 boot from hyperdisk-balanced
    DISPLAY_NAME = "display-name"  # 1 to 128 characters
    LABELS = "labels"  # <= 64 labels; keys and values <= 63 of [a-z0-9_-]; keys start a-z
    PLACEMENT = "placement"  # the job carries the scheduling its placement asks for
    ENCRYPTION_KEY = "encryption-key"  # a CMEK key is in the job's own region
    FLEX_START_GPU = "flex-start-gpu"  # DWS serves L4, A100, H100, H200 and B200 only
    FLEX_START_TIMEOUT = "flex-start-timeout"  # scheduling.timeout <= 7 days
    FLEX_START_SAME_MACHINE = "flex-start-same-machine"  # every pool on one machine configuration
    FLEX_START_MAX_WAIT = "flex-start-max-wait"  # maxWaitDuration set explicitly
    SPOT_GPU = "spot-gpu"  # Spot serves the GPUs of model.accelerators.SPOT_GPUS only
    GUARD_IMAGE = "guard-image"  # images start with an allowed prefix
    GUARD_SERVICE_ACCOUNT = "guard-service-account"  # the job runs as an allowed account
    GUARD_REGION = "guard-region"  # the job runs in an allowed region
    # GPUs of all replicas (x parallel trials of a sweep) <= max_gpus_per_job
    GUARD_GPUS = "guard-gpus"
    # GPUs x timeout hours (x max trials of a sweep) <= max_gpu_hours_per_job
    GUARD_GPU_HOURS = "guard-gpu-hours"
    RESOURCE_EXISTS = "resource-exists"  # the persistent resource was found
    RESOURCE_RUNNING = "resource-running"  # ... and is RUNNING
    RESOURCE_NETWORK = "resource-network"  # the job's network is the resource's
    RESOURCE_CMEK = "resource-cmek"  # the job's CMEK key is the resource's
    RESOURCE_POOL_MATCH = "resource-pool-match"  # machine and disk equal a resource pool's
    RESOURCE_POOL_SIZE = "resource-pool-size"  # replicas <= the pool's (max) replica count
    RESOURCE_CAPACITY = "resource-capacity"  # replicas <= what other jobs leave free
    RESERVATION_EXISTS = "reservation-exists"  # the named reservation was found
    RESERVATION_READY = "reservation-ready"  # ... and is READY
    RESERVATION_MACHINE = "reservation-machine"  # its VMs' machine type and GPUs are the job's
    RESERVATION_CAPACITY = "reservation-capacity"  # replicas <= its free VMs (when readable)


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (REST field path), which rule, and what to change."""

    field: str  # e.g. jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType
    rule: Rule
    message: str
    kind: ViolationKind = ViolationKind.INVALID

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.rule}, {self.kind}]"


def verdict(violations: Iterable[Violation]) -> ViolationKind | None:
    """INVALID if a human must act on the job, UNSUITABLE if this placement can never take it,
    UNAVAILABLE if only this placement is blocked now, else None."""
    kinds = {violation.kind for violation in violations}
    for kind in (ViolationKind.INVALID, ViolationKind.UNSUITABLE, ViolationKind.UNAVAILABLE):
        if kind in kinds:
            return kind
    return None


def describe(violations: Iterable[Violation]) -> str:
    """One line per violation, for error messages, logs and alerts."""
    return "\n".join(str(violation) for violation in violations)
