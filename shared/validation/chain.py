"""A template's placement chain, checked in order: each placement's job rendered and validated.

Dispatch (``shared.handlers.submission``) and ``vertex-dispatch plan`` both walk the chain through
``check_chain``, so the job the plan prints is the job dispatch creates, checked by the same rules.
They differ only in what they can read: dispatch reads a persistent resource
(``read_resource``) and a named Compute Engine reservation (``read_reservation``) live, the plan
reads nothing (both None: the live rules are skipped, and the plan says so). A placement whose
reader is not given is checked offline only. Dispatch stops at the first placement that can take
the job; the plan looks at every placement. A sweep's or a pipeline's placement is checked on
the job that runs (its trial job, its training task) with the template's block (``tuning``,
``pipeline``), so callers need not know the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from shared.aiplatform import PersistentResource
from shared.config.model import (
    Config,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    Template,
)
from shared.model.errors import InvalidJobSpec
from shared.model.reservations import Reservation
from shared.policy import jobspec
from shared.validation.compose import validate_job, validate_spec
from shared.validation.violations import Rule, Violation, ViolationKind, verdict

ResourceReader = Callable[[str], PersistentResource | None]
"""Reads a persistent resource by name (None: it does not exist)."""

PlacementAdjust = Callable[[Placement], Placement]
"""The placement a job is rendered for, given the chain's (``check_chain``'s ``adjust``)."""

ReservationReader = Callable[[str], Reservation | None]
"""Reads a Compute Engine reservation by name, ``projects/P/zones/Z/reservations/N`` (None: it
does not exist)."""


@dataclass(frozen=True)
class PlacementCheck:
    """One placement of the chain: the job rendered for it and what that job breaks."""

    index: int  # position in the template's placement chain
    placement: Placement
    rendered: jobspec.RenderedJob | None  # None when the template did not render
    violations: tuple[Violation, ...]
    render_error: str | None = None  # why the template did not render (an invalid spec)
    # The placement the job was rendered for when ``adjust`` changed it (a FLEX_START max wait
    # cut to the run's deadline); None: ``placement`` itself.
    adjusted: Placement | None = None

    @property
    def verdict(self) -> ViolationKind | None:
        """INVALID (a human must act), UNAVAILABLE (try the next placement) or None (create)."""
        return verdict(self.violations)


def check_chain(
    config: Config,
    template: Template,
    params: Mapping[str, str],
    *,
    run_id: str,
    attempt: int,
    indices: Sequence[int] | None = None,
    read_resource: ResourceReader | None = None,
    read_reservation: ReservationReader | None = None,
    adjust: PlacementAdjust | None = None,
    previous_output: str | None = None,
) -> Iterator[PlacementCheck]:
    """Each placement of ``template``'s chain at ``indices`` (all by default), in order.
    ``previous_output``: the output directory the attempt resumes from (``jobspec.render_job``).

    ``read_resource`` reads a persistent resource and ``read_reservation`` a named reservation
    for the live rules; None checks those placements offline only. ``adjust`` gives the
    placement a job is rendered for when it differs from the chain's (dispatch: a max wait cut
    to the run's deadline, ``policy.deadlines.cut_placement``), called as each is reached.
    """
    for index in indices if indices is not None else range(len(template.placements)):
        yield check_placement(
            config,
            template,
            params,
            index,
            run_id=run_id,
            attempt=attempt,
            read_resource=read_resource,
            read_reservation=read_reservation,
            adjust=adjust,
            previous_output=previous_output,
        )


def check_placement(
    config: Config,
    template: Template,
    params: Mapping[str, str],
    index: int,
    *,
    run_id: str,
    attempt: int,
    read_resource: ResourceReader | None = None,
    read_reservation: ReservationReader | None = None,
    adjust: PlacementAdjust | None = None,
    previous_output: str | None = None,
) -> PlacementCheck:
    """Render attempt ``attempt`` of run ``run_id`` on placement ``index`` (as ``adjust`` gives
    it, when given) and validate it."""
    chain_placement = template.placements[index]
    placement = adjust(chain_placement) if adjust is not None else chain_placement
    adjusted = placement if placement != chain_placement else None
    try:
        rendered = jobspec.render_job(
            template,
            params,
            placement,
            project=config.project,
            default_region=config.region,
            run_id=run_id,
            attempt=attempt,
            previous_output=previous_output,
        )
    except InvalidJobSpec as error:
        violation = Violation("jobSpec", Rule.JOB_SPEC, str(error))
        return PlacementCheck(
            index, chain_placement, None, (violation,), render_error=str(error), adjusted=adjusted
        )
    job, region, guards = rendered.custom_job, rendered.region, config.guards
    tuning, pipeline = template.hyperparameter_tuning, template.training_pipeline
    if isinstance(placement, PersistentResourcePlacement) and read_resource is not None:
        resource = read_resource(f"{rendered.parent}/persistentResources/{placement.resource_id}")
        violations = validate_job(
            job, placement, guards, resource, region=region, tuning=tuning, pipeline=pipeline
        )
    elif (
        isinstance(placement, ReservationPlacement)
        and placement.name is not None
        and read_reservation is not None
    ):
        reservation = read_reservation(placement.name)
        violations = validate_job(
            job,
            placement,
            guards,
            region=region,
            reservation=reservation,
            tuning=tuning,
            pipeline=pipeline,
        )
    else:  # nothing to read for this placement, or no reader: the rules that need nothing live
        violations = validate_spec(
            job, placement, guards, region=region, tuning=tuning, pipeline=pipeline
        )
    return PlacementCheck(index, chain_placement, rendered, tuple(violations), adjusted=adjusted)
