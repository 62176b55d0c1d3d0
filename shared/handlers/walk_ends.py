"""How a walk along the placement chain ends when it creates no job: the run rejected (the job
breaks a rule, or no placement can ever take it), failed (the service refused the job, or a
refusal ``retry_on`` does not retry), or waiting for a retry because no placement can take it now
(with the no-placement watchdog's alerts, and its give-up), or failed because it cannot start by
the run's deadline (``deadline_missed``). Each records what the walk saw on the
attempt or the run, and alerts once with every placement tried (docs/architecture.md,
"Create-time refusals move along the chain", "Watchdogs").
"""

from __future__ import annotations

import logging
from datetime import timedelta

from shared.adapters.ledger import RetryPlan, RunSnapshot, RunStatus
from shared.config.durations import describe_duration
from shared.config.model import Placement
from shared.handlers import budgets
from shared.handlers.rejections import alert_once, finish_run
from shared.handlers.walk import Submission, Walk
from shared.logs import log
from shared.model.alerts import AlertReason
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.runs import SkipClass
from shared.policy import deadlines, jobspec
from shared.policy.budgets import Verdict
from shared.policy.machines import draws_preemptible_quota, preemptible_quota_metric
from shared.policy.placement_order import resume_index, start_of_order
from shared.policy.records import describe_placement
from shared.policy.timing import BUDGET_RECHECK_EVERY
from shared.policy.watchdogs import (
    NoPlacementDue,
    alert_claim,
    no_placement_due,
    no_placement_limits,
)

logger = logging.getLogger(__name__)

UNSUITABLE_CLAIM_SCOPE = "unsuitable"
"""The scope of the once-per-run alert that some placement can never take the run's job."""


def reject(submission: Submission, walk: Walk, reasons: str) -> DispatchResult:
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


def refused(
    submission: Submission, walk: Walk, error: Exception, reason: AlertReason
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


def quota_refused(
    submission: Submission,
    walk: Walk,
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


def chain_refused(submission: Submission, walk: Walk, error: Exception) -> DispatchResult:
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


def no_placement(submission: Submission, walk: Walk) -> DispatchResult:
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
        placement_index=start_of_order(run, submission.template),
        reason="no placement could take the job",
    )
    if deadlines.too_late(deadlines.deadline_of(run), next_retry.at):
        walk.snapshot = snapshot
        return deadline_missed(
            submission,
            walk,
            "no placement can take the job now, and the next try "
            f"({next_retry.at.isoformat()}) would be too late",
            refusal_recorded=True,
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


def deadline_missed(
    submission: Submission, walk: Walk, why: str, *, refusal_recorded: bool = False
) -> DispatchResult:
    """The run cannot have a job running by its deadline (``policy.deadlines.too_late``): it
    ends FAILED with one ``deadline_missed`` alert naming every placement its attempts tried and
    this walk passed over, and why. No job is created: one created now would start too late.

    The walk's own refusals are recorded first when it claimed the attempt (as for any walk that
    created no job; ``refusal_recorded``: the caller did), so the run's record says what was
    tried."""
    snapshot, attempt_number = walk.snapshot, walk.attempt_number
    if walk.claimed and walk.last_refusal is not None and not refusal_recorded:
        snapshot = submission.ledger.record_refused_create(
            snapshot, attempt_number, walk.last_refusal, walk.recorded_skips()
        )
    run = snapshot.run
    recorded = set(deadlines.tried_lines(run))
    message = deadlines.missed_message(run, submission.template.name, why)
    fresh = [line for line in walk.lines if line not in recorded and not walk.claimed]
    if fresh:
        message += "\nThis try's placements:\n" + "\n".join(fresh)
    finish_run(
        submission.ledger,
        snapshot,
        RunStatus.FAILED,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.DEADLINE_MISSED,
        claim=AlertReason.DEADLINE_MISSED,
        message=message,
        what_to_do=deadlines.missed_what_to_do(run, submission.template.name),
        attempt=attempt_number,
    )
    log(
        logger,
        logging.ERROR,
        "run cannot start by its deadline; run failed",
        labels=submission.labels,
        start_deadline=deadlines.describe_deadline(run),
        why=why,
    )
    return DispatchResult(DispatchOutcome.REJECTED, run.run_id, detail=why)


def over_budget(
    submission: Submission, walk: Walk, admission: budgets.BudgetAdmission
) -> DispatchResult:
    """The attempt's worst case would pass a GPU-hour budget (``policy.budgets``); nothing was
    claimed. ``wait``: the run waits WAITING_BUDGET, its attempt published again by the
    reconciler every ``BUDGET_RECHECK_EVERY`` (each time dispatch checks again); ``reject`` (or
    a worst case larger than the whole budget, which no wait lets in): the run ends, REJECTED
    when none of its attempts had a job, else FAILED. Either way alerted once per attempt."""
    snapshot, attempt_number = walk.snapshot, walk.attempt_number
    run, now = snapshot.run, submission.now()
    detail = admission.describe()
    claim = alert_claim(AlertReason.BUDGET, f"attempt-{attempt_number}")
    if admission.verdict is Verdict.REJECT:
        status = RunStatus.FAILED if any(a.job_name for a in run.attempts) else RunStatus.REJECTED
        if walk.claimed:  # an earlier placement's create was refused: the attempt records it
            refusal = walk.last_refusal or {"message": detail, "class": "budget"}
            snapshot = submission.ledger.record_refused_create(
                snapshot, attempt_number, refusal, walk.recorded_skips()
            )
        never = [c for c in admission.blocking if c.never_fits]
        finish_run(
            submission.ledger,
            snapshot,
            status,
            config=submission.config,
            trigger=submission.trigger,
            reason=AlertReason.BUDGET,
            claim=claim,
            message=(
                f"attempt {attempt_number} of template {submission.template.name} was refused "
                f"by its GPU-hour budget: the run ends {status.value}.\n{detail}"
            ),
            what_to_do=(
                "lower the template's GPUs or timeout, or raise the budget's gpu_hours"
                if never
                else "raise the budget's gpu_hours, or set when_exceeded: wait to queue runs "
                "until GPU-hours fall out of the window"
            )
            + f"; then `vertex-dispatch retry {run.run_id}`",
            attempt=attempt_number,
        )
        log(logger, logging.ERROR, "run refused by its GPU-hour budget", labels=submission.labels,
            detail=detail)  # fmt: skip
        return DispatchResult(DispatchOutcome.REJECTED, run.run_id, detail=detail)
    next_retry = RetryPlan(
        at=now + BUDGET_RECHECK_EVERY,
        attempt=attempt_number,
        placement_index=resume_index(run, submission.template, attempt_number),
        reason="budget: " + "; ".join(c.describe() for c in admission.blocking),
    )
    snapshot = submission.ledger.wait_for_budget(snapshot, next_retry)  # or conflict
    alert_once(
        submission.ledger,
        snapshot.run,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.BUDGET,
        claim=claim,
        message=(
            f"attempt {attempt_number} of template {submission.template.name} waits for its "
            f"GPU-hour budget (WAITING_BUDGET):\n{detail}"
        ),
        what_to_do=(
            "nothing, if waiting is right: the run is retried every "
            f"{describe_duration(BUDGET_RECHECK_EVERY)} and starts once the budget frees; "
            f"else raise the budget's gpu_hours, or `vertex-dispatch cancel {run.run_id}`"
        ),
        attempt=attempt_number,
    )
    log(logger, logging.WARNING, "run waits for its GPU-hour budget", labels=submission.labels,
        detail=detail)  # fmt: skip
    return DispatchResult(DispatchOutcome.WAITING_BUDGET, run.run_id, detail=detail)


def _unsuitable_everywhere(submission: Submission, walk: Walk) -> DispatchResult:
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
    finish_run(
        submission.ledger,
        snapshot,
        RunStatus.FAILED,
        config=submission.config,
        trigger=submission.trigger,
        reason=AlertReason.NO_PLACEMENT,
        claim=due.alert_claim or AlertReason.NO_PLACEMENT,
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
