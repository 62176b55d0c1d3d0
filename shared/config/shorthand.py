"""The friendly worker-pool form of a template, turned into ``CustomJobSpec`` REST JSON.

Users write::

    - machine_type: a2-highgpu-1g
      accelerator: {type: NVIDIA_TESLA_A100, count: 1}
      replicas: 1
      disk: {type: pd-ssd, size_gb: 100}
      image: us-docker.pkg.dev/acme-ml/train/resnet:1.4
      args: ["--data={dataset_uri}"]
      env: {EPOCHS: "90"}

and get the ``workerPoolSpecs[]`` entry ``aiplatform_v1.CustomJobSpec.from_json`` reads
(``machineSpec``, ``replicaCount``, ``diskSpec``, ``containerSpec`` or ``pythonPackageSpec``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.config.fields import (
    read_int,
    read_list,
    read_mapping,
    read_text,
    read_text_list,
    read_text_map,
)
from shared.config.placeholders import PREVIOUS_OUTPUT_ENV
from shared.config.problems import Problems, child, item

WORKER_POOL_KEYS = frozenset(
    {"machine_type", "accelerator", "replicas", "disk", "image", "command", "args", "env"}
    | {"python_package"}
)
ACCELERATOR_KEYS = frozenset({"type", "count"})
DISK_KEYS = frozenset({"type", "size_gb"})
PYTHON_PACKAGE_KEYS = frozenset({"executor_image", "package_uris", "module", "args", "env"})
CONTAINER_ONLY_KEYS = ("command", "args", "env")  # with python_package these go inside it

BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
MAX_ACCELERATORS_PER_REPLICA = 16  # a2-megagpu-16g is the largest
MAX_REPLICAS = 1000
BOOT_DISK_SIZE_GB = (10, 65536)

MACHINE_TYPE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)+")
MACHINE_TYPE_RULE = "a Compute Engine machine type such as a2-highgpu-1g or n1-standard-8"
ACCELERATOR_TYPE = re.compile(r"[A-Z][A-Z0-9_]*")
ACCELERATOR_TYPE_RULE = "an AcceleratorType enum name such as NVIDIA_TESLA_A100 or NVIDIA_L4"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_NAME_RULE = "environment variable names are letters, digits and _, not starting with a digit"
GCS_URI = re.compile(r"gs://[a-z0-9][a-z0-9._-]{1,221}[a-z0-9](/.*)?")
GCS_URI_RULE = "write a Cloud Storage URI such as gs://bucket/path/trainer-0.1.tar.gz"


def read_worker_pools(value: object, path: str, problems: Problems) -> list[dict[str, Any]] | None:
    """The ``worker_pools`` list: one entry per pool, the first being the chief."""
    pools = read_list(value, path, problems)
    if pools is None:
        return None
    if not pools:
        problems.add(path, "is empty; list at least one worker pool (the chief)")
        return None
    specs = [
        read_worker_pool(pool, item(path, index), problems) for index, pool in enumerate(pools)
    ]
    return [spec for spec in specs if spec is not None]


def read_worker_pool(value: object, path: str, problems: Problems) -> dict[str, Any] | None:
    """One friendly worker pool as a ``WorkerPoolSpec`` in REST JSON."""
    pool = read_mapping(value, path, problems, allowed=WORKER_POOL_KEYS, required=["machine_type"])
    if pool is None:
        return None
    spec: dict[str, Any] = {"machineSpec": _machine_spec(pool, path, problems)}
    replicas = read_int(
        pool.get("replicas", 1), child(path, "replicas"), problems, minimum=1, maximum=MAX_REPLICAS
    )
    spec["replicaCount"] = replicas or 1
    if pool.get("disk") is not None:
        spec["diskSpec"] = _disk_spec(pool["disk"], child(path, "disk"), problems)
    code = _code_spec(pool, path, problems)
    if code is not None:
        spec.update(code)
    return spec


def _machine_spec(pool: Mapping[str, Any], path: str, problems: Problems) -> dict[str, Any]:
    machine_type = read_text(
        pool.get("machine_type"),
        child(path, "machine_type"),
        problems,
        pattern=MACHINE_TYPE,
        rule=MACHINE_TYPE_RULE,
    )
    machine: dict[str, Any] = {"machineType": machine_type or ""}
    if pool.get("accelerator") is not None:
        machine.update(read_accelerator(pool["accelerator"], child(path, "accelerator"), problems))
    return machine


def read_accelerator(value: object, path: str, problems: Problems) -> dict[str, Any]:
    """``{type, count}`` as ``acceleratorType`` and ``acceleratorCount`` (empty when invalid)."""
    accelerator = read_mapping(
        value, path, problems, allowed=ACCELERATOR_KEYS, required=["type", "count"]
    )
    if accelerator is None:
        return {}
    kind = read_text(
        accelerator.get("type"),
        child(path, "type"),
        problems,
        pattern=ACCELERATOR_TYPE,
        rule=ACCELERATOR_TYPE_RULE,
    )
    count = read_int(
        accelerator.get("count"),
        child(path, "count"),
        problems,
        minimum=1,
        maximum=MAX_ACCELERATORS_PER_REPLICA,
    )
    if kind is None or count is None:
        return {}
    return {"acceleratorType": kind, "acceleratorCount": count}


def _disk_spec(value: object, path: str, problems: Problems) -> dict[str, Any]:
    disk = read_mapping(value, path, problems, allowed=DISK_KEYS)
    if disk is None:
        return {}
    spec: dict[str, Any] = {}
    kind = read_text(disk.get("type"), child(path, "type"), problems)
    if kind is not None and kind not in BOOT_DISK_TYPES:
        problems.add(
            child(path, "type"),
            f"{kind!r} is not a boot disk type; use one of {', '.join(BOOT_DISK_TYPES)}",
        )
    elif kind is not None:
        spec["bootDiskType"] = kind
    low, high = BOOT_DISK_SIZE_GB
    size = read_int(
        disk.get("size_gb"), child(path, "size_gb"), problems, minimum=low, maximum=high
    )
    if size is not None:
        spec["bootDiskSizeGb"] = size
    return spec


def _code_spec(pool: Mapping[str, Any], path: str, problems: Problems) -> dict[str, Any] | None:
    """``containerSpec`` from ``image`` (+ command/args/env), or ``pythonPackageSpec``."""
    has_image = pool.get("image") is not None
    has_package = pool.get("python_package") is not None
    if has_image == has_package:
        problems.add(
            path,
            "set exactly one of image (a container) or python_package (a Python "
            "package run on an executor image)",
        )
        return None
    if has_package:
        for key in CONTAINER_ONLY_KEYS:
            if pool.get(key) is not None:
                problems.add(
                    child(path, key),
                    f"with python_package, move {key} inside "
                    f"python_package ({child(path, 'python_package')}.{key})",
                )
        package = _python_package_spec(
            pool["python_package"], child(path, "python_package"), problems
        )
        return None if package is None else {"pythonPackageSpec": package}
    image = read_text(pool["image"], child(path, "image"), problems)
    container: dict[str, Any] = {"imageUri": image or ""}
    container.update(_command_args_env(pool, path, problems))
    return {"containerSpec": container}


def _python_package_spec(value: object, path: str, problems: Problems) -> dict[str, Any] | None:
    package = read_mapping(
        value,
        path,
        problems,
        allowed=PYTHON_PACKAGE_KEYS,
        required=["executor_image", "package_uris", "module"],
    )
    if package is None:
        return None
    spec: dict[str, Any] = {
        "executorImageUri": read_text(
            package.get("executor_image"), child(path, "executor_image"), problems
        )
        or "",
        "packageUris": list(
            read_text_list(
                package.get("package_uris"),
                child(path, "package_uris"),
                problems,
                pattern=GCS_URI,
                rule=GCS_URI_RULE,
            )
            or ()
        ),
        "pythonModule": read_text(package.get("module"), child(path, "module"), problems) or "",
    }
    spec.update(_command_args_env(package, path, problems, keys=("args", "env")))
    return spec


def _command_args_env(
    section: Mapping[str, Any],
    path: str,
    problems: Problems,
    keys: tuple[str, ...] = CONTAINER_ONLY_KEYS,
) -> dict[str, Any]:
    """``command`` and ``args`` as lists of text, ``env`` as ``[{name, value}]``."""
    spec: dict[str, Any] = {}
    for key in ("command", "args"):
        if key in keys:
            values = read_text_list(section.get(key), child(path, key), problems)
            if values:
                spec[key] = list(values)
    if "env" in keys:
        env = read_text_map(
            section.get("env"),
            child(path, "env"),
            problems,
            key_pattern=ENV_NAME,
            key_rule=ENV_NAME_RULE,
        )
        if env and PREVIOUS_OUTPUT_ENV in env:
            problems.add(
                child(child(path, "env"), PREVIOUS_OUTPUT_ENV),
                "is set by vertex-dispatch on a retry (the output directory of the run's last "
                "attempt that ran): remove it; use {previous_output} in an argument or another "
                "env value to pass it on",
            )
        if env:
            spec["env"] = [{"name": name, "value": value} for name, value in env.items()]
    return spec
