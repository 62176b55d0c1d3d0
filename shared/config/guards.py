"""Guards: limits no template or request may widen, read here and checked against each template.

Users write::

    guards:
      image_prefixes: ["us-docker.pkg.dev/acme-ml/train/"]
      service_accounts: ["trainer@acme-ml.iam.gserviceaccount.com"]
      regions: [us-central1, us-east4]
      max_gpus_per_job: 16
      max_gpu_hours_per_job: 400

Every template is checked at load against what is knowable from it (images, service account,
regions of its placements, GPUs of its worker pools and machine overrides, GPU-hours over its
timeout), so a config that breaks a guard fails when it is loaded, not at the first event.
``shared.validation`` checks the rendered job again before anything is created.

A sweep counts what it really uses (the multipliers: ``shared.config.model.jobs_at_once`` /
``jobs_in_all``): GPUs per job = GPUs per trial x ``parallel_trials`` (the trials running at
once), GPU-hours = GPUs per trial x timeout x ``max_trials`` (each trial may run its whole
timeout). A pipeline's training task counts as a CustomJob; the image of the model it
uploads is held to ``image_prefixes`` too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from shared.config.durations import describe_duration
from shared.config.fields import read_int, read_mapping, read_number, read_text_list
from shared.config.model import (
    Guards,
    PersistentResourcePlacement,
    Placement,
    Template,
    jobs_at_once,
    jobs_in_all,
)
from shared.config.origins import kind_path, user_path
from shared.config.placements import REGION, REGION_RULE
from shared.config.problems import Problems, child

GUARD_KEYS = frozenset(
    {"image_prefixes", "service_accounts", "regions", "max_gpus_per_job", "max_gpu_hours_per_job"}
)
IMAGE_FIELDS = (("containerSpec", "imageUri"), ("pythonPackageSpec", "executorImageUri"))
# The ids of the shared.validation.Rule each check shares with the rendered job's check, as text:
# shared.config imports nothing from shared.validation (a test keeps the two equal).
GUARD_IMAGE = "guard-image"
GUARD_SERVICE_ACCOUNT = "guard-service-account"
GUARD_REGION = "guard-region"
GUARD_GPUS = "guard-gpus"
GUARD_GPU_HOURS = "guard-gpu-hours"


def read_guards(value: object, path: str, problems: Problems) -> Guards:
    """The guards; ``Guards()`` (no restriction) when the section is absent."""
    if value is None:
        return Guards()
    guards = read_mapping(value, path, problems, allowed=GUARD_KEYS)
    if guards is None:
        return Guards()
    return Guards(
        image_prefixes=read_text_list(
            guards.get("image_prefixes"), child(path, "image_prefixes"), problems
        )
        or (),
        service_accounts=read_text_list(
            guards.get("service_accounts"), child(path, "service_accounts"), problems
        )
        or (),
        regions=read_text_list(
            guards.get("regions"),
            child(path, "regions"),
            problems,
            pattern=REGION,
            rule=REGION_RULE,
        )
        or (),
        max_gpus_per_job=read_int(
            guards.get("max_gpus_per_job"), child(path, "max_gpus_per_job"), problems, minimum=0
        ),
        max_gpu_hours_per_job=read_number(
            guards.get("max_gpu_hours_per_job"),
            child(path, "max_gpu_hours_per_job"),
            problems,
            above=0,
        ),
    )


def check_template(
    template: Template, guards: Guards, default_region: str, path: str, problems: Problems
) -> None:
    """Record every guard the template breaks as written (before any parameter is filled).

    Each problem is named where the user wrote the value (``origins.user_path``) and carries
    the rule id the rendered job's check uses. A value the loader could not read was judged as
    missing here: a problem already recorded at its key is the root cause, so none is added.
    """
    for field, image in _images(template.job_spec):
        if guards.image_prefixes and not image.startswith(guards.image_prefixes):
            problems.add_root_cause(
                user_path(template, field),
                f"image {image!r} is outside guards.image_prefixes; "
                f"use an image under {', '.join(guards.image_prefixes)} or add its "
                "prefix to the guard",
                rule=GUARD_IMAGE,
            )
    account = template.job_spec.get("serviceAccount")
    if guards.service_accounts and account not in guards.service_accounts:
        problems.add_root_cause(
            user_path(template, "jobSpec.serviceAccount"),
            f"{account or 'no service account'} is not "
            f"in guards.service_accounts; set service_account to one of "
            f"{', '.join(guards.service_accounts)}",
            rule=GUARD_SERVICE_ACCOUNT,
        )
    for index, placement in enumerate(template.placements):
        region = placement.region or default_region
        if guards.regions and region not in guards.regions:
            problems.add_root_cause(
                user_path(template, "region", index),
                f"region {region} is outside "
                f"guards.regions; use one of {', '.join(guards.regions)} or widen the "
                "guard",
                rule=GUARD_REGION,
            )
    pipeline = template.training_pipeline
    model = None if pipeline is None else pipeline.model
    prefixes = guards.image_prefixes
    if model is not None and prefixes and not model.serving_image.startswith(prefixes):
        problems.add_root_cause(
            kind_path(template, "model.serving_image"),
            f"serving image {model.serving_image!r} is outside guards.image_prefixes; use "
            f"an image under {', '.join(prefixes)} or add its prefix to the guard",
            rule=GUARD_IMAGE,
        )
    _check_gpus(template, guards, path, problems)


def _check_gpus(template: Template, guards: Guards, path: str, problems: Problems) -> None:
    if guards.max_gpus_per_job is None and guards.max_gpu_hours_per_job is None:
        return
    most_gpus = max(gpus_per_job(template.job_spec, placement) for placement in template.placements)
    tuning = template.hyperparameter_tuning
    parallel = jobs_at_once(tuning)
    at_once = most_gpus * parallel
    if guards.max_gpus_per_job is not None and at_once > guards.max_gpus_per_job:
        limit = f"guards.max_gpus_per_job = {guards.max_gpus_per_job}"
        if tuning is None:
            problems.add(
                path,
                f"asks for {most_gpus} GPUs in one job (accelerators x replicas, on its "
                f"largest placement), over {limit}; use fewer replicas or accelerators",
                rule=GUARD_GPUS,
            )
        else:
            trials_fit = most_gpus <= guards.max_gpus_per_job
            problems.add(
                kind_path(template, "parallel_trials") if trials_fit else path,
                f"asks for {at_once} GPUs at once: {most_gpus} per trial (accelerators x "
                f"replicas, on its largest placement) x parallel_trials {parallel}, over "
                f"{limit}; lower parallel_trials"
                + ("" if trials_fit else ", or use fewer replicas or accelerators per trial"),
                rule=GUARD_GPUS,
            )
    if guards.max_gpu_hours_per_job is None or not most_gpus:
        return
    timeout_path = user_path(template, "jobSpec.scheduling.timeout")
    if template.timeout is None:
        problems.add_root_cause(
            timeout_path,
            "is required while guards.max_gpu_hours_per_job is "
            "set: without it a job may run 7 days; set e.g. timeout: 48h",
            rule=GUARD_GPU_HOURS,
        )
        return
    trials = jobs_in_all(tuning)
    gpu_hours = most_gpus * template.timeout.total_seconds() / 3600 * trials
    if gpu_hours > guards.max_gpu_hours_per_job:
        what = f"{most_gpus} GPUs for {describe_duration(template.timeout)}"
        fix = "shorten the timeout or use fewer GPUs"
        if tuning is not None:
            what = f"{what} x max_trials {trials}"
            fix = "lower max_trials, shorten the timeout or use fewer GPUs per trial"
        problems.add(
            timeout_path,
            f"{what} is {gpu_hours:g} GPU-hours, over guards.max_gpu_hours_per_job = "
            f"{guards.max_gpu_hours_per_job:g}; {fix}",
            rule=GUARD_GPU_HOURS,
        )


def gpus_per_job(job_spec: Mapping[str, Any], placement: Placement) -> int:
    """GPUs one job asks for: accelerators x replicas over its pools, after a machine override."""
    # Every kind but a persistent resource may replace the pools' machine (``machine:``).
    override = None if isinstance(placement, PersistentResourcePlacement) else placement.machine
    total = 0
    for pool in job_spec.get("workerPoolSpecs") or ():
        machine = pool.get("machineSpec") or {}
        if not machine.get("machineType"):
            continue  # an empty pool "{}" is skipped by Vertex
        count = override.accelerator_count if override else machine.get("acceleratorCount", 0)
        total += int(count or 0) * int(pool.get("replicaCount", 1) or 1)
    return total


def _images(job_spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(CustomJob field path, image)`` of every worker pool's container or executor image."""
    for index, pool in enumerate(job_spec.get("workerPoolSpecs") or ()):
        for section, key in IMAGE_FIELDS:
            image = (pool.get(section) or {}).get(key)
            if image:
                yield f"jobSpec.workerPoolSpecs[{index}].{section}.{key}", image
