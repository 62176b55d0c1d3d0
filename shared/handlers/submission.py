"""Submit one attempt of a run exactly once: walk the placement chain, record, then create.

The ledger makes the create at-most-once per attempt even though every event is delivered at
least once and no create (CreateCustomJob, CreateHyperparameterTuningJob, CreateTrainingPipeline)
takes a request id (docs/architecture.md, "Exactly once"). The same protocol holds for every
kind: the intent records the kind of job it creates (``Attempt.job_kind``), and the label lookup
lists that kind's collection only (a pipeline's backing CustomJob, which may carry the pipeline's
labels, is never taken for the attempt's job):

1. An attempt that already has its job is done: the delivery is a duplicate.
2. An attempt with an intent but no job is looked up by its labels (``vd-run``, ``vd-attempt``):
   a job found is reattached. None found: if the intent is fresh and its creator may still be
   creating, the delivery retries later (``AttemptInProgress``); if the intent is stale, or its
   create is known to have failed, the attempt is taken over.
3. Otherwise each placement of the chain is rendered and validated in turn; the first that can
   take the job now is claimed (the intent, by compare-and-set: one delivery wins) and only then
   created. A create the service did not take (UNAVAILABLE, a rate limit) marks the intent so the
   redelivery takes it over after checking the labels; one whose outcome is unknown (a timeout,
   INTERNAL) leaves the intent to its lease, since its job may appear later than a lookup can
   see it. One the service refuses for the placement (quota, a GPU not offered in the region, a
   persistent resource that cannot run the job) is a skip when the template's ``retry_on``
   retries its class: the next placement is tried in the same delivery, its intent moved there
   by compare-and-set on this delivery's own claim BEFORE its create, so the intent always names
   the placement (region, parent) whose create is about to be made and the label lookup of a
   takeover searches where the job could be. Any other refusal ends the run and alerts, listing
   every placement tried. When no placement can take the job now, the run waits for a retry;
   the no-placement watchdog alerts on a long wait and ends one that lasts past
   ``no_placement_give_up`` (``_no_placement``).

The walk follows the run's order: the chain as written, or for ``placement_order: learned`` the
order its first walk chose from the placements' history and recorded with the claim
(``handlers.placement_orders``; docs/architecture.md, "Learned placement order").
A run with a deadline (``start_by``; ``policy.deadlines``) walks only while it can still start
by it (else it ends FAILED with one ``deadline_missed`` alert: ``walk_ends.deadline_missed``), and
each FLEX_START job's max wait is cut to end at the deadline, the cut wait recorded with the
intent. The walk tries placements cooling down after a capacity failure after the others
(``policy.cooldown``; docs/architecture.md, "Placement cooldown"), and records every placement it
passes over on the attempt (``Attempt.skips``). What it carries is ``handlers.walk``'s; how a walk
that creates no job ends (rejected, failed, waiting) is ``handlers.walk_ends``'.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from shared import validation
from shared.adapters import compute, vertex
from shared.adapters.ledger import (
    CREATE_FAILED_STATE,
    Attempt,
    RunSnapshot,
)
from shared.config.model import FailureClass, FlexStartPlacement, Placement, PlacementOrder
from shared.handlers import cooldowns, duplicates, placement_orders, walk_ends
from shared.handlers.walk import Submission, Walk
from shared.logs import log
from shared.model import loglines
from shared.model.alerts import AlertReason
from shared.model.errors import InvalidJobSpec, TransientError
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.runs import SkipClass
from shared.policy import deadlines, jobspec
from shared.policy.cooldown import (
    cooldown_of,
    cooling,
    placement_key,
    walk_indices,
    walk_order,
)
from shared.policy.duplicates import FoundJob, counts_for, sort_out
from shared.policy.gpus import gpus_held
from shared.policy.job_views import job_times
from shared.policy.placement_order import recorded_order
from shared.policy.records import describe_placement, placement_kind, placement_record
from shared.policy.run_history import previous_output
from shared.policy.timing import INTENT_LEASE
from shared.validation.chain import check_chain

logger = logging.getLogger(__name__)


class AttemptInProgress(TransientError):
    """Another delivery claimed this attempt moments ago and may still be creating its job."""


def submit_attempt(
    submission: Submission, snapshot: RunSnapshot, attempt_number: int, first_placement: int
) -> DispatchResult:
    """Create the job of attempt ``attempt_number`` unless it exists; see the module docstring."""
    run = snapshot.run
    if run.status.is_terminal() or any(a.number > attempt_number for a in run.attempts):
        return DispatchResult(DispatchOutcome.DUPLICATE, run.run_id, detail=run.status.value)
    claimed = run.attempt(attempt_number)
    if claimed is not None:
        if claimed.job_name:
            return DispatchResult(DispatchOutcome.DUPLICATE, run.run_id, claimed.job_name)
        reattached = _reattach(submission, snapshot, claimed)
        if reattached is not None:
            return reattached
    return _walk_placements(submission, snapshot, attempt_number, first_placement)


def _reattach(
    submission: Submission, snapshot: RunSnapshot, claimed: Attempt
) -> DispatchResult | None:
    """The job of an intent found by label and recorded; None when the attempt may be taken over.

    More than one job found (a create whose answer was lost, then a takeover's create): the
    attempt keeps the one ``policy.duplicates`` picks (the oldest) and the others are cancelled,
    alerted and noted (``handlers.duplicates.settle``) BEFORE the kept job is recorded. A
    failure there raises (the delivery is redone): once the attempt records its job, a
    redelivery stops at "already has its job", hints for the duplicates are dropped unread (no
    run records their ids), and only a reconcile tick that lists the pair while the run is still
    active would find them again.
    """
    run_id = snapshot.run.run_id
    found_jobs = vertex.find_jobs_by_label(
        claimed.parent, jobspec.RUN_LABEL, run_id, kind=claimed.job_kind
    )
    jobs = {
        job.name: job
        for job in found_jobs
        if job.labels.get(jobspec.ATTEMPT_LABEL) == str(claimed.number)
        and counts_for(job.name, claimed.job_kind)
    }
    if jobs:
        found = [FoundJob(job.name, job.create_time) for job in jobs.values()]
        extra = sort_out(run_id, claimed.number, None, found, kind=claimed.job_kind)
        job = jobs[extra.kept] if extra else next(iter(jobs.values()))
        if extra is not None:
            duplicates.settle(
                submission.ledger,
                submission.config,
                snapshot.run,
                extra,
                trigger=submission.trigger,
            )
        submission.ledger.record_job(
            run_id,
            claimed.number,
            job.name,
            job.state.name,
            times=job_times(job, submission.now()),
        )
        log(logger, logging.INFO, "job reattached", labels=submission.labels, job=job.name)
        return DispatchResult(DispatchOutcome.REATTACHED, run_id, job.name)
    age = submission.now() - claimed.intent_at
    if claimed.state != CREATE_FAILED_STATE and age < INTENT_LEASE:
        raise AttemptInProgress(
            f"run {run_id} attempt {claimed.number} was claimed {age.total_seconds():.0f}s ago "
            "and its job is not visible yet; deliver again later"
        )
    return None


def _walk_placements(
    submission: Submission, snapshot: RunSnapshot, attempt_number: int, first_placement: int
) -> DispatchResult:
    """Try the placements from ``first_placement`` on (cooling ones last) until one takes the
    job. A placement a live rule refuses, or whose create the service refuses for a reason of the
    placement's (quota, a GPU not offered, a persistent resource that cannot run it) when
    ``retry_on`` retries that class, is skipped: recorded, and the intent moves on to the next
    placement by compare-and-set before that one's create."""
    walk = Walk(snapshot, attempt_number, submission.now)
    deadline = deadlines.deadline_of(snapshot.run)
    if deadlines.too_late(deadline, submission.now()):
        return walk_ends.deadline_missed(submission, walk, "its deadline has come")
    run_order, first = _run_order(submission, walk, first_placement)
    indices = walk_indices(submission.template, first, snapshot.run.attempts, run_order)
    order = _walk_order(submission, walk, indices)

    def cut_to_deadline(placement: Placement) -> Placement:
        return deadlines.cut_placement(placement, deadline, submission.now())

    chain = check_chain(
        submission.config,
        submission.template,
        submission.params,
        run_id=snapshot.run.run_id,
        attempt=attempt_number,
        indices=order,
        read_resource=vertex.get_persistent_resource,
        read_reservation=compute.get_reservation,
        adjust=cut_to_deadline if deadline is not None else None,
        previous_output=previous_output(snapshot.run.attempts, attempt_number),
    )
    for check in chain:
        walk.reach(check.index)
        if check.rendered is None:  # the template does not render: its spec is invalid
            return walk_ends.reject(submission, walk, check.render_error or "")
        violations = check.violations
        if check.verdict is validation.ViolationKind.INVALID:
            return walk_ends.reject(submission, walk, validation.describe(violations))
        placement = check.placement
        if check.verdict in _SKIP_CLASS_OF_VERDICT:
            reason = validation.describe(violations)
            skip_class = _SKIP_CLASS_OF_VERDICT[check.verdict]
            walk.skip(placement, check.rendered.region, skip_class, reason)
            log(
                logger,
                logging.INFO,
                "placement cannot take the job now; trying the next",
                labels=submission.labels,
                placement=describe_placement(placement),
                violations=[str(v) for v in violations],
            )
            continue
        result = _claim_and_create(submission, walk, placement, check.rendered, check.adjusted)
        if result is not None:
            return result
    return walk_ends.no_placement(submission, walk)


# A live rule's verdict that passes a placement over, and how the skip is recorded.
_SKIP_CLASS_OF_VERDICT: dict[validation.ViolationKind | None, SkipClass] = {
    validation.ViolationKind.UNAVAILABLE: SkipClass.UNAVAILABLE,
    validation.ViolationKind.UNSUITABLE: SkipClass.UNSUITABLE,
}


def _run_order(
    submission: Submission, walk: Walk, first_placement: int
) -> tuple[tuple[int, ...] | None, int]:
    """The run's chain order (None: as written) and the chain index its walk starts at.

    A run of a ``placement_order: learned`` template chooses its order at its first walk
    (``handlers.placement_orders``) and starts at its head; the order rides on the walk's
    snapshot, so the intent's claim (or the wait, when no placement can take the job) records
    it in the same compare-and-set. Every later walk follows the recorded order."""
    template, run = submission.template, walk.snapshot.run
    recorded = recorded_order(run, template)
    if recorded is not None:
        return recorded, first_placement
    if (
        template.placement_order is not PlacementOrder.LEARNED
        or run.attempts
        or len(template.placements) < 2
    ):
        return None, first_placement
    chosen = placement_orders.choose_order(
        submission.ledger,
        submission.config,
        template,
        run,
        now=submission.now(),
        labels=submission.labels,
    )
    walk.snapshot = replace(walk.snapshot, run=replace(run, placement_order=chosen.order))
    return chosen.order, chosen.order[0] if first_placement == 0 else first_placement


def _walk_order(submission: Submission, walk: Walk, indices: Sequence[int]) -> Sequence[int]:
    """The order to try ``indices`` in: the chain's, with placements cooling down after a
    capacity failure moved behind the others (``policy.cooldown``). The cooldowns are read only
    when there is a choice: a chain with one placement left costs no read."""
    config, template = submission.config, submission.template
    length = cooldown_of(config, template)
    if len(indices) < 2 or length <= timedelta(0):
        return indices
    keys = {i: placement_key(template.placements[i], template, config.region) for i in indices}
    now = submission.now()
    cool = cooling(keys, submission.ledger.placement_cooldowns(), now, length)
    plan = walk_order(indices, cool.keys())
    for index in plan.passed_over:
        placement, cooldown = template.placements[index], cool[index]
        until = cooldown.since + length
        walk.defer(
            index,
            placement,
            keys[index].region,
            f"cooling down until {until.isoformat()} (tried after the others) since "
            f"{cooldown.since.isoformat()}: {cooldown.reason}",
        )
        log(
            logger,
            logging.INFO,
            "placement cooling down; trying the others first",
            labels=submission.labels,
            placement=describe_placement(placement),
            cooling_until=until.isoformat(),
        )
    return plan.order


def _claim_and_create(
    submission: Submission,
    walk: Walk,
    placement: Placement,
    rendered: jobspec.RenderedJob,
    adjusted: Placement | None = None,
) -> DispatchResult | None:
    """Claim the attempt on ``placement`` (or move this delivery's intent there), then create.
    None when the service refused the create for a reason of the placement's and the walk goes
    on (``_placement_refused``). ``adjusted``: the placement the job was rendered for, when the
    run's deadline cut its max wait (recorded with the intent, ``records.placement_record``)."""
    ledger, run_id, attempt_number = (
        submission.ledger,
        walk.snapshot.run.run_id,
        walk.attempt_number,
    )
    intent = Attempt(
        number=attempt_number,
        placement=placement_record(
            placement,
            deadline_max_wait=(
                adjusted.max_wait if isinstance(adjusted, FlexStartPlacement) else None
            ),
        ),
        region=rendered.region,
        parent=rendered.parent,
        intent_at=submission.now(),
        skips=walk.recorded_skips(),
        job_kind=rendered.kind,
        # What the placement runs on, for the run's history (docs/architecture.md, "Run history").
        machine=placement_key(placement, submission.template, submission.config.region).machine,
        gpus=gpus_held(rendered.custom_job, submission.template.hyperparameter_tuning),
        output_dir=rendered.custom_job.job_spec.base_output_directory.output_uri_prefix or None,
    )
    # The intent names this placement before its create (LedgerConflict: another delivery
    # won); moving it from a refused placement is the same compare-and-set on our own claim.
    walk.snapshot = ledger.claim_attempt(walk.snapshot, intent)
    walk.claimed = True
    try:
        job = vertex.create_job(rendered.parent, rendered.resource)
    except vertex.OutcomeUnknown:
        # The job may exist, or appear later than a label lookup can see it: leave the intent
        # as it is, so that a takeover waits for INTENT_LEASE unless the lookup finds the job.
        raise
    except TransientError as error:
        ledger.mark_create_failed(run_id, attempt_number, {"message": str(error)})
        raise
    except vertex.QuotaExceeded as error:
        return _placement_refused(submission, walk, placement, rendered, error, SkipClass.QUOTA)
    except vertex.PlacementRefused as error:
        skip_class = SkipClass.UNSUITABLE if error.lasting else SkipClass.CAPACITY
        return _placement_refused(submission, walk, placement, rendered, error, skip_class)
    except vertex.VertexPermissionDenied as error:
        return walk_ends.refused(submission, walk, error, AlertReason.PERMISSION)
    except InvalidJobSpec as error:  # VertexRejected: the service refused the spec
        return walk_ends.refused(submission, walk, error, AlertReason.INVALID_SPEC)
    ledger.record_job(
        run_id,
        attempt_number,
        job.name,
        job.state.name,
        known=walk.snapshot,
        times=job_times(job, submission.now()),
    )
    log(
        logger,
        logging.INFO,
        loglines.JOB_CREATED_MESSAGE,
        labels=submission.labels,
        job=job.name,
        attempt=attempt_number,
        placement=describe_placement(placement),
        placement_kind=placement_kind(intent.placement),
        region=rendered.region,
        job_kind=rendered.kind.value,
        start_deadline=(
            walk.snapshot.run.start_deadline.isoformat()
            if walk.snapshot.run.start_deadline
            else None
        ),
        deadline_max_wait=(
            adjusted.max_wait.total_seconds() if isinstance(adjusted, FlexStartPlacement) else None
        ),
    )
    return DispatchResult(DispatchOutcome.SUBMITTED, run_id, job.name)


# Which class of the retry policy a create refused for the placement belongs to.
_RETRY_CLASS_OF_SKIP: dict[SkipClass, FailureClass] = {
    SkipClass.QUOTA: FailureClass.QUOTA,
    SkipClass.CAPACITY: FailureClass.CAPACITY,
    SkipClass.UNSUITABLE: FailureClass.CAPACITY,
}


def _placement_refused(
    submission: Submission,
    walk: Walk,
    placement: Placement,
    rendered: jobspec.RenderedJob,
    error: Exception,
    skip_class: SkipClass,
) -> DispatchResult | None:
    """The service refused the create on ``placement`` for a reason of the placement's: a skip.

    Nothing was created, so the walk may go on in this delivery: when the template's ``retry_on``
    retries the class, None (the next placement's claim records the skip and moves the intent);
    otherwise the attempt records the refusal and the run fails with one alert listing every
    placement tried. A capacity refusal also starts the placement's cooldown."""
    walk.skip(placement, rendered.region, skip_class, str(error))
    walk.last_refusal = {"message": str(error), "class": skip_class.value}
    retried = _RETRY_CLASS_OF_SKIP[skip_class] in submission.template.retry.retry_on
    log(
        logger,
        logging.WARNING,
        "create refused for the placement; trying the next"
        if retried
        else "create refused for the placement",
        labels=submission.labels,
        placement=describe_placement(placement),
        refusal_class=skip_class.value,
        error=str(error),
    )
    if skip_class in (SkipClass.CAPACITY, SkipClass.UNSUITABLE):
        _start_cooldown(submission, placement, str(error))
    if retried:
        return None
    walk.snapshot = submission.ledger.record_refused_create(
        walk.snapshot, walk.attempt_number, walk.last_refusal, walk.recorded_skips()
    )
    if skip_class is SkipClass.QUOTA:
        return walk_ends.quota_refused(submission, walk, placement, rendered, error)
    return walk_ends.chain_refused(submission, walk, error)


def _start_cooldown(submission: Submission, placement: Placement, reason: str) -> None:
    """Cool ``placement`` down after a capacity refusal of its create (``handlers.cooldowns``)."""
    cooldowns.start_cooldown(
        submission.ledger,
        submission.config,
        submission.template,
        placement,
        now=submission.now(),
        reason=reason,
        run_id=submission.labels.get("run_id", ""),
        labels=submission.labels,
    )
