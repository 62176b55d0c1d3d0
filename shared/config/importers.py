"""Templates users already have: a ``gcloud ai custom-jobs create --config`` YAML or a REST body.

- The gcloud file is a ``CustomJobSpec`` in camelCase. Its ``workerPoolSpecs`` may be a single
  mapping (as in the Dynamic Workload Scheduler page's example) or a list; both are accepted.
- The REST body is a ``CustomJob``: ``displayName``, ``jobSpec`` and optionally ``labels`` and
  ``encryptionSpec.kmsKeyName`` (customer-managed encryption, see ``shared.config.encryption``).
  A gcloud file is a ``CustomJobSpec``, which has no ``encryptionSpec`` (gcloud takes the key as
  ``--kms-key``): the template's ``encryption_key`` sets it, beside ``gcloud_config``.

Placement is the template's business, not the job spec's: ``scheduling.strategy``,
``scheduling.maxWaitDuration`` and ``persistentResourceId`` are taken out of the spec and offered
as the template's placement when it declares none (FLEX_START with its wait, SPOT, STANDARD, or
the persistent resource); so are the pools' ``machineSpec.reservationAffinity`` (a
``reservation`` placement). ``scheduling.timeout`` becomes its timeout.
Only the shape is checked here (no ``aiplatform_v1`` import); ``vertex-dispatch validate`` parses
the spec into the proto.

Both importers tell a sweep or a pipeline by the document's shape: ``studySpec`` /
``trialJobSpec`` is a ``gcloud ai hp-tuning-jobs create --config`` YAML or a
``HyperparameterTuningJob`` REST body (its ``trialJobSpec`` is the job spec);
``trainingTaskDefinition`` / ``trainingTaskInputs`` / ``modelToUpload`` is a ``TrainingPipeline``
REST body (``trainingTaskDefinition`` must be the custom task's schema, and
``trainingTaskInputs`` is the job spec). The sweep's and the model's own values are read by
``shared.config.kind_files``; the template becomes that kind (``ImportedJob.kind``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from shared.config.encryption import read_encryption_key
from shared.config.fields import describe, read_duration, read_mapping, read_text
from shared.config.kind_files import (
    model_fields,
    not_carried,
    study_fields,
)
from shared.config.model import (
    CUSTOM_TASK_DEFINITION,
    FlexStartPlacement,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
)
from shared.config.origins import file_fields
from shared.config.placements import RESERVATION_NAME_KEY, RESERVATION_NAME_RULE
from shared.config.problems import Problems, child, item
from shared.config.tuning import Fields
from shared.model.job_kinds import JobKind
from shared.model.reservation_names import reservation_name_pattern

CUSTOM_JOB_SPEC_KEYS = frozenset(
    {"persistentResourceId", "workerPoolSpecs", "scheduling", "serviceAccount", "network"}
    | {"reservedIpRanges", "pscInterfaceConfig", "baseOutputDirectory", "tensorboard"}
    | {"protectedArtifactLocationId", "enableWebAccess", "enableDashboardAccess", "experiment"}
    | {"experimentRun", "models"}
)
WORKER_POOL_SPEC_KEYS = frozenset(
    {"machineSpec", "replicaCount", "diskSpec", "containerSpec", "pythonPackageSpec"}
    | {"nfsMounts", "lustreMounts"}
)
SCHEDULING_KEYS = frozenset(
    {"timeout", "strategy", "maxWaitDuration", "restartJobOnWorkerRestart", "disableRetries"}
)
REST_BODY_KEYS = frozenset({"displayName", "jobSpec", "labels", "encryptionSpec"})
TUNING_FILE_KEYS = frozenset(
    {"studySpec", "trialJobSpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount"}
)
TUNING_BODY_KEYS = TUNING_FILE_KEYS | {"displayName", "labels", "encryptionSpec"}
PIPELINE_BODY_KEYS = frozenset(
    {"displayName", "trainingTaskDefinition", "trainingTaskInputs", "modelToUpload", "labels"}
    | {"encryptionSpec"}
)
TUNING_SHAPE = frozenset({"studySpec", "trialJobSpec"})
PIPELINE_SHAPE = frozenset({"trainingTaskDefinition", "trainingTaskInputs", "modelToUpload"})
ENCRYPTION_SPEC_KEYS = frozenset({"kmsKeyName"})
RESERVATION_AFFINITY_KEYS = frozenset({"reservationAffinityType", "key", "values"})
AFFINITY_TYPES = ("ANY_RESERVATION", "SPECIFIC_RESERVATION", "NO_RESERVATION")
FLEX_START = "FLEX_START"
NO_STRATEGY = ("STRATEGY_UNSPECIFIED", FLEX_START)
# The strategies a file may set that are a placement of their own, with every default (the
# deprecated ON_DEMAND and LOW_COST are not: the file should say STANDARD or SPOT).
FILE_STRATEGIES: Mapping[str, Placement] = {
    "SPOT": SpotPlacement(),
    "STANDARD": OnDemandPlacement(),
}


@dataclass(frozen=True)
class ImportedJob:
    """What a file contributes to a template."""

    job_spec: dict[str, Any]  # CustomJobSpec REST JSON without placement or timeout
    origin: str = ""  # key path of the file's content in messages; "" for the friendly form
    spec_origin: str = ""  # key path of the job spec inside it
    display_name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    timeout: timedelta | None = None
    strategy: str | None = None
    max_wait: timedelta | None = None
    persistent_resource_id: str | None = None
    encryption_key: str | None = None  # a REST body's encryptionSpec.kmsKeyName
    # the reservation every pool's machineSpec.reservationAffinity asks for (NO_RESERVATION: None)
    reservation: ReservationPlacement | None = None
    # the CustomJob paths the file sets itself (origins.file_fields), to name them in the file
    fields: frozenset[str] = frozenset()
    # a sweep's or a pipeline's file: its kind, and the values of its hyperparameter_tuning /
    # training_pipeline.model that the file sets (shared.config.kind_files)
    kind: JobKind = JobKind.CUSTOM_JOB
    kind_fields: Fields = field(default_factory=dict)


def import_gcloud_config(document: object, path: str, problems: Problems) -> ImportedJob | None:
    """A ``gcloud ai custom-jobs create --config`` document (a ``CustomJobSpec``), or a
    ``gcloud ai hp-tuning-jobs create --config`` one (``studySpec`` and ``trialJobSpec``)."""
    shape = _shape(document)
    if shape is JobKind.HYPERPARAMETER_TUNING_JOB:
        return _import_body(document, path, problems, shape, TUNING_FILE_KEYS)
    if shape is JobKind.TRAINING_PIPELINE:
        problems.add(
            path,
            "is a TrainingPipeline (trainingTaskInputs, modelToUpload), which gcloud has no "
            "--config file for: name it with rest_body instead of gcloud_config",
        )
        return None
    return _import_job_spec(document, path, problems)


def import_rest_body(document: object, path: str, problems: Problems) -> ImportedJob | None:
    """A create request body: a ``CustomJob``, a ``HyperparameterTuningJob`` or a
    ``TrainingPipeline`` (told by its shape)."""
    shape = _shape(document)
    keys = {
        JobKind.CUSTOM_JOB: REST_BODY_KEYS,
        JobKind.HYPERPARAMETER_TUNING_JOB: TUNING_BODY_KEYS,
        JobKind.TRAINING_PIPELINE: PIPELINE_BODY_KEYS,
    }[shape]
    return _import_body(document, path, problems, shape, keys)


def _shape(document: object) -> JobKind:
    """The kind of job a file describes, by the fields only that kind has."""
    if isinstance(document, Mapping):
        if TUNING_SHAPE & set(document):
            return JobKind.HYPERPARAMETER_TUNING_JOB
        if PIPELINE_SHAPE & set(document):
            return JobKind.TRAINING_PIPELINE
    return JobKind.CUSTOM_JOB


# where each kind's body holds its job spec
SPEC_KEYS = {
    JobKind.CUSTOM_JOB: "jobSpec",
    JobKind.HYPERPARAMETER_TUNING_JOB: "trialJobSpec",
    JobKind.TRAINING_PIPELINE: "trainingTaskInputs",
}


def _import_body(
    document: object,
    path: str,
    problems: Problems,
    kind: JobKind,
    keys: frozenset[str],
) -> ImportedJob | None:
    """A body of ``kind`` whose keys are ``keys``: its job spec, name, labels, key, own values."""
    spec_key = SPEC_KEYS[kind]
    if kind is not JobKind.CUSTOM_JOB:
        document = not_carried(document, path, problems)
    body = read_mapping(document, path, problems, allowed=keys, required=[spec_key])
    if body is None or body.get(spec_key) is None:
        return None
    kind_fields: Fields = {}
    if kind is JobKind.HYPERPARAMETER_TUNING_JOB:
        kind_fields = study_fields(body, path, problems)
    elif kind is JobKind.TRAINING_PIPELINE:
        definition = body.get("trainingTaskDefinition")
        if definition != CUSTOM_TASK_DEFINITION:
            problems.add(
                child(path, "trainingTaskDefinition"),
                f"is {describe(definition)}; vertex-dispatch builds custom-task pipelines only: "
                f"set it to {CUSTOM_TASK_DEFINITION}",
            )
        if body.get("modelToUpload") is not None:
            kind_fields = model_fields(
                body["modelToUpload"], child(path, "modelToUpload"), problems
            )
    imported = _import_job_spec(body[spec_key], child(path, spec_key), problems)
    display_name = read_text(body.get("displayName"), child(path, "displayName"), problems)
    labels = body.get("labels") or {}
    if not isinstance(labels, Mapping):
        problems.add(child(path, "labels"), f"expected a mapping, got {describe(labels)}")
        labels = {}
    encryption_key = _encryption_key(body.get("encryptionSpec"), path, problems)
    if imported is None:
        return None
    return ImportedJob(
        kind=kind,
        kind_fields=kind_fields,
        job_spec=imported.job_spec,
        origin=path,
        spec_origin=imported.spec_origin,
        display_name=display_name,
        labels={str(key): str(value) for key, value in labels.items()},
        timeout=imported.timeout,
        strategy=imported.strategy,
        max_wait=imported.max_wait,
        persistent_resource_id=imported.persistent_resource_id,
        reservation=imported.reservation,
        encryption_key=encryption_key,
        fields=imported.fields
        | {key for key in ("displayName", "labels") if body.get(key) is not None}
        | ({"encryptionSpec", "encryptionSpec.kmsKeyName"} if encryption_key else set()),
    )


def _encryption_key(value: object, path: str, problems: Problems) -> str | None:
    """A REST body's ``encryptionSpec.kmsKeyName``, checked like the template's encryption_key."""
    if value is None:
        return None
    spec_path = child(path, "encryptionSpec")
    spec = read_mapping(
        value, spec_path, problems, allowed=ENCRYPTION_SPEC_KEYS, required=["kmsKeyName"]
    )
    if spec is None:
        return None
    return read_encryption_key(spec.get("kmsKeyName"), child(spec_path, "kmsKeyName"), problems)


def file_placements(
    imported: ImportedJob, path: str, problems: Problems
) -> tuple[Placement, ...] | None:
    """The placement a file implies, for a template that declares none."""
    fix = (
        "declare the chain in the template instead, e.g. placement: [{flex_start: {max_wait: 2h}}]"
    )
    if imported.strategy not in (None, *NO_STRATEGY, *FILE_STRATEGIES):
        problems.add(
            path,
            f"scheduling.strategy {imported.strategy} has no placement in "
            f"vertex-dispatch (only FLEX_START, SPOT, STANDARD and persistent resources); {fix}",
        )
        return None
    strategy = imported.strategy or "STRATEGY_UNSPECIFIED"
    if strategy != "STRATEGY_UNSPECIFIED" and imported.persistent_resource_id:
        problems.add(path, f"the file sets both {strategy} and persistentResourceId; {fix}")
        return None
    if imported.reservation is not None:
        if imported.persistent_resource_id or strategy not in ("STRATEGY_UNSPECIFIED", "STANDARD"):
            what = "persistentResourceId" if imported.persistent_resource_id else strategy
            problems.add(path, f"the file sets both a reservationAffinity and {what}; {fix}")
            return None
        return (imported.reservation,)
    if imported.persistent_resource_id:
        return (PersistentResourcePlacement(resource_id=imported.persistent_resource_id),)
    if strategy in FILE_STRATEGIES:
        return (FILE_STRATEGIES[strategy],)
    flex = strategy == FLEX_START
    if flex and imported.max_wait is None:
        problems.add(
            path,
            "the file sets FLEX_START without scheduling.maxWaitDuration (the "
            f"service default of 1 day is easy to miss); add it to the file or {fix}",
        )
        return None
    if flex and imported.max_wait is not None:
        return (FlexStartPlacement(max_wait=imported.max_wait),)
    problems.add(
        path,
        "the file names no placement (no FLEX_START, SPOT or STANDARD strategy, no "
        f"persistentResourceId, no reservationAffinity); {fix}",
    )
    return None


def _import_job_spec(document: object, path: str, problems: Problems) -> ImportedJob | None:
    if isinstance(document, Mapping) and "encryptionSpec" in document:
        # read_mapping below reports it as unknown; say where it belongs instead of listing keys
        problems.add(
            child(path, "encryptionSpec"),
            "belongs to the CustomJob, not to its job spec (gcloud takes it as --kms-key): "
            "remove it here and set the template's encryption_key to its kmsKeyName",
        )
        document = {key: value for key, value in document.items() if key != "encryptionSpec"}
    spec = read_mapping(
        document, path, problems, allowed=CUSTOM_JOB_SPEC_KEYS, required=["workerPoolSpecs"]
    )
    if spec is None:
        return None
    job_spec = copy.deepcopy(dict(spec))
    pools = job_spec.get("workerPoolSpecs")
    if isinstance(pools, Mapping):  # the gcloud page writes a single pool as a mapping
        pools = [pools]
    if not isinstance(pools, list) or not pools:
        problems.add(
            child(path, "workerPoolSpecs"),
            "expected one worker pool spec or a list of them, each with machineSpec.machineType",
        )
        return None
    for index, pool in enumerate(pools):
        _check_worker_pool(pool, item(child(path, "workerPoolSpecs"), index), problems)
    pools, reservation = _take_reservation_affinity(pools, child(path, "workerPoolSpecs"), problems)
    job_spec["workerPoolSpecs"] = pools
    resource_id = job_spec.pop("persistentResourceId", None)
    scheduling_path = child(path, "scheduling")
    scheduling = job_spec.pop("scheduling", None) or {}
    if not read_mapping(scheduling, scheduling_path, problems, allowed=SCHEDULING_KEYS):
        scheduling = {}
    timeout = read_duration(
        scheduling.pop("timeout", None), child(scheduling_path, "timeout"), problems
    )
    max_wait = read_duration(
        scheduling.pop("maxWaitDuration", None), child(scheduling_path, "maxWaitDuration"), problems
    )
    strategy = read_text(
        scheduling.pop("strategy", None), child(scheduling_path, "strategy"), problems
    )
    if scheduling:  # e.g. restartJobOnWorkerRestart: kept for the job
        job_spec["scheduling"] = scheduling
    return ImportedJob(
        job_spec=job_spec,
        origin=path,
        spec_origin=path,
        timeout=timeout,
        strategy=strategy,
        max_wait=max_wait,
        persistent_resource_id=None if resource_id is None else str(resource_id),
        reservation=reservation,
        fields=file_fields(spec),
    )


def _take_reservation_affinity(
    pools: list[Any], path: str, problems: Problems
) -> tuple[list[Any], ReservationPlacement | None]:
    """The pools without their ``machineSpec.reservationAffinity``, and the reservation they ask
    for: placement is the template's, so a file's affinity becomes a ``reservation`` placement.

    Every pool that runs something must ask for the same one (a reservation placement sets it on
    every pool); NO_RESERVATION, Vertex AI's on-demand-only setting, is no reservation.
    """
    taken: list[Any] = []
    asked: dict[int, tuple[str, str | None]] = {}
    for index, pool in enumerate(pools):
        machine = pool.get("machineSpec") if isinstance(pool, Mapping) else None
        if not isinstance(machine, Mapping) or "reservationAffinity" not in machine:
            taken.append(pool)
            continue
        machine = dict(machine)
        affinity_path = child(child(item(path, index), "machineSpec"), "reservationAffinity")
        affinity = _reservation_affinity(
            machine.pop("reservationAffinity"), affinity_path, problems
        )
        if affinity is not None and affinity[0] != "NO_RESERVATION":
            asked[index] = affinity
        taken.append({**pool, "machineSpec": machine})
    used = [index for index, pool in enumerate(pools) if not isinstance(pool, Mapping) or pool]
    kinds = {asked.get(index) for index in used}
    if not asked or problems.reported(path):
        return taken, None
    if len(kinds) != 1:
        problems.add(
            path,
            "the worker pools ask for different reservationAffinity settings; vertex-dispatch "
            "places every pool on the same reservation: make them equal, or remove them and "
            "declare the template's placement, e.g. [{reservation: {name: ...}}]",
        )
        return taken, None
    [(_, name)] = [affinity for affinity in kinds if affinity is not None]
    return taken, ReservationPlacement(name=name)


def _reservation_affinity(
    value: object, path: str, problems: Problems
) -> tuple[str, str | None] | None:
    """A pool's ``reservationAffinity`` as (type, reservation name or None); None when wrong."""
    affinity = read_mapping(
        value,
        path,
        problems,
        allowed=RESERVATION_AFFINITY_KEYS,
        required=["reservationAffinityType"],
    )
    if affinity is None:
        return None
    kind = affinity.get("reservationAffinityType")
    if kind not in AFFINITY_TYPES:
        if kind is not None:
            problems.add(
                child(path, "reservationAffinityType"),
                f"{kind!r} is not one vertex-dispatch places; use one of "
                f"{', '.join(AFFINITY_TYPES)}",
            )
        return None
    if kind != "SPECIFIC_RESERVATION":
        return kind, None
    if affinity.get("key") != RESERVATION_NAME_KEY:
        problems.add(
            child(path, "key"),
            f"SPECIFIC_RESERVATION is placed by name only: set key to {RESERVATION_NAME_KEY}",
        )
        return None
    values = affinity.get("values")
    if not isinstance(values, list) or len(values) != 1:
        problems.add(
            child(path, "values"),
            "list exactly one reservation: [projects/PROJECT/zones/ZONE/reservations/NAME]",
        )
        return None
    name = read_text(
        values[0],
        item(child(path, "values"), 0),
        problems,
        pattern=reservation_name_pattern(),
        rule=RESERVATION_NAME_RULE,
    )
    return None if name is None else (kind, name)


def _check_worker_pool(pool: object, path: str, problems: Problems) -> None:
    if isinstance(pool, Mapping) and not pool:  # Vertex lets "{}" skip a pool (e.g. no chief)
        return
    spec = read_mapping(
        pool, path, problems, allowed=WORKER_POOL_SPEC_KEYS, required=["machineSpec"]
    )
    if spec is None:
        return
    machine = spec.get("machineSpec")
    if isinstance(machine, Mapping) and not machine.get("machineType"):
        problems.add(child(child(path, "machineSpec"), "machineType"), "is required; add it")
    has_container = spec.get("containerSpec") is not None
    if has_container == (spec.get("pythonPackageSpec") is not None):
        problems.add(path, "set exactly one of containerSpec or pythonPackageSpec")
