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
the persistent resource); ``scheduling.timeout`` becomes its timeout.
Only the shape is checked here (no ``aiplatform_v1`` import); ``vertex-dispatch validate`` parses
the spec into the proto.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from shared.config.encryption import read_encryption_key
from shared.config.fields import describe, read_duration, read_mapping, read_text
from shared.config.model import (
    FlexStartPlacement,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    SpotPlacement,
)
from shared.config.origins import file_fields
from shared.config.problems import Problems, child, item

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
ENCRYPTION_SPEC_KEYS = frozenset({"kmsKeyName"})
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
    # the CustomJob paths the file sets itself (origins.file_fields), to name them in the file
    fields: frozenset[str] = frozenset()


def import_gcloud_config(document: object, path: str, problems: Problems) -> ImportedJob | None:
    """A ``gcloud ai custom-jobs create --config`` document (a ``CustomJobSpec``)."""
    return _import_job_spec(document, path, problems)


def import_rest_body(document: object, path: str, problems: Problems) -> ImportedJob | None:
    """A ``projects.locations.customJobs.create`` request body (a ``CustomJob``)."""
    body = read_mapping(document, path, problems, allowed=REST_BODY_KEYS, required=["jobSpec"])
    if body is None or body.get("jobSpec") is None:
        return None
    imported = _import_job_spec(body["jobSpec"], child(path, "jobSpec"), problems)
    display_name = read_text(body.get("displayName"), child(path, "displayName"), problems)
    labels = body.get("labels") or {}
    if not isinstance(labels, Mapping):
        problems.add(child(path, "labels"), f"expected a mapping, got {describe(labels)}")
        labels = {}
    encryption_key = _encryption_key(body.get("encryptionSpec"), path, problems)
    if imported is None:
        return None
    return ImportedJob(
        job_spec=imported.job_spec,
        origin=path,
        spec_origin=imported.spec_origin,
        display_name=display_name,
        labels={str(key): str(value) for key, value in labels.items()},
        timeout=imported.timeout,
        strategy=imported.strategy,
        max_wait=imported.max_wait,
        persistent_resource_id=imported.persistent_resource_id,
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
        f"persistentResourceId); {fix}",
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
        fields=file_fields(spec),
    )


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
