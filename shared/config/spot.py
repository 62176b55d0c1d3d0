"""The Spot GPU rule, checked when the config loads: a Spot placement asks for a GPU Spot serves.

A ``spot`` placement's job runs on its machine override's accelerator when it has an override,
else on each worker pool's ``machineSpec.acceleratorType``. A GPU outside
``shared.model.accelerators.SPOT_GPUS`` is a load error named where the user wrote it (the
override's ``accelerator.type``, or the worker pool's, through ``origins.user_path``), with the
GPUs Spot serves and the other way out (another placement kind). Each problem carries the
rendered job's rule id, ``spot-gpu``, as the guards' problems carry theirs.

The machine fields take no placeholders (``shared.config.placeholders``), so what is checked here
is what every job of the template asks for. ``shared.validation.spot`` checks the rendered job
again: a template built in code never passes through the loader.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from shared.config.model import SpotPlacement, Template
from shared.config.origins import user_path
from shared.config.problems import Problems
from shared.model.accelerators import SPOT_GPUS, is_gpu

# The id of shared.validation.Rule.SPOT_GPU, as text: shared.config imports nothing from
# shared.validation (a test keeps the two equal).
SPOT_GPU: Final = "spot-gpu"
# The REST field a machine override sets on every pool; user_path names it at the override.
_OVERRIDE_ACCELERATOR: Final = "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType"
_STRATEGY: Final = "jobSpec.scheduling.strategy"  # named at the placement's entry (or its file)
_SPOT_SERVES: Final = ", ".join(sorted(SPOT_GPUS))


def check_spot_gpus(template: Template, problems: Problems) -> None:
    """Record every GPU a spot placement of ``template`` would ask for that Spot does not serve.

    One problem per override, and one per worker pool (listing every spot placement without an
    override that runs on it), so that each key to change is named once.
    """
    refused_pools: dict[int, tuple[str, list[int]]] = {}  # pool -> (GPU, spot placements)
    for index, placement in enumerate(template.placements):
        if not isinstance(placement, SpotPlacement):
            continue
        if placement.machine is not None:  # the override replaces every pool's machine
            accelerator = placement.machine.accelerator_type
            if accelerator is not None and _refused(accelerator):
                problems.add_root_cause(
                    user_path(template, _OVERRIDE_ACCELERATOR, index),
                    f"{accelerator} is not a GPU Spot VMs serve for Vertex AI training; Spot "
                    f"serves {_SPOT_SERVES}: pick one of those with a machine type built with "
                    "it, or use another placement kind for this machine (e.g. on_demand)",
                    rule=SPOT_GPU,
                )
            continue
        for pool, accelerator in _pool_gpus(template.job_spec):
            if _refused(accelerator):
                refused_pools.setdefault(pool, (accelerator, []))[1].append(index)
    for pool, (accelerator, users) in refused_pools.items():
        field = f"jobSpec.workerPoolSpecs[{pool}].machineSpec.acceleratorType"
        entries = ", ".join(user_path(template, _STRATEGY, index) for index in users)
        that = "that placement" if len(users) == 1 else "each of them"
        which = (
            f"spot placement {entries} runs"
            if len(users) == 1
            else f"spot placements {entries} run"
        )
        problems.add_root_cause(
            user_path(template, field),
            f"{accelerator} is not a GPU Spot VMs serve for Vertex AI training, and the {which} "
            f"this pool on it; Spot serves {_SPOT_SERVES}: give {that} a machine override with one "
            "of those GPUs (machine: {machine_type, accelerator: {type, count}}), or use "
            "another placement kind there (e.g. on_demand)",
            rule=SPOT_GPU,
        )


def _refused(accelerator: str) -> bool:
    # A TPU, or no accelerator at all (a CPU-only pool), breaks no GPU rule.
    return is_gpu(accelerator) and accelerator not in SPOT_GPUS


def _pool_gpus(job_spec: Mapping[str, Any]) -> Iterator[tuple[int, str]]:
    """``(pool index, accelerator)`` of every worker pool that names an accelerator."""
    for index, pool in enumerate(job_spec.get("workerPoolSpecs") or ()):
        machine = pool.get("machineSpec") if isinstance(pool, Mapping) else None
        accelerator = machine.get("acceleratorType") if isinstance(machine, Mapping) else None
        if isinstance(accelerator, str):
            yield index, accelerator
