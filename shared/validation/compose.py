"""Composition: which rules run for which placement, in which order.

``validate_spec`` runs every rule that needs nothing live (the job rules and the guards, plus the
FLEX_START rules for a ``flex_start`` placement and the Spot rules for a ``spot`` one; on-demand
and reservation placements have no offline rules of their own beyond ``check_placement``);
``validate_job`` adds the rules read live: the persistent resource's for a
``persistent_resource`` placement, the named reservation's for a ``reservation`` placement
with a ``name``.

A sweep's or a pipeline's job is validated as the job that runs (``RenderedJob.custom_job``: the
trial job, the training task), so every placement rule holds for it unchanged; ``tuning`` makes
the guards count the sweep's trials, ``pipeline`` holds the model's serving image to the image
guard. Both are required keywords (None for a CustomJob): a caller that forgot the block would
silently count one trial. A sweep's own rules (study, trial counts) are the config loader's
(``shared.config.tuning``): a loaded config cannot break them.
"""

from __future__ import annotations

from typing import Final

from shared.aiplatform import CustomJob, PersistentResource
from shared.config.model import (
    FlexStartPlacement,
    Guards,
    HyperparameterTuning,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
    TrainingPipelineSpec,
)
from shared.model.reservations import Reservation
from shared.validation.flex_start import (
    check_flex_start_gpu,
    check_flex_start_max_wait,
    check_flex_start_same_machine,
    check_flex_start_timeout,
)
from shared.validation.guards import (
    check_guard_gpu_hours,
    check_guard_gpus,
    check_guard_image,
    check_guard_region,
    check_guard_service_account,
)
from shared.validation.job_rules import (
    check_display_name,
    check_encryption_key,
    check_hyperdisk,
    check_labels,
    check_machine_accelerator,
    check_placement,
    check_program,
    check_replicas,
    check_worker_pools,
)
from shared.validation.persistent import check_resource
from shared.validation.reservation import check_reservation
from shared.validation.spot import check_spot_gpu
from shared.validation.subject import StaticRule, _Subject
from shared.validation.violations import Violation

STATIC_RULES: Final[tuple[StaticRule, ...]] = (
    check_worker_pools,
    check_replicas,
    check_program,
    check_machine_accelerator,
    check_hyperdisk,
    check_display_name,
    check_labels,
    check_placement,
    check_encryption_key,
    check_guard_image,
    check_guard_service_account,
    check_guard_region,
    check_guard_gpus,
    check_guard_gpu_hours,
)
FLEX_START_RULES: Final[tuple[StaticRule, ...]] = (
    check_flex_start_gpu,
    check_flex_start_timeout,
    check_flex_start_same_machine,
    check_flex_start_max_wait,
)
SPOT_RULES: Final[tuple[StaticRule, ...]] = (check_spot_gpu,)


def validate_spec(
    job: CustomJob,
    placement: Placement,
    guards: Guards,
    *,
    region: str,
    tuning: HyperparameterTuning | None,
    pipeline: TrainingPipelineSpec | None,
) -> list[Violation]:
    """Every rule that needs nothing live: what ``vertex-dispatch validate`` can check offline.

    ``job`` is the job that runs; ``tuning`` / ``pipeline``: the template's
    ``hyperparameter_tuning`` / ``training_pipeline`` (None for a CustomJob): the guards count a
    sweep's trials and hold a pipeline's model image to the prefixes.
    """
    subject = _Subject(
        job=job,
        placement=placement,
        guards=guards,
        region=region,
        tuning=tuning,
        pipeline=pipeline,
    )
    rules = STATIC_RULES
    if isinstance(placement, FlexStartPlacement):
        rules += FLEX_START_RULES
    elif isinstance(placement, SpotPlacement):
        rules += SPOT_RULES
    return [violation for rule in rules for violation in rule(subject)]


def validate_job(
    job: CustomJob,
    placement: Placement,
    guards: Guards,
    persistent_resource: PersistentResource | None = None,
    *,
    region: str,
    reservation: Reservation | None = None,
    tuning: HyperparameterTuning | None,
    pipeline: TrainingPipelineSpec | None,
) -> list[Violation]:
    """Every rule, the live ones included; an empty list means "create it".

    For a persistent-resource placement, ``persistent_resource`` is the resource as just read
    (None: it was not found); for a reservation placement with a name, ``reservation`` is the
    reservation as just read (None: not found). ``region`` is where the job would be created.
    ``tuning`` / ``pipeline``: the template's block for a sweep / a pipeline (``validate_spec``).
    """
    violations = validate_spec(
        job, placement, guards, region=region, tuning=tuning, pipeline=pipeline
    )
    if isinstance(placement, PersistentResourcePlacement):
        violations += check_resource(job, placement, persistent_resource)
    if isinstance(placement, ReservationPlacement) and placement.name is not None:
        violations += check_reservation(job, placement, reservation)
    return violations
