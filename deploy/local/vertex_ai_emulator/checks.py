"""The checks the real service makes on CreateCustomJob, with its error codes and message style.

Field errors are gathered and reported together in the service's format
(`List of found errors:\t1.Field: custom_job.display_name; Message: Required field is not set.\t`),
one stage at a time: the job's own fields, then the FLEX_START rules, then the reservation
affinity, then the GPU types the region offers (`offered_accelerators`), then the persistent
resource (with its CMEK key). A HyperparameterTuningJob's trial job and a TrainingPipeline's
training task are checked as the CustomJob they run, and the errors name the fields of the request
that was sent (`JobFieldPaths`: `hyperparameter_tuning_job.trial_job_spec.worker_pool_specs[0]...`,
`training_pipeline.training_task_inputs.worker_pool_specs[0]...`). The quota refusal
(`quota_when_exceeded: refuse`) needs the simulation's state and lives in core.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import EmulatorError, failed_precondition, invalid_argument
from vertex_ai_emulator.persistent import RUNNING
from vertex_ai_emulator.placement import (
    FLEX_START,
    SPOT,
    AffinityType,
    active_pools,
    machine_config,
    matching_resource_pool,
    resource_pool_capacity,
)
from vertex_ai_emulator.reservations import (
    NAME_FORM,
    RESERVATION_NAME_KEY,
    Reservation,
    describe_machine,
    parse_reservation_name,
)

MAX_DISPLAY_NAME_LENGTH = 128
MAX_LABELS = 64
MAX_LABEL_LENGTH = 63
# The emulator stands for Google's service and keeps its own copy of the documented FLEX_START
# rules, so that a mistake in the library's tables is caught by the emulator, not mirrored by it;
# tests/unit/emulator/test_core_checks.py holds the two copies equal (shared.model.accelerators and
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
# The GPUs Vertex AI training offers on Spot VMs: Google's Spot training page names none, and
# Compute Engine allows GPUs on Spot VMs without excluding a model, so this is every current GPU
# of the machine tables (K80, end of support, left out). Held equal to shared.model.accelerators'
# copy by tests/unit/emulator/test_core_checks.py, like the FLEX_START set.
SPOT_ACCELERATORS = frozenset(
    {
        "NVIDIA_TESLA_P4",
        "NVIDIA_TESLA_P100",
        "NVIDIA_TESLA_T4",
        "NVIDIA_TESLA_V100",
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
ReservationLookup = Callable[[str], Reservation | None]
OfferedAccelerators = Mapping[str, frozenset[str]]
# The message the chain's dispatcher matches (shared/adapters/vertex.py): keep it exact.
NOT_OFFERED_MESSAGE = "Accelerator type {accelerator} is not supported in location {region}."


@dataclass(frozen=True)
class JobFieldPaths:
    """Where the job that runs sits in the create request: its root field, and its spec's."""

    root: str  # "custom_job", "hyperparameter_tuning_job", "training_pipeline"
    spec: str  # "custom_job.job_spec", ".trial_job_spec", ".training_task_inputs"
    resource: str  # the resource type the request creates, as messages name it

    def rewrite(self, message: str) -> str:
        """A CustomJob check's message, naming this request's fields instead."""
        if self == CUSTOM_JOB_PATHS:
            return message
        return (
            message.replace("custom_job.job_spec", self.spec)
            .replace("custom_job.", f"{self.root}.")
            .replace("The CustomJob's", f"The {self.resource}'s")
        )


CUSTOM_JOB_PATHS = JobFieldPaths("custom_job", "custom_job.job_spec", "CustomJob")
TUNING_JOB_PATHS = JobFieldPaths(
    "hyperparameter_tuning_job",
    "hyperparameter_tuning_job.trial_job_spec",
    "HyperparameterTuningJob",
)
PIPELINE_PATHS = JobFieldPaths(
    "training_pipeline", "training_pipeline.training_task_inputs", "TrainingPipeline"
)


@dataclass(frozen=True)
class FieldViolation:
    """One broken rule, on one field of the request."""

    field: str
    message: str


def check_new_job(
    job: aiplatform_v1.CustomJob,
    persistent_resource_name: str | None,
    lookup_persistent_resource: PersistentResourceLookup,
    *,
    region: str = "",
    lookup_reservation: ReservationLookup | None = None,
    offered_accelerators: OfferedAccelerators | None = None,
    paths: JobFieldPaths = CUSTOM_JOB_PATHS,
) -> None:
    """Raise EmulatorError if the service would refuse to create `job` in `region`.

    `persistent_resource_name` is the canonical name `job_spec.persistent_resource_id` refers to
    (None when the job does not use one). `paths`: where `job` sits in the request (the trial job
    of a tuning job, the training task of a pipeline), which the errors name.
    """
    try:
        _check_new_job(
            job,
            persistent_resource_name,
            lookup_persistent_resource,
            region=region,
            lookup_reservation=lookup_reservation,
            offered_accelerators=offered_accelerators,
        )
    except EmulatorError as error:
        raise EmulatorError(error.code, paths.rewrite(error.message)) from None


def _check_new_job(
    job: aiplatform_v1.CustomJob,
    persistent_resource_name: str | None,
    lookup_persistent_resource: PersistentResourceLookup,
    *,
    region: str,
    lookup_reservation: ReservationLookup | None,
    offered_accelerators: OfferedAccelerators | None,
) -> None:
    _raise_if_any(_field_violations(job))
    if job.job_spec.scheduling.strategy == FLEX_START:
        _raise_if_any(_flex_start_violations(job))
    if job.job_spec.scheduling.strategy == SPOT:
        _raise_if_any(_spot_violations(job))
    _raise_if_any(_reservation_violations(job, region, lookup_reservation or (lambda _: None)))
    if persistent_resource_name is None:
        check_offered(job, region, offered_accelerators or {})
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


def _spot_violations(job: aiplatform_v1.CustomJob) -> list[FieldViolation]:
    violations = []
    for index, pool in active_pools(job):
        config = machine_config(pool)
        if config.has_gpus and config.accelerator_type not in SPOT_ACCELERATORS:
            violations.append(
                FieldViolation(
                    f"custom_job.job_spec.worker_pool_specs[{index}].machine_spec.accelerator_type",
                    f"Spot VMs do not support accelerator type {config.accelerator_type}; "
                    f"supported: {', '.join(sorted(SPOT_ACCELERATORS))}",
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
    _check_encryption(job, resource_name, resource)


def check_offered(job: aiplatform_v1.CustomJob, region: str, offered: OfferedAccelerators) -> None:
    """INVALID_ARGUMENT for the first GPU type the region does not offer (a region not listed in
    `offered` offers every type). Jobs on a persistent resource are not checked: its pools
    were made with the GPUs the region has."""
    allowed = offered.get(region)
    if allowed is None:
        return
    for _, pool in active_pools(job):
        config = machine_config(pool)
        if config.has_gpus and config.accelerator_type not in allowed:
            raise invalid_argument(
                NOT_OFFERED_MESSAGE.format(accelerator=config.accelerator_type, region=region)
            )


def _check_encryption(
    job: aiplatform_v1.CustomJob, resource_name: str, resource: aiplatform_v1.PersistentResource
) -> None:
    # A job on a persistent resource runs on the resource's disks and VMs: its CMEK key must be
    # the resource's (none and none match).
    job_key = job.encryption_spec.kms_key_name
    resource_key = resource.encryption_spec.kms_key_name
    if job_key != resource_key:
        raise invalid_argument(
            f"The CustomJob's encryption_spec.kms_key_name ({job_key or 'not set'}) must be the "
            f"same as the encryption_spec.kms_key_name of persistent resource {resource_name} "
            f"({resource_key or 'not set'})."
        )


def _reservation_violations(
    job: aiplatform_v1.CustomJob, region: str, lookup: ReservationLookup
) -> list[FieldViolation]:
    pools = active_pools(job)
    affinities = {index: pool.machine_spec.reservation_affinity for index, pool in pools}
    kinds = {AffinityType(affinity.reservation_affinity_type) for affinity in affinities.values()}
    uses = kinds & {AffinityType.SPECIFIC_RESERVATION, AffinityType.ANY_RESERVATION}
    if not uses:
        return []
    if len(kinds) > 1 or len({tuple(affinity.values) for affinity in affinities.values()}) > 1:
        return [
            FieldViolation(
                "custom_job.job_spec.worker_pool_specs",
                "All worker pools must use the same machine_spec.reservation_affinity",
            )
        ]
    strategy = job.job_spec.scheduling.strategy
    if strategy in (SPOT, FLEX_START) or job.job_spec.persistent_resource_id:
        what = (
            "job_spec.persistent_resource_id"
            if job.job_spec.persistent_resource_id
            else f"scheduling.strategy {aiplatform_v1.Scheduling.Strategy(strategy).name}"
        )
        return [
            FieldViolation(
                "custom_job.job_spec.worker_pool_specs[0].machine_spec.reservation_affinity",
                f"A reservation affinity cannot be combined with {what}: only on-demand VMs "
                f"consume reservations",
            )
        ]
    if len({machine_config(pool) for _, pool in pools}) > 1:
        return [
            FieldViolation(
                "custom_job.job_spec.worker_pool_specs",
                "With a reservation affinity all worker pools must use the same machine "
                "configuration",
            )
        ]
    if AffinityType.SPECIFIC_RESERVATION not in kinds:
        return []
    return _specific_reservation_violations(pools, region, lookup)


def _specific_reservation_violations(
    pools: list[tuple[int, aiplatform_v1.WorkerPoolSpec]], region: str, lookup: ReservationLookup
) -> list[FieldViolation]:
    index, pool = pools[0]
    where = f"custom_job.job_spec.worker_pool_specs[{index}].machine_spec.reservation_affinity"
    affinity = pool.machine_spec.reservation_affinity
    if affinity.key != RESERVATION_NAME_KEY:
        return [
            FieldViolation(
                f"{where}.key",
                f"With SPECIFIC_RESERVATION the key must be {RESERVATION_NAME_KEY}, got "
                f"{affinity.key!r}",
            )
        ]
    if len(affinity.values) != 1 or parse_reservation_name(affinity.values[0]) is None:
        return [
            FieldViolation(
                f"{where}.values",
                f"With SPECIFIC_RESERVATION give exactly one reservation name, {NAME_FORM}; "
                f"got {list(affinity.values)}",
            )
        ]
    name = affinity.values[0]
    reservation = lookup(name)
    if reservation is None:
        return [FieldViolation(f"{where}.values", f"Reservation {name} does not exist")]
    if reservation.region != region:
        return [
            FieldViolation(
                f"{where}.values",
                f"Reservation {name} is in zone {reservation.zone}, which is not in the job's "
                f"location {region} (its zones are {region}-a, -b, ...)",
            )
        ]
    config = machine_config(pool)
    accelerator = config.accelerator_type if config.has_gpus else ""
    count = config.accelerator_count if accelerator else 0
    if not reservation.matches(config.machine_type, accelerator, count):
        return [
            FieldViolation(
                f"custom_job.job_spec.worker_pool_specs[{index}].machine_spec",
                f"The machine ({describe_machine(config.machine_type, accelerator, count)}) does "
                f"not match reservation {name} ({reservation.describe_machine()})",
            )
        ]
    return []


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
