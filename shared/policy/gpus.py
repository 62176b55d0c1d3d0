"""How many GPUs a job holds at once: the one count an attempt's history records (``Attempt.gpus``)
and GPU-hours are read from (``policy.run_history.gpu_hours_spent``).

Counted on the job that actually runs (``jobspec.RenderedJob.custom_job``: a sweep's trial job, a
pipeline's training task), after the placement's machine override: every used worker pool's
``replica_count`` x ``accelerator_count`` (a pool whose accelerator is not a GPU counts none),
times the copies that run at once (``config.model.jobs_at_once``: a sweep's
``parallel_trials``), as the GPU guards count them.
"""

from __future__ import annotations

from shared.aiplatform import CustomJob
from shared.config.model import HyperparameterTuning, jobs_at_once
from shared.model.accelerators import is_gpu
from shared.policy.jobspec import is_skipped_pool


def gpus_held(job: CustomJob, tuning: HyperparameterTuning | None = None) -> int:
    """The GPUs ``job`` (the job that runs) holds at once; ``tuning``: its sweep, if it is one."""
    per_job = 0
    for index, pool in enumerate(job.job_spec.worker_pool_specs):
        if index > 0 and is_skipped_pool(pool):
            continue  # an empty "{}" pool runs nothing
        if is_gpu(pool.machine_spec.accelerator_type.name):
            per_job += pool.replica_count * pool.machine_spec.accelerator_count
    return per_job * jobs_at_once(tuning)
