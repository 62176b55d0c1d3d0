"""Naming a job field the way the user wrote it: REST field path -> config key path.

The rules check the rendered CustomJob, whose fields are REST paths
(``jobSpec.workerPoolSpecs[0].containerSpec.imageUri``). A user who wrote the friendly form
must read ``templates.resnet-a100.worker_pools[0].image``; one who pointed at a gcloud file
must read ``templates.dws.gcloud_config(dws.yaml).workerPoolSpecs[0].containerSpec.imageUri``.
``user_path`` does that translation from the ``TemplateOrigin`` the loader records, and
``template_origin`` builds one. Nothing here imports a Google Cloud client.

The tables map a REST path prefix to the key the user wrote; the longest prefix that matches on
a ``.``/``[`` boundary wins and the rest of the REST path is kept (``containerSpec.args[2]`` ->
``args[2]``). A field the template sets over its file (``timeout``, ``service_account``, ...)
is named at the template's key, unless the file alone sets it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from shared.config.model import (
    FlexStartPlacement,
    PersistentResourcePlacement,
    ReservationPlacement,
    Template,
    TemplateForm,
    TemplateOrigin,
)
from shared.config.placements import kind_of
from shared.config.problems import child, item

# The template's own keys that set a job field (for every form), by the CustomJob path they set.
TEMPLATE_FIELDS: Final[Mapping[str, str]] = {
    "displayName": "display_name",
    "labels": "labels",
    "jobSpec.scheduling.timeout": "timeout",
    "jobSpec.serviceAccount": "service_account",
    "jobSpec.network": "network",
    "jobSpec.baseOutputDirectory": "base_output_dir",
    "jobSpec.experiment": "experiment",
    "jobSpec.experimentRun": "experiment_run",
    "encryptionSpec": "encryption_key",
    "encryptionSpec.kmsKeyName": "encryption_key",
}

# A friendly worker pool's keys, by the WorkerPoolSpec path they become ("" is the pool itself).
POOL_FIELDS: Final[Mapping[str, str]] = {
    "machineSpec": "",  # machine_type and accelerator sit on the pool itself
    "machineSpec.machineType": "machine_type",
    "machineSpec.acceleratorType": "accelerator.type",
    "machineSpec.acceleratorCount": "accelerator.count",
    "replicaCount": "replicas",
    "diskSpec": "disk",
    "diskSpec.bootDiskType": "disk.type",
    "diskSpec.bootDiskSizeGb": "disk.size_gb",
    "containerSpec": "",
    "containerSpec.imageUri": "image",
    "containerSpec.command": "command",
    "containerSpec.args": "args",
    "containerSpec.env": "env",
    "pythonPackageSpec": "python_package",
    "pythonPackageSpec.executorImageUri": "python_package.executor_image",
    "pythonPackageSpec.packageUris": "python_package.package_uris",
    "pythonPackageSpec.pythonModule": "python_package.module",
    "pythonPackageSpec.args": "python_package.args",
    "pythonPackageSpec.env": "python_package.env",
}

# A placement's machine override (every kind but persistent_resource), by the WorkerPoolSpec
# path it replaces.
OVERRIDE_FIELDS: Final[Mapping[str, str]] = {
    "machineSpec": "",
    "machineSpec.machineType": "machine_type",
    "machineSpec.acceleratorType": "accelerator.type",
    "machineSpec.acceleratorCount": "accelerator.count",
}

# The job fields a placement sets; named at the placement (or at the file it came from).
PLACEMENT_FIELDS: Final = frozenset(
    {"region", "jobSpec.scheduling.strategy", "jobSpec.scheduling.maxWaitDuration"}
    | {"jobSpec.persistentResourceId"}
)

_POOL: Final = re.compile(r"jobSpec\.workerPoolSpecs\[(\d+)\](?:\.(.*))?")


def template_origin(
    path: str,
    form: TemplateForm,
    written: Iterable[str],
    *,
    spec_path: str = "",
    body_path: str = "",
    file_fields: Iterable[str] = (),
    kind_fields: Mapping[str, str] | None = None,
) -> TemplateOrigin:
    """The origin of the template at ``path``; ``written``: the template keys given."""
    return TemplateOrigin(
        path=path,
        form=form,
        spec_path=spec_path,
        body_path=body_path,
        written=frozenset(written),
        file_fields=frozenset(file_fields),
        kind_fields=tuple((kind_fields or {}).items()),
    )


def kind_path(template: Template, key: str) -> str:
    """The config key path of a sweep's or a pipeline's value, where the user wrote it.

    ``key`` is the key inside the template's block: ``max_trials``, ``parallel_trials``,
    ``metrics``, ``parameters``, ``algorithm`` (``hyperparameter_tuning``), or ``model``,
    ``model.display_name``, ``model.serving_image``, ``model.artifact_uri``
    (``training_pipeline``). A value the template and its file leave unset is named where the
    template would set it.
    """
    origin = origin_of(template)
    written = dict(origin.kind_fields).get(key)
    if written is not None:
        return written
    block = "training_pipeline" if key.startswith("model") else "hyperparameter_tuning"
    return child(child(origin.path, block), key)


def file_fields(job_spec: Mapping[str, object]) -> frozenset[str]:
    """The CustomJob paths a file's job spec sets itself (``jobSpec.scheduling.timeout``, ...).

    Taken from the file as written, before placement and timeout are moved out of it, so that
    a value the loader could not read is still named in the file.
    """
    fields = {f"jobSpec.{key}" for key in job_spec}
    scheduling = job_spec.get("scheduling")
    if isinstance(scheduling, Mapping):
        fields |= {f"jobSpec.scheduling.{key}" for key in scheduling}
    return frozenset(fields)


def origin_of(template: Template) -> TemplateOrigin:
    """The template's origin; a template built in code reads as a raw ``job_spec``."""
    if template.origin is not None:
        return template.origin
    path = child("templates", template.name)
    return TemplateOrigin(
        path=path,
        spec_path=child(path, "job_spec"),
        written=frozenset({"display_name", "labels", "timeout", "placement"}),
    )


def user_path(template: Template, field: str, placement: int | None = None) -> str:
    """The config key path where the user wrote (or would write) the job's ``field``.

    ``field`` is a CustomJob REST path as a ``Violation`` names it; ``placement`` is the index
    in the template's chain of the placement the job was rendered for, if any.
    """
    origin = origin_of(template)
    if placement is not None and 0 <= placement < len(template.placements):
        named = _placement_path(template, origin, field, placement)
        if named is not None:
            return named
    key, rest = _longest_prefix(field, TEMPLATE_FIELDS)
    if key is not None:
        return _template_field(origin, key, rest)
    if field in PLACEMENT_FIELDS:  # no placement given: the chain as a whole
        return child(origin.path, "placement")
    if origin.form is not TemplateForm.WORKER_POOLS:
        return _in_spec(origin, field)
    return _friendly_path(origin, field)


def _template_field(origin: TemplateOrigin, key: str, rest: str) -> str:
    """A field a template key sets: at that key, unless only the file sets it."""
    own_key = TEMPLATE_FIELDS[key]
    from_file = key in origin.file_fields or (
        origin.form is TemplateForm.JOB_SPEC and key.startswith("jobSpec.")
    )
    if own_key in origin.written or not from_file:
        return child(origin.path, own_key) + rest
    if key.startswith("jobSpec"):
        return _in_spec(origin, key + rest)
    return child(origin.body_path, key) + rest


def _in_spec(origin: TemplateOrigin, field: str) -> str:
    """A field inside a raw job spec (a file's, or a template's built in code)."""
    if field == "jobSpec" or not field.startswith(("jobSpec.", "jobSpec[")):
        return origin.spec_path if field == "jobSpec" else origin.path
    return origin.spec_path + field.removeprefix("jobSpec")


def _friendly_path(origin: TemplateOrigin, field: str) -> str:
    pools = child(origin.path, "worker_pools")
    if field == "jobSpec.workerPoolSpecs":
        return pools
    matched = _POOL.fullmatch(field)
    if matched is None:
        return origin.path  # a field the friendly form has no key for: the template
    pool = item(pools, int(matched.group(1)))
    return _table_path(pool, matched.group(2) or "", POOL_FIELDS)


def _placement_path(
    template: Template, origin: TemplateOrigin, field: str, index: int
) -> str | None:
    """A field set by placement ``index`` of the chain: its entry, or the file it came from."""
    placement = template.placements[index]
    declared = "placement" in origin.written
    entry = item(child(origin.path, "placement"), index)
    kind = kind_of(placement)
    matched = _POOL.fullmatch(field)
    inside = (matched.group(2) or "") if matched else ""
    affinity, _ = _longest_prefix(inside, ("machineSpec.reservationAffinity",))
    if isinstance(placement, ReservationPlacement) and matched and declared and affinity:
        return child(entry, "reservation.name" if placement.name else "reservation")
    has_override = not isinstance(placement, PersistentResourcePlacement) and placement.machine
    if has_override and matched:
        key, _ = _longest_prefix(inside, OVERRIDE_FIELDS)
        if key is not None:
            return _table_path(child(entry, f"{kind}.machine"), inside, OVERRIDE_FIELDS)
    if field not in PLACEMENT_FIELDS:
        return None
    if not declared:  # the file's scheduling or persistentResourceId is the chain
        return child(origin.path, "placement") if field == "region" else _in_spec(origin, field)
    if field == "region" and isinstance(placement, ReservationPlacement) and placement.name:
        return child(entry, "reservation.name")  # its zone decides the region
    if field == "region":
        return child(entry, "region" if kind == "persistent_resource" else f"{kind}.region")
    if field == "jobSpec.scheduling.maxWaitDuration" and isinstance(placement, FlexStartPlacement):
        return child(entry, "flex_start.max_wait")
    if field == "jobSpec.persistentResourceId" and isinstance(
        placement, PersistentResourcePlacement
    ):
        return child(entry, "persistent_resource")
    return entry


def _table_path(base: str, rest: str, table: Mapping[str, str]) -> str:
    key, tail = _longest_prefix(rest, table)
    if key is None:
        return f"{base}.{rest}" if rest else base
    named = table[key]
    return (child(base, named) if named else base) + tail


def _longest_prefix(field: str, table: Iterable[str]) -> tuple[str | None, str]:
    """The longest key of ``table`` that ``field`` starts with on a boundary, and the rest."""
    best: str | None = None
    for key in table:
        if (field == key or field.startswith((f"{key}.", f"{key}["))) and (
            best is None or len(key) > len(best)
        ):
            best = key
    return best, field[len(best) :] if best is not None else field
