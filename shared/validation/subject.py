"""What every static rule looks at (``_Subject``), and the small readings of a job they share.

Vertex AI's defaults for what a job leaves unset, which worker pools a job uses, a pool's REST
field path, accelerator, machine text and GPU count (the job's timeout is
``policy.jobspec.job_timeout``, shared with the budgets): the helpers the rules in
``job_rules``, ``flex_start``, ``guards`` and ``persistent`` read a job through. No rule lives
here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from shared.aiplatform import CustomJob, MachineSpec, WorkerPoolSpec
from shared.config.model import Guards, HyperparameterTuning, Placement, TrainingPipelineSpec
from shared.policy import machines
from shared.policy.jobspec import is_skipped_pool
from shared.validation.violations import Violation

# Vertex AI's defaults for what a job leaves unset (docs/architecture.md, "The Vertex AI rules",
# and the API reference).
DEFAULT_BOOT_DISK_TYPE: Final = "pd-ssd"
DEFAULT_BOOT_DISK_SIZE_GB: Final = 100
NO_ACCELERATOR: Final = "ACCELERATOR_TYPE_UNSPECIFIED"


@dataclass(frozen=True)
class _Subject:
    """What every static rule looks at: the job that runs (a sweep's trial job, a pipeline's
    training task) and, for those kinds, the template's block (the sweep's trials, the model)."""

    job: CustomJob
    placement: Placement
    guards: Guards
    region: str
    tuning: HyperparameterTuning | None = None
    pipeline: TrainingPipelineSpec | None = None


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


def _hours(duration: timedelta) -> str:
    return f"{duration.total_seconds() / 3600:g} h"
