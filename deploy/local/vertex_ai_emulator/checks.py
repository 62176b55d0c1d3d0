"""The checks the real service makes on CreateCustomJob, with its error codes and message style.

Field errors are gathered and reported together in the service's format
(`List of found errors:\t1.Field: custom_job.display_name; Message: Required field is not set.\t`),
one stage at a time: the job's own fields, then the FLEX_START rules, then the persistent resource.
Only checks the real service is known to make live here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import failed_precondition, invalid_argument
from vertex_ai_emulator.persistent import RUNNING
from vertex_ai_emulator.placement import (
    FLEX_START,
    active_pools,
    machine_config,
    matching_resource_pool,
    resource_pool_capacity,
)

MAX_DISPLAY_NAME_LENGTH = 128
MAX_LABELS = 64
MAX_LABEL_LENGTH = 63
# The emulator stands for Google's service and keeps its own copy of the documented FLEX_START
# rules, so that a mistake in the library's tables is caught by the emulator, not mirrored by it;
# tests/unit/emulator/test_core_checks.py holds the two copies equal (shared.policy.machines and
# shared.validation.flex_start), so a change to either is a deliberate change to both.
FLEX_START_MAX_TIMEOUT = timedelta(days=7)
FLEX_START_ACCELERATORS = frozenset(
    {
        "NVIDIA_L4",
        "NVIDIA_TESLA_A100",
        "NVIDIA_A100_80GB",
        "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB",
        "NVIDIA_H200_141GB",
        "NVIDIA_B200",
    }
)

REQUIRED = "Required field is not set"

PersistentResourceLookup = Callable[[str], aiplatform_v1.PersistentResource | None]


@dataclass(frozen=True)
class FieldViolation:
    """One broken rule, on one field of the request."""

    field: str
    message: str


def check_new_job(
    job: aiplatform_v1.CustomJob,
    persistent_resource_name: str | None,
    lookup_persistent_resource: PersistentResourceLookup,
) -> None:
    """Raise EmulatorError if the service would refuse to create `job`.

    `persistent_resource_name` is the canonical name `job_spec.persistent_resource_id` refers to
    (None when the job does not use one).
    """
    _raise_if_any(_field_violations(job))
    if job.job_spec.scheduling.strategy == FLEX_START:
        _raise_if_any(_flex_start_violations(job))
    if persistent_resource_name is not None:
        _check_persistent_resource(
            job, persistent_resource_name, lookup_persistent_resource(persistent_resource_name)
        )


def format_violations(violations: list[FieldViolation]) -> str:
    """The real service's way of listing field errors in one message."""
    listed = "".join(
        f"{number}.Field: {violation.field}; Message: {violation.message}.\t"
        for number, violation in enumerate(violations, start=1)
    )
    return f"List of found errors:\t{listed}"


def _raise_if_any(violations: list[FieldViolation]) -> None:
    if violations:
        raise invalid_argument(format_violations(violations))


def _field_violations(job: aiplatform_v1.CustomJob) -> list[FieldViolation]:
    violations = []
    if not job.display_name:
        violations.append(FieldViolation("custom_job.display_name", REQUIRED))
    elif len(job.display_name) > MAX_DISPLAY_NAME_LENGTH:
        violations.append(
            FieldViolation(
                "custom_job.display_name",
                f"The display name is too long: {len(job.display_name)} characters, "
                f"the maximum is {MAX_DISPLAY_NAME_LENGTH}",
            )
        )
    violations += _label_violations(job.labels)
    if not job.job_spec.worker_pool_specs:
        violations.append(FieldViolation("custom_job.job_spec.worker_pool_specs", REQUIRED))
    for index, pool in active_pools(job):
        violations += _pool_violations(index, pool)
    return violations


def _pool_violations(index: int, pool: aiplatform_v1.WorkerPoolSpec) -> list[FieldViolation]:
    where = f"custom_job.job_spec.worker_pool_specs[{index}]"
    violations = []
    if not pool.machine_spec.machine_type:
        violations.append(FieldViolation(f"{where}.machine_spec.machine_type", REQUIRED))
    if not pool.container_spec.image_uri and "python_package_spec" not in pool:
        violations.append(
            FieldViolation(
                f"{where}.container_spec.image_uri",
                "Either container_spec or python_package_spec must be set",
            )
        )
    if index == 0 and pool.replica_count != 1:
        violations.append(
            FieldViolation(
                f"{where}.replica_count",
                f"The first worker pool runs the primary replica; its replica_count must be 1, "
                f"got {pool.replica_count}",
            )
        )
    return violations


def _label_violations(labels: dict[str, str]) -> list[FieldViolation]:
    violations = []
    if len(labels) > MAX_LABELS:
        violations.append(
            FieldViolation(
                "custom_job.labels", f"At most {MAX_LABELS} labels are allowed, got {len(labels)}"
            )
        )
    for key, value in sorted(labels.items()):
        if (
            not key
            or len(key) > MAX_LABEL_LENGTH
            or not _is_label_text(key)
            or not key[0].isalpha()
        ):
            violations.append(
                FieldViolation(
                    f"custom_job.labels[{key!r}]",
                    f"Label keys must start with a lowercase letter, be at most "
                    f"{MAX_LABEL_LENGTH} characters and contain only lowercase letters, digits, "
                    f"'_' and '-'",
                )
            )
        if len(value) > MAX_LABEL_LENGTH or not _is_label_text(value):
            violations.append(
                FieldViolation(
                    f"custom_job.labels[{key!r}]",
                    f"Label values must be at most {MAX_LABEL_LENGTH} characters and contain only "
                    f"lowercase letters, digits, '_' and '-'",
                )
            )
    return violations


def _is_label_text(text: str) -> bool:
    # Lowercase letters may be international ones: the API allows them.
    return all(
        character.isdigit() or character in "_-" or (character.isalpha() and character.islower())
        for character in text
    )


def _flex_start_violations(job: aiplatform_v1.CustomJob) -> list[FieldViolation]:
    violations = []
    pools = active_pools(job)
    for index, pool in pools:
        accelerator = machine_config(pool).accelerator_type
        if accelerator not in FLEX_START_ACCELERATORS:
            violations.append(
                FieldViolation(
                    f"custom_job.job_spec.worker_pool_specs[{index}].machine_spec.accelerator_type",
                    f"FLEX_START does not support accelerator type {accelerator}; supported: "
                    f"{', '.join(sorted(FLEX_START_ACCELERATORS))}",
                )
            )
    timeout = job.job_spec.scheduling.timeout
    if timeout and timeout > FLEX_START_MAX_TIMEOUT:
        violations.append(
            FieldViolation(
                "custom_job.job_spec.scheduling.timeout",
                f"With FLEX_START the timeout can be at most 7 days, got "
                f"{int(timeout.total_seconds())}s",
            )
        )
    configurations = {machine_config(pool) for _, pool in pools}
    if len(configurations) > 1:
        violations.append(
            FieldViolation(
                "custom_job.job_spec.worker_pool_specs",
                "With FLEX_START all worker pools must use the same machine configuration",
            )
        )
    return violations


def _check_persistent_resource(
    job: aiplatform_v1.CustomJob,
    resource_name: str,
    resource: aiplatform_v1.PersistentResource | None,
) -> None:
    field = "custom_job.job_spec.persistent_resource_id"
    if resource is None:
        raise invalid_argument(
            format_violations(
                [FieldViolation(field, f"Persistent resource {resource_name} does not exist")]
            )
        )
    if resource.state != RUNNING:
        state = aiplatform_v1.PersistentResource.State(resource.state).name
        raise failed_precondition(
            f"Persistent resource {resource_name} is in state {state}; it must be RUNNING to "
            f"run jobs."
        )
    _raise_if_any(_resource_pool_violations(job, resource))


def _resource_pool_violations(
    job: aiplatform_v1.CustomJob, resource: aiplatform_v1.PersistentResource
) -> list[FieldViolation]:
    violations = []
    requested: dict[str, int] = {}
    for index, pool in active_pools(job):
        match = matching_resource_pool(pool, resource)
        if match is None:
            config = machine_config(pool)
            violations.append(
                FieldViolation(
                    f"custom_job.job_spec.worker_pool_specs[{index}]",
                    f"No resource pool of persistent resource {resource.name} matches "
                    f"machine_spec and disk_spec exactly (machine_type={config.machine_type}, "
                    f"accelerator_type={config.accelerator_type}, "
                    f"accelerator_count={config.accelerator_count}, "
                    f"boot_disk_type={config.boot_disk_type}, "
                    f"boot_disk_size_gb={config.boot_disk_size_gb})",
                )
            )
            continue
        requested[match.id] = requested.get(match.id, 0) + pool.replica_count
        if requested[match.id] > resource_pool_capacity(match):
            violations.append(
                FieldViolation(
                    f"custom_job.job_spec.worker_pool_specs[{index}].replica_count",
                    f"Requested {requested[match.id]} replicas of resource pool {match.id}, "
                    f"which has at most {resource_pool_capacity(match)}",
                )
            )
    return violations
