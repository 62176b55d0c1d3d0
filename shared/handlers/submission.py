"""Submit one attempt of a run exactly once: walk the placement chain, record, then create.

The ledger makes CreateCustomJob at-most-once per attempt even though every event is delivered at
least once and CreateCustomJob takes no request id (docs/architecture.md, "Exactly once"):

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

The walk tries placements cooling down after a capacity failure after the others
(``policy.cooldown``; docs/architecture.md, "Placement cooldown"), and records every placement it
passes over on the attempt (``Attempt.skips``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from shared import validation
from shared.adapters import compute, vertex
from shared.adapters.ledger import (
    CREATE_FAILED_STATE,
    Attempt,
    Ledger,
    PlacementSkip,
    RetryPlan,
    RunSnapshot,
    RunStatus,
)
from shared.config.durations import describe_duration
from shared.config.model import Config, FailureClass, Placement, Template
from shared.handlers import cooldowns, duplicates
from shared.handlers.rejections import alert_once, finish_run
from shared.logs import log
from shared.model import loglines
from shared.model.alerts import AlertReason
from shared.model.errors import InvalidJobSpec, TransientError
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.runs import SkipClass
from shared.policy import jobspec
from shared.policy.cooldown import (
    cooldown_of,
    cooling,
    placement_key,
    walk_indices,
    walk_order,
)
from shared.policy.duplicates import FoundJob, sort_out
from shared.policy.machines import draws_preemptible_quota, preemptible_quota_metric
from shared.policy.records import describe_placement, placement_kind, placement_record
from shared.policy.timing import INTENT_LEASE
from shared.policy.watchdogs import (
    NoPlacementDue,
    alert_claim,
    no_placement_due,
    no_placement_limits,
)
from shared.validation.chain import check_chain

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1

logger = logging.getLogger(__name__)


class AttemptInProgress(TransientError):
    """Another delivery claimed this attempt moments ago and may still be creating its job."""


@dataclass(frozen=True)
class Submission:
    """What one pass of dispatch needs to submit an attempt of a run."""

    config: Config
    ledger: Ledger
    template: Template
    params: Mapping[str, str]
    trigger: str  # one line for alerts
    now: Callable[[], datetime]
    labels: Mapping[str, str] = field(default_factory=dict)  # log labels (run id, route)


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
    jobs = {
        job.name: job
        for job in vertex.find_jobs_by_label(claimed.parent, jobspec.RUN_LABEL, run_id)
        if job.labels.get(jobspec.ATTEMPT_LABEL) == str(claimed.number)
    }
    if jobs:
        found = [FoundJob(job.name, job.create_time) for job in jobs.values()]
        extra = sort_out(run_id, claimed.number, None, found)
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
            run_id, claimed.number, job.name, job.state.name, created_at=_created_at(job)
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


@dataclass
class _Walk:
    """One delivery's walk along the chain for one attempt: the run as this delivery last wrote
    it, the placements passed over so far (what the ledger records with the intent), and the
    lines an alert lists."""

    snapshot: RunSnapshot
    attempt_number: int
    now: Callable[[], datetime]
    skips: list[PlacementSkip] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    claimed: bool = False  # this delivery wrote the attempt's intent
    last_refusal: Mapping[str, str] | None = None  # the last create refused: message, class
    # Placements moved to the end of the walk for cooldown (by chain index), not reached yet:
    # recorded as skips only if the walk ends before it reaches them.
    cooling: dict[int, PlacementSkip] = field(default_factory=dict)

    def skip(self, placement: Placement, region: str, skip_class: SkipClass, reason: str) -> None:
        self.skips.append(self._skip(placement, region, skip_class, reason))
        self.lines.append(f"{describe_placement(placement)}: {reason}")

    def defer(self, index: int, placement: Placement, region: str, reason: str) -> None:
        """Placement ``index`` is cooling down: the walk tries it after the others."""
        self.cooling[index] = self._skip(placement, region, SkipClass.COOLDOWN, reason)

    def reach(self, index: int) -> None:
        """The walk has come to placement ``index``: a deferred one is no skip any more."""
        self.cooling.pop(index, None)

    def recorded_skips(self) -> tuple[PlacementSkip, ...]:
        """What the attempt records: the placements passed over, those still deferred last."""
        return (*self.skips, *self.cooling.values())

    def _skip(
        self, placement: Placement, region: str, skip_class: SkipClass, reason: str
    ) -> PlacementSkip:
        return PlacementSkip(
            placement_record(placement), region, skip_class.value, reason, self.now()
        )

    @property
    def reasons(self) -> str:
        return "\n".join(self.lines)


def _walk_placements(
    submission: Submission, snapshot: RunSnapshot, attempt_number: int, first_placement: int
) -> DispatchResult:
    """Try the placements from ``first_placement`` on (cooling ones last) until one takes the
    job. A placement a live rule refuses, or whose create the service refuses for a reason of the
    placement's (quota, a GPU not offered, a persistent resource that cannot run it) when
    ``retry_on`` retries that class, is skipped: recorded, and the intent moves on to the next
    placement by compare-and-set before that one's create."""
    walk = _Walk(snapshot, attempt_number, submission.now)
    indices = walk_indices(submission.template, first_placement, snapshot.run.attempts)
    order = _walk_order(submission, walk, indices)
    chain = check_chain(
        submission.config,
        submission.template,
        submission.params,
        run_id=snapshot.run.run_id,
        attempt=attempt_number,
        indices=order,
        read_resource=vertex.get_persistent_resource,
        read_reservation=compute.get_reservation,
    )
    for check in chain:
        walk.reach(check.index)
        if check.rendered is None:  # the template does not render: its spec is invalid
            return _reject(submission, walk, check.render_error or "")
        violations = check.violations
        if check.verdict is validation.ViolationKind.INVALID:
            return _reject(submission, walk, validation.describe(violations))
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
        result = _claim_and_create(submission, walk, placement, check.rendered)
        if result is not None:
            return result
    return _no_placement(submission, walk)


UNSUITABLE_CLAIM_SCOPE = "unsuitable"
"""The scope of the once-per-run alert that some placement can never take the run's job."""


# A live rule's verdict that passes a placement over, and how the skip is recorded.
_SKIP_CLASS_OF_VERDICT: dict[validation.ViolationKind | None, SkipClass] = {
    validation.ViolationKind.UNAVAILABLE: SkipClass.UNAVAILABLE,
    validation.ViolationKind.UNSUITABLE: SkipClass.UNSUITABLE,
}


def _walk_order(submission: Submission, walk: _Walk, indices: Sequence[int]) -> Sequence[int]:
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
    walk: _Walk,
    placement: Placement,
    rendered: jobspec.RenderedJob,
) -> DispatchResult | None:
    """Claim the attempt on ``placement`` (or move this delivery's intent there), then create.
    None when the service refused the create for a reason of the placement's and the walk goes
    on (``_placement_refused``)."""
    ledger, run_id, attempt_number = (
        submission.ledger,
        walk.snapshot.run.run_id,
        walk.attempt_number,
    )
    intent = Attempt(
        number=attempt_number,
        placement=placement_record(placement),
        region=rendered.region,
        parent=rendered.parent,
        intent_at=submission.now(),
        skips=walk.recorded_skips(),
    )
    # The intent names this placement before its create (LedgerConflict: another delivery
    # won); moving it from a refused placement is the same compare-and-set on our own claim.
    walk.snapshot = ledger.claim_attempt(walk.snapshot, intent)
    walk.claimed = True
    try:
        job = vertex.create_custom_job(rendered.parent, rendered.custom_job)
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
        return _refused(submission, walk, error, AlertReason.PERMISSION)
    except InvalidJobSpec as error:  # VertexRejected: the service refused the spec
        return _refused(submission, walk, error, AlertReason.INVALID_SPEC)
    ledger.record_job(
        run_id,
        attempt_number,
        job.name,
        job.state.name,
        known=walk.snapshot,
        created_at=_created_at(job),
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
    walk: _Walk,
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
        return _quota_refused(submission, walk, placement, rendered, error)
    return _chain_refused(submission, walk, error)


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


def _reject(submission: Submission, walk: _Walk, reasons: str) -> DispatchResult:
    """The job as rendered breaks a rule: nothing is created; the run ends and alerts. An intent
    this delivery claimed on an earlier placement (whose create was refused) records the walk."""
    snapshot, attempt_number = walk.snapshot, walk.attempt_number
    if walk.claimed:
        snapshot = submission.ledger.record_refused_create(
            snapshot,
            attempt_number,
            {"message": reasons, "class": "invalid_spec"},
            walk.recorded_skips(),
        )
    tried = f"\nPlacements passed over before it:\n{walk.reasons}" if walk.lines else ""
    finish_run(
        submission.ledger,
        snapshot,
        RunStatus.REJECTED,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.INVALID_SPEC,
        message=f"template {submission.template.name} renders an invalid job:\n{reasons}{tried}",
        what_to_do="fix the template or the request as each line says, then trigger again",
        attempt=attempt_number,
    )
    log(logger, logging.ERROR, "job spec rejected", labels=submission.labels, reasons=reasons)
    return DispatchResult(DispatchOutcome.REJECTED, snapshot.run.run_id, detail=reasons)


def _refused(
    submission: Submission, walk: _Walk, error: Exception, reason: AlertReason
) -> DispatchResult:
    """Vertex AI refused the create for the job itself: record why, end the run, alert."""
    ledger, run_id, attempt_number = (
        submission.ledger,
        walk.snapshot.run.run_id,
        walk.attempt_number,
    )
    snapshot = ledger.record_refused_create(
        walk.snapshot, attempt_number, {"message": str(error)}, walk.recorded_skips()
    )
    tried = f"\nPlacements passed over before it:\n{walk.reasons}" if len(walk.lines) else ""
    status = RunStatus.REJECTED if reason is AlertReason.INVALID_SPEC else RunStatus.FAILED
    finish_run(
        ledger,
        snapshot,
        status,
        config=submission.config,
        trigger=submission.trigger,
        reason=reason,
        message=(
            f"Vertex AI refused the job of template {submission.template.name}: {error}{tried}"
        ),
        what_to_do=(
            "grant the dispatch function's service account roles/aiplatform.user, then retry "
            "the run"
            if reason is AlertReason.PERMISSION
            else "fix the template as the service's message says, then trigger again"
        ),
        attempt=attempt_number,
    )
    return DispatchResult(DispatchOutcome.REJECTED, run_id, detail=str(error))


def _quota_refused(
    submission: Submission,
    walk: _Walk,
    placement: Placement,
    rendered: jobspec.RenderedJob,
    error: Exception,
) -> DispatchResult:
    """A quota ceiling refused the create and ``retry_on`` does not retry quota: alert with the
    metric to raise and every placement tried; the run fails. The attempt records the refusal."""
    ledger, snapshot, run_id = submission.ledger, walk.snapshot, walk.snapshot.run.run_id
    attempt_number = walk.attempt_number
    pools = rendered.custom_job.job_spec.worker_pool_specs
    accelerator = pools[0].machine_spec.accelerator_type.name if pools else ""
    metric = preemptible_quota_metric(accelerator)
    raise_what = (
        f"raise {metric} in {rendered.region}"
        if metric and draws_preemptible_quota(placement)
        else f"raise the {accelerator or 'machine'} training quota in {rendered.region}"
    )
    finish_run(
        ledger,
        snapshot,
        RunStatus.FAILED,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.QUOTA,
        message=(
            f"a quota refused the job on {describe_placement(placement)}: {error}"
            + (f"\nEach placement tried:\n{walk.reasons}" if len(walk.lines) > 1 else "")
        ),
        what_to_do=(
            f"{raise_what}, then retry the run with `vertex-dispatch retry {run_id}`; to move "
            "on to the next placement on such refusals, add quota to the template's "
            "retry.retry_on"
        ),
        attempt=attempt_number,
    )
    return DispatchResult(DispatchOutcome.REJECTED, run_id, detail=str(error))


def _chain_refused(submission: Submission, walk: _Walk, error: Exception) -> DispatchResult:
    """A create refused for the placement (a GPU not offered, a persistent resource that cannot
    run the job) when ``retry_on`` does not retry capacity: the run fails with one alert listing
    every placement tried and why each refused."""
    run_id = walk.snapshot.run.run_id
    finish_run(
        submission.ledger,
        walk.snapshot,
        RunStatus.FAILED,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.NO_PLACEMENT,
        message=(
            f"Vertex AI refused the job of template {submission.template.name} on its "
            f"placement, and retry.retry_on does not list capacity. Each placement tried:\n"
            f"{walk.reasons}"
        ),
        what_to_do=(
            "change the placement as the refusal says (another region or GPU, a running "
            "persistent resource that matches the job), or add capacity to the template's "
            f"retry.retry_on to move on along the chain; then `vertex-dispatch retry {run_id}`"
        ),
        attempt=walk.attempt_number,
    )
    return DispatchResult(DispatchOutcome.REJECTED, run_id, detail=str(error))


def _no_placement(submission: Submission, walk: _Walk) -> DispatchResult:
    """No placement can take the job now: the run waits for a retry every ``backoff.base``.

    The no-placement watchdog (``policy.watchdogs.no_placement_due``) runs here, on the retry
    that finds no placement again, because this is where the reasons each placement gave are
    fresh (the give-up alert lists them): after ``no_placement_alert`` of waiting it alerts,
    then at most once a day; after ``no_placement_give_up`` the run ends FAILED. The wait is
    measured from the run's ``no_placement_since``, kept across retries.

    When this delivery claimed the attempt on a placement whose create was then refused (every
    refusal of a class ``retry_on`` retries), the attempt first records the refusal and the walk
    (CREATE_FAILED: the retry takes the attempt over without waiting for its lease).
    """
    snapshot, attempt_number = walk.snapshot, walk.attempt_number
    if walk.skips and all(skip.skip_class == SkipClass.UNSUITABLE for skip in walk.skips):
        return _unsuitable_everywhere(submission, walk)
    if walk.claimed and walk.last_refusal is not None:
        snapshot = submission.ledger.record_refused_create(
            snapshot, attempt_number, walk.last_refusal, walk.recorded_skips()
        )
    run = snapshot.run
    now = submission.now()
    since = run.no_placement_since or now
    limits = no_placement_limits(submission.config, submission.template)
    due = no_placement_due(since, now, limits, AlertReason.NO_PLACEMENT)
    reasons = walk.reasons
    if due.give_up:
        return _give_up(submission, snapshot, due, reasons)
    next_retry = RetryPlan(
        at=now + submission.template.retry.backoff_base,
        attempt=attempt_number,
        placement_index=0,
        reason="no placement could take the job",
    )
    # The walk's skips go on the run when it claimed no attempt (else they are the attempt's).
    skips = () if walk.claimed else walk.recorded_skips()
    snapshot = submission.ledger.wait_for_retry(snapshot, next_retry, since, skips)  # or conflict
    unsuitable = [line for skip, line in zip(walk.skips, walk.lines, strict=True)
                  if skip.skip_class == SkipClass.UNSUITABLE]  # fmt: skip
    if unsuitable:
        _alert_unsuitable(submission, snapshot, unsuitable)
    if due.alert_claim is not None:
        alert_once(
            submission.ledger,
            snapshot.run,
            config=submission.config,
            trigger=submission.trigger,
            reason=AlertReason.NO_PLACEMENT,
            claim=due.alert_claim,
            message=(
                f"no placement of template {submission.template.name} has been able to take the "
                f"job for {_hours(due.waited)} (since {since.isoformat()}):\n{reasons}"
            ),
            what_to_do=(
                "free or start the persistent resources named, raise the quotas named, or add a "
                "placement that can take the job (another region, FLEX_START) to the chain; the "
                "run is retried every "
                f"{describe_duration(submission.template.retry.backoff_base)}, alerted again at "
                f"most daily, and ends FAILED once it has waited "
                f"{describe_duration(limits.give_up_after)} "
                "(no_placement_give_up)"
            ),
        )
    log(
        logger,
        logging.WARNING,
        "no placement can take the job now",
        labels=submission.labels,
        waited_s=int(due.waited.total_seconds()),
    )
    return DispatchResult(DispatchOutcome.WAITING, run.run_id, detail=reasons)


def _unsuitable_everywhere(submission: Submission, walk: _Walk) -> DispatchResult:
    """Every placement left refused the job for a reason of its own that no wait will change
    (``SkipClass.UNSUITABLE``: a resource or reservation of another machine, network or key, a
    GPU the region does not offer): the run is rejected at once with one alert listing each,
    as an invalid job would be, instead of being retried every ``backoff.base`` for days."""
    snapshot, attempt_number = walk.snapshot, walk.attempt_number
    if walk.claimed:  # else nothing was claimed: the alert and the log carry every reason
        refusal = walk.last_refusal or {"message": walk.reasons, "class": "unsuitable"}
        snapshot = submission.ledger.record_refused_create(
            snapshot, attempt_number, refusal, walk.recorded_skips()
        )
    finish_run(
        submission.ledger,
        snapshot,
        RunStatus.REJECTED,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.INVALID_SPEC,
        message=(
            f"no placement of template {submission.template.name} can ever take the job as it "
            f"is written. Each placement:\n{walk.reasons}"
        ),
        what_to_do=(
            "change the template or its placements as each line says (or add a placement that "
            "can run the job, such as FLEX_START or on demand), then trigger again"
        ),
        attempt=attempt_number,
    )
    log(
        logger,
        logging.ERROR,
        "no placement can ever take the job; run rejected",
        labels=submission.labels,
        reasons=walk.reasons,
    )
    return DispatchResult(DispatchOutcome.REJECTED, snapshot.run.run_id, detail=walk.reasons)


def _alert_unsuitable(submission: Submission, snapshot: RunSnapshot, lines: list[str]) -> None:
    """Some placement of a waiting run can never take its job as written: say so once per run
    (the wait goes on for the others), so that a human fixes it now, not when the wait alerts."""
    alert_once(
        submission.ledger,
        snapshot.run,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.NO_PLACEMENT,
        claim=alert_claim(AlertReason.NO_PLACEMENT, UNSUITABLE_CLAIM_SCOPE),
        message=(
            f"the run waits for a placement of template {submission.template.name}; these "
            "placements can never take its job as it is written:\n" + "\n".join(lines)
        ),
        what_to_do=(
            "change the template or those placements as each line says; the run is retried on "
            "the others meanwhile"
        ),
    )


def _give_up(
    submission: Submission, snapshot: RunSnapshot, due: NoPlacementDue, reasons: str
) -> DispatchResult:
    """The run waited ``no_placement_give_up`` for a placement: alert with every placement's
    reason, then end it FAILED.

    The alert comes before the status (its claim makes it once per wait): a run ended first
    would be a duplicate to every redelivery, so an alert whose publish failed would never be
    sent. The end is written only if the run did not move since it was read (its alerts aside):
    a delivery that claimed an attempt meanwhile wins (``LedgerConflict``; the redelivery finds
    the run moving again).
    """
    run = snapshot.run
    alert_once(
        submission.ledger,
        run,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.NO_PLACEMENT,
        claim=due.alert_claim,
        message=(
            f"no placement of template {submission.template.name} could take the job for "
            f"{_hours(due.waited)}: the run is given up (FAILED). Each placement:\n"
            f"{reasons}"
        ),
        what_to_do=(
            "free or start the persistent resources named, raise the quotas named, or add a "
            "placement that can take the job, then "
            f"`vertex-dispatch retry {run.run_id}`; to wait longer, raise "
            "no_placement_give_up"
        ),
    )
    submission.ledger.fail_waiting(snapshot)
    log(
        logger,
        logging.ERROR,
        "no placement took the job in time; run given up",
        labels=submission.labels,
        waited_s=int(due.waited.total_seconds()),
    )
    return DispatchResult(DispatchOutcome.REJECTED, run.run_id, detail=reasons)


def _hours(waited: timedelta) -> str:
    """A wait as an alert says it: ``"30.2h"``."""
    return f"{waited.total_seconds() / 3600:.1f}h"


def _created_at(job: aiplatform_v1.CustomJob) -> datetime | None:
    """The job's create_time (Vertex AI's clock), None when the answer did not carry one."""
    created = job.create_time
    return created if created and created.timestamp() > 0 else None
