"""Composition: which rules run for which placement, in which order.

``validate_spec`` runs every rule that needs nothing live (the job rules and the guards, plus the
FLEX_START rules for a ``flex_start`` placement and the Spot rules for a ``spot`` one; on-demand
and reservation placements have no offline rules of their own beyond ``check_placement``);
``validate_job`` adds the rules read live: the persistent resource's for a
``persistent_resource`` placement, the named reservation's for a ``reservation`` placement
with a ``name``.
"""

from __future__ import annotations

from typing import Final

from shared.aiplatform import CustomJob, PersistentResource
from shared.config.model import (
    FlexStartPlacement,
    Guards,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
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
    job: CustomJob, placement: Placement, guards: Guards, *, region: str
) -> list[Violation]:
    """Every rule that needs nothing live: what ``vertex-dispatch validate`` can check offline."""
    subject = _Subject(job=job, placement=placement, guards=guards, region=region)
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
) -> list[Violation]:
    """Every rule, the live ones included; an empty list means "create it".

    For a persistent-resource placement, ``persistent_resource`` is the resource as just read
    (None: it was not found); for a reservation placement with a name, ``reservation`` is the
    reservation as just read (None: not found). ``region`` is where the job would be created.
    """
    violations = validate_spec(job, placement, guards, region=region)
    if isinstance(placement, PersistentResourcePlacement):
        violations += check_resource(job, placement, persistent_resource)
    if isinstance(placement, ReservationPlacement) and placement.name is not None:
        violations += check_reservation(job, placement, reservation)
    return violations
