"""The rules from the config's guards: allowed image prefixes, service accounts and regions, and
the ceilings on GPUs and GPU-hours per job.

A sweep counts what it really uses (docs/architecture.md, "Job kinds"; the multipliers:
``shared.config.model.jobs_at_once`` / ``jobs_in_all``): GPUs per job = GPUs per
trial x ``parallel_trials`` (the trials running at once); GPU-hours = GPUs per trial x timeout x
``max_trials`` (every trial may run its whole timeout). A pipeline's training task counts as a
CustomJob, and the serving image of the model it uploads is held to the image prefixes too.

Each is a ``StaticRule`` that holds for every placement; ``shared.validation.compose`` runs them.
"""

from __future__ import annotations

from collections.abc import Iterator

from shared.aiplatform import CustomJob
from shared.config.model import jobs_at_once, jobs_in_all
from shared.policy.jobspec import job_timeout
from shared.validation.subject import (
    _gpus,
    _hours,
    _pool_field,
    _Subject,
    _used_pools,
)
from shared.validation.violations import Rule, Violation


def _images(job: CustomJob) -> Iterator[tuple[str, str]]:
    """(field path, image) for every used pool's container or executor image."""
    for index, pool in _used_pools(job):
        if "python_package_spec" in pool:
            path = "pythonPackageSpec.executorImageUri"
            yield _pool_field(index, path), pool.python_package_spec.executor_image_uri
        else:
            yield _pool_field(index, "containerSpec.imageUri"), pool.container_spec.image_uri


def check_guard_image(subject: _Subject) -> Iterator[Violation]:
    prefixes = subject.guards.image_prefixes
    if not prefixes:
        return
    images = list(_images(subject.job))
    model = subject.pipeline.model if subject.pipeline is not None else None
    if model is not None:
        images.append(("modelToUpload.containerSpec.imageUri", model.serving_image))
    for field, image in images:
        if image and not image.startswith(prefixes):  # a missing image is check_program's
            yield Violation(
                field,
                Rule.GUARD_IMAGE,
                f"image {image!r} does not start with an allowed prefix "
                f"({', '.join(prefixes)}); push it under one of them, or add its prefix to "
                f"guards.images",
            )


def check_guard_service_account(subject: _Subject) -> Iterator[Violation]:
    allowed = subject.guards.service_accounts
    account = subject.job.job_spec.service_account
    if allowed and account not in allowed:
        shown = repr(account) if account else "the Vertex AI default service agent"
        yield Violation(
            "jobSpec.serviceAccount",
            Rule.GUARD_SERVICE_ACCOUNT,
            f"the job would run as {shown}, which guards.service_accounts does not allow; set "
            f"the template's service account to one of: {', '.join(allowed)}",
        )


def check_guard_region(subject: _Subject) -> Iterator[Violation]:
    allowed = subject.guards.regions
    if allowed and subject.region not in allowed:
        yield Violation(
            "region",
            Rule.GUARD_REGION,
            f"region {subject.region!r} is not allowed (guards.regions: {', '.join(allowed)}); "
            f"set the placement's region to one of them, or add it to guards.regions",
        )


def check_guard_gpus(subject: _Subject) -> Iterator[Violation]:
    ceiling = subject.guards.max_gpus_per_job
    gpus = sum(_gpus(pool) for _, pool in _used_pools(subject.job))
    tuning = subject.tuning
    if ceiling is None:
        return
    at_once = gpus * jobs_at_once(tuning)
    if tuning is not None and at_once > ceiling:
        trial_fits = gpus <= ceiling
        yield Violation(
            "parallelTrialCount" if trial_fits else "jobSpec.workerPoolSpecs",
            Rule.GUARD_GPUS,
            f"the sweep asks for {at_once} GPUs at once: {gpus} per trial (all replicas) x "
            f"parallel_trials {tuning.parallel_trials}; guards.max_gpus_per_job allows "
            f"{ceiling}: lower parallel_trials"
            + ("" if trial_fits else ", or replicaCount or acceleratorCount per trial")
            + ", or raise the guard",
        )
    elif tuning is None and gpus > ceiling:
        yield Violation(
            "jobSpec.workerPoolSpecs",
            Rule.GUARD_GPUS,
            f"the job asks for {gpus} GPUs over all replicas; guards.max_gpus_per_job allows "
            f"{ceiling}: lower replicaCount or acceleratorCount, or raise the guard",
        )


def check_guard_gpu_hours(subject: _Subject) -> Iterator[Violation]:
    ceiling = subject.guards.max_gpu_hours_per_job
    gpus = sum(_gpus(pool) for _, pool in _used_pools(subject.job))
    if ceiling is None or gpus == 0:
        return
    timeout = job_timeout(subject.job)
    trials = jobs_in_all(subject.tuning)
    gpu_hours = gpus * timeout.total_seconds() / 3600 * trials
    if gpu_hours > ceiling:
        # A job without a timeout may run Vertex AI's default of 7 days: count that.
        unset = "" if "timeout" in subject.job.job_spec.scheduling else " (Vertex's default)"
        if subject.tuning is None:
            what = f"{gpus} GPUs for up to {_hours(timeout)}{unset}"
            fix = "ask for fewer GPUs"
        else:
            what = f"{gpus} GPUs per trial for up to {_hours(timeout)}{unset} x max_trials {trials}"
            fix = "lower max_trials, ask for fewer GPUs per trial"
        yield Violation(
            "jobSpec.scheduling.timeout",
            Rule.GUARD_GPU_HOURS,
            f"{what} make {gpu_hours:g} GPU-hours; guards.max_gpu_hours_per_job allows "
            f"{ceiling:g}: set the template's timeout to at most {ceiling / gpus / trials:g} h, "
            f"{fix}, or raise the guard",
        )
