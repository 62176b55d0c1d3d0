"""The retry policy applied: a run whose last job ended + its classification → what happens next.

Pure: ``decide`` reads the run as recorded, the template's ``RetryPolicy`` and the
``Classification`` of the run's LAST attempt (the job that just ended), and returns a ``Decision``;
the caller records it (one compare-and-set) and then acts on it (publish a retry, alert once,
publish a completion). The clock and the jitter come in as ``now`` and ``rng``.

The rules (docs/architecture.md, "Peers we learned from": Kueue and SkyPilot):

- success → SUCCEEDED, and a completion message is due;
- cancelled → CANCELLED: someone stopped it on purpose; never retried, no alert (logged only);
- a class the policy's ``retry_on`` does not list → FAILED and an alert;
- CAPACITY (and QUOTA or INVALID_SPEC when listed in ``retry_on``) → the NEXT placement of the
  chain (of the run's recorded order, for ``placement_order: learned``), at once; past the end
  of the chain → FAILED, alert ``no_placement``;
- INFRASTRUCTURE (and UNKNOWN when listed) → the SAME placement after an exponential backoff:
  ``base * 2^(n-1)`` capped at ``cap``, where n counts this run's failures of those classes so far
  (this one included), with equal jitter (a delay drawn in [backoff/2, backoff]);
- USER_CODE → the same placement at once, while ``user_failures`` lasts: it counts the run's
  user-code failures only, so capacity waits and infrastructure retries never spend it; past it →
  FAILED, alert ``retries_exhausted`` with the job's error;
- QUOTA (not listed) → FAILED, alert ``quota`` naming the metric to raise (for FLEX_START the
  preemptible metric of the job's GPU); INVALID_SPEC (not listed) → FAILED (not REJECTED: a job
  was submitted), alert ``invalid_spec`` with the rule the service named, or ``permission``;
- every retry needs an attempt left: ``attempts`` bounds all attempts of a run, fallbacks
  included; when none is left → FAILED, alert ``retries_exhausted``;
- a retry or fallback of a run with a deadline (``start_by``, none of its jobs started yet) that
  cannot start before it (``deadlines.too_late`` at the retry's time) → FAILED, alert
  ``deadline_missed`` naming every placement tried.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from shared.config.durations import describe_duration
from shared.config.model import (
    FailureClass,
    FlexStartPlacement,
    Placement,
    SpotPlacement,
    Template,
)
from shared.model.alerts import AlertReason, Severity
from shared.model.errors import PermanentError
from shared.model.runs import Attempt, InvalidTransition, RetryPlan, Run, RunStatus
from shared.policy import deadlines
from shared.policy.classify import PERMISSION_CODES, Classification, quota_metric
from shared.policy.cooldown import untried_passed_over
from shared.policy.machines import draws_preemptible_quota, preemptible_quota_metric
from shared.policy.placement_order import recorded_order
from shared.policy.records import chain_record, describe_placement, placement_record

EXPLANATION_CHARS: Final = 300


class Move(enum.Enum):
    """Where a retried failure goes next."""

    NEXT_PLACEMENT = "next placement"  # the placement failed to take the job: try the next one
    SAME_PLACEMENT_BACKOFF = "same placement after backoff"  # the failure may pass with time
    SAME_PLACEMENT_NOW = "same placement now"  # the user-failure budget allows another try


# How each retryable class moves; CANCELLED has no entry: it is never retried.
MOVE_BY_CLASS: Final[Mapping[FailureClass, Move]] = {
    FailureClass.CAPACITY: Move.NEXT_PLACEMENT,
    FailureClass.QUOTA: Move.NEXT_PLACEMENT,  # another region or GPU draws on another quota
    FailureClass.INVALID_SPEC: Move.NEXT_PLACEMENT,  # another placement renders another spec
    FailureClass.INFRASTRUCTURE: Move.SAME_PLACEMENT_BACKOFF,
    FailureClass.UNKNOWN: Move.SAME_PLACEMENT_BACKOFF,
    FailureClass.USER_CODE: Move.SAME_PLACEMENT_NOW,
}
BACKOFF_CLASSES: Final[frozenset[str]] = frozenset(
    kind.value for kind, move in MOVE_BY_CLASS.items() if move is Move.SAME_PLACEMENT_BACKOFF
)

# The alert a failure the policy does not retry raises.
REASON_BY_CLASS: Final[Mapping[FailureClass, AlertReason]] = {
    FailureClass.CAPACITY: AlertReason.NO_PLACEMENT,
    FailureClass.QUOTA: AlertReason.QUOTA,
    FailureClass.INVALID_SPEC: AlertReason.INVALID_SPEC,
    FailureClass.INFRASTRUCTURE: AlertReason.RETRIES_EXHAUSTED,
    FailureClass.UNKNOWN: AlertReason.RETRIES_EXHAUSTED,
    FailureClass.USER_CODE: AlertReason.RETRIES_EXHAUSTED,
}


class PlacementNotInChain(PermanentError):
    """An attempt's recorded placement is no longer in its template's placement chain."""


@dataclass(frozen=True)
class AlertSpec:
    """An alert the run needs: the caller adds the run, attempts and console URL and sends it."""

    reason: str  # an AlertReason value
    message: str  # what happened, naming the job's error
    what_to_do: str  # the change that fixes it
    severity: Severity = Severity.ERROR


@dataclass(frozen=True)
class Decision:
    """What the run becomes after its last job ended."""

    status: RunStatus
    retry: RetryPlan | None = None  # the next attempt, due from retry.at
    alert: AlertSpec | None = None
    complete: bool = False  # publish a completion message
    explanation: str = ""  # one line for logs


def placement_index(template: Template, attempt: Attempt) -> int:
    """Where ``attempt``'s placement is in ``template``'s chain; ``PlacementNotInChain`` if gone."""
    recorded = chain_record(attempt.placement)
    for index, placement in enumerate(template.placements):
        if placement_record(placement) == recorded:
            return index
    raise PlacementNotInChain(
        f"attempt {attempt.number} ran on placement {recorded}, which is not in the placement "
        f"chain of template {template.name!r} any more (the config changed since): the run "
        "cannot move along the chain; start it again with `vertex-dispatch retry RUN`"
    )


def backoff_delay(template: Template, failures: int, rng: random.Random) -> timedelta:
    """The wait before the retry after the ``failures``-th backoff failure (1 for the first).

    ``base * 2^(failures-1)`` capped at ``cap``, with equal jitter: a delay drawn uniformly in
    [backoff/2, backoff], so concurrent runs spread out yet none retries early or past the cap.
    """
    policy = template.retry
    exponent = max(failures - 1, 0)
    cap_seconds = policy.backoff_cap.total_seconds()
    backoff = min(cap_seconds, policy.backoff_base.total_seconds() * 2**exponent)
    # Whole seconds read better in logs; truncating keeps the delay within its bounds.
    return timedelta(seconds=int(backoff / 2 + rng.uniform(0, backoff / 2)))


def decide(
    run: Run,
    template: Template | None,
    classification: Classification,
    *,
    now: datetime,
    rng: random.Random,
) -> Decision:
    """What ``run`` does now that its last job ended as ``classification`` says.

    ``template`` is None when the run's template left the config: a success or a cancel is
    decided as always; any failure ends the run and alerts (there is no policy to retry by).
    """
    failed = run.last_attempt
    if failed is None:
        raise InvalidTransition(
            f"run {run.run_id} has no attempt, so no job of it can have ended: decide only "
            "after a job of the run was recorded"
        )
    if classification.succeeded:
        return Decision(
            RunStatus.SUCCEEDED,
            complete=True,
            explanation=f"attempt {failed.number} succeeded: {classification.summary}",
        )
    failure = classification.failure or FailureClass.UNKNOWN
    if failure is FailureClass.CANCELLED:
        return Decision(
            RunStatus.CANCELLED,
            explanation=f"attempt {failed.number} was cancelled; cancelled jobs are never retried",
        )
    if template is None:
        return _failed(
            AlertReason.TEMPLATE_GONE,
            f"run {run.run_id}: {classification.summary}; its template {run.template!r} is no "
            "longer in the config, so no retry policy can decide whether to try again",
            f"restore template {run.template!r} in the config, then "
            f"`vertex-dispatch retry {run.run_id}`",
        )
    if not _policy_retries(template, failure):
        return _not_retried(run, template, failed, classification, failure)
    try:
        index = placement_index(template, failed)
    except PlacementNotInChain as error:
        return _failed(
            AlertReason.NO_PLACEMENT,
            f"run {run.run_id}: {classification.summary}; {error}",
            "add the placement back to the template, or start a new run",
        )
    return _retry(run, template, failed, classification, failure, index, now=now, rng=rng)


def _policy_retries(template: Template, failure: FailureClass) -> bool:
    if failure is FailureClass.USER_CODE:
        return template.retry.user_failures > 0
    return failure in template.retry.retry_on


def _retry(
    run: Run,
    template: Template,
    failed: Attempt,
    classification: Classification,
    failure: FailureClass,
    index: int,
    *,
    now: datetime,
    rng: random.Random,
) -> Decision:
    policy = template.retry
    move = MOVE_BY_CLASS[failure]
    deadline = deadlines.deadline_of(run, failure.value)
    if deadlines.too_late(deadline, now):
        return _deadline_missed(run, template, classification, "its deadline has come")
    next_index = _next_placement(run, template, index)
    if move is Move.NEXT_PLACEMENT and next_index is None:
        return _chain_exhausted(run, template, classification)
    if move is Move.SAME_PLACEMENT_NOW:
        used = _user_failures(run) + 1
        if used > policy.user_failures:
            return _user_budget_spent(run, template, classification, used)
    next_number = failed.number + 1
    if next_number > policy.attempts:
        return _attempts_exhausted(run, template, classification)
    if move is Move.NEXT_PLACEMENT and next_index is not None:  # None returned above
        plan = RetryPlan(now, next_number, next_index, failure.value)
        where = describe_placement(template.placements[next_index])
        why = f"resubmit at once to placement {next_index} ({where})"
    elif move is Move.SAME_PLACEMENT_BACKOFF:
        delay = backoff_delay(template, _backoff_failures(run, failure), rng)
        plan = RetryPlan(now + delay, next_number, index, failure.value)
        why = f"retry placement {index} after {describe_duration(delay)}"
    else:
        plan = RetryPlan(now, next_number, index, failure.value)
        why = f"retry placement {index} at once (user failure {used} of {policy.user_failures})"
    if deadlines.too_late(deadline, plan.at):
        return _deadline_missed(
            run,
            template,
            classification,
            f"its next try ({why}) would come at {plan.at.isoformat()}, too late to start by it",
        )
    return Decision(
        RunStatus.WAITING_RETRY,
        retry=plan,
        explanation=f"attempt {failed.number} {classification.summary}; {why} as attempt "
        f"{next_number} of {policy.attempts}",
    )


def _next_placement(run: Run, template: Template, index: int) -> int | None:
    """Where the chain goes on after placement ``index`` failed: the next placement, in the
    run's order (its recorded learned order, else the chain's: ``policy.placement_order``), no
    attempt of the run has run on, else the first one (in that order) a walk of this run passed
    over for cooldown and never tried (a cooldown reorders a walk, so the run may have run
    further down the chain first, or moved past one: ``policy.cooldown.untried_passed_over``),
    else None: the chain is exhausted."""
    order = recorded_order(run, template) or tuple(range(len(template.placements)))
    ran = [chain_record(attempt.placement) for attempt in run.attempts]
    after = order.index(index) + 1 if index in order else len(order)
    for later in order[after:]:
        if placement_record(template.placements[later]) not in ran:
            return later
    owed = set(untried_passed_over(template, run.attempts))
    return next((candidate for candidate in order if candidate in owed), None)


def _user_failures(run: Run) -> int:
    """User-code failures among the attempts before the last one (whose class is being decided)."""
    return sum(1 for attempt in run.attempts[:-1] if _recorded_class(attempt) == "user_code")


def _backoff_failures(run: Run, failure: FailureClass) -> int:
    """Backoff-class failures of the run so far, the last attempt's (``failure``) included."""
    earlier = sum(1 for attempt in run.attempts[:-1] if _recorded_class(attempt) in BACKOFF_CLASSES)
    return earlier + (1 if failure.value in BACKOFF_CLASSES else 0)


def _recorded_class(attempt: Attempt) -> str | None:
    return attempt.error.get("class") if attempt.error else None


def _not_retried(
    run: Run,
    template: Template,
    failed: Attempt,
    classification: Classification,
    failure: FailureClass,
) -> Decision:
    reason = REASON_BY_CLASS[failure]
    if failure is FailureClass.QUOTA:
        return _failed(reason, *_quota_alert(run, template, failed, classification))
    if failure is FailureClass.INVALID_SPEC:
        return _failed(*_invalid_spec_alert(run, template, classification))
    if failure is FailureClass.USER_CODE:
        return _user_budget_spent(run, template, classification, _user_failures(run) + 1)
    return _failed(
        reason,
        f"run {run.run_id}: attempt {failed.number} {classification.summary}; template "
        f"{template.name!r} does not retry {failure.value} failures",
        f"add {failure.value} to retry.retry_on of template {template.name!r} if such failures "
        f"should be retried; then start the run again with `vertex-dispatch retry {run.run_id}`",
    )


def _quota_alert(
    run: Run, template: Template, failed: Attempt, classification: Classification
) -> tuple[str, str]:
    metric = _metric_to_raise(template, failed, classification)
    return (
        f"run {run.run_id}: attempt {failed.number} hit a quota ceiling in {failed.region}: "
        f"{classification.summary}",
        f"raise the quota {metric} in region {failed.region} (Google Cloud console, IAM & Admin > "
        f"Quotas, service aiplatform.googleapis.com), or add a placement in a region with quota "
        f"to template {template.name!r}; then `vertex-dispatch retry {run.run_id}`",
    )


def _metric_to_raise(template: Template, failed: Attempt, classification: Classification) -> str:
    """FLEX_START and Spot draw on the preemptible quota (docs/architecture.md, "The Vertex AI
    rules"), whatever metric the error names."""
    placement = _placement_of(template, failed)
    if draws_preemptible_quota(placement):
        metric = preemptible_quota_metric(_accelerator_type(template, placement) or "")
        if metric:
            return metric
    return quota_metric(classification.message) or "named in the job's error"


def _placement_of(template: Template, attempt: Attempt) -> Placement | None:
    try:
        return template.placements[placement_index(template, attempt)]
    except PlacementNotInChain:
        return None


def _accelerator_type(
    template: Template, placement: FlexStartPlacement | SpotPlacement
) -> str | None:
    if placement.machine and placement.machine.accelerator_type:
        return placement.machine.accelerator_type
    pools = template.job_spec.get("workerPoolSpecs") or ()
    machine = pools[0].get("machineSpec", {}) if pools else {}
    return machine.get("acceleratorType")


def _invalid_spec_alert(
    run: Run, template: Template, classification: Classification
) -> tuple[str, str, str]:
    rule = classification.message or classification.summary
    if classification.code in PERMISSION_CODES:
        return (
            AlertReason.PERMISSION,
            f"run {run.run_id}: Vertex AI refused the job for lack of permission: {rule}",
            f"grant the permission the error names to template {template.name!r}'s service "
            f"account (or to the Vertex AI service agent), then "
            f"`vertex-dispatch retry {run.run_id}`",
        )
    return (
        AlertReason.INVALID_SPEC,
        f"run {run.run_id}: Vertex AI rejected the job of template {template.name!r}: {rule}",
        f"change template {template.name!r} so that it keeps this rule: {rule}; check it with "
        f"`vertex-dispatch validate`, then `vertex-dispatch retry {run.run_id}`",
    )


def _chain_exhausted(run: Run, template: Template, classification: Classification) -> Decision:
    return _failed(
        AlertReason.NO_PLACEMENT,
        f"run {run.run_id}: the last placement of template {template.name!r}'s chain "
        f"({len(template.placements)} placements) could not take the job: "
        f"{classification.summary}",
        f"add a placement to template {template.name!r} (another region, another GPU, or a "
        f"FLEX_START placement with a longer max_wait), or retry when capacity returns: "
        f"`vertex-dispatch retry {run.run_id}`",
    )


def _deadline_missed(
    run: Run, template: Template, classification: Classification, why: str
) -> Decision:
    """No retry or fallback of ``run`` can have a job running by its deadline: FAILED, with one
    ``deadline_missed`` alert naming every placement tried (``policy.deadlines``)."""
    return _failed(
        AlertReason.DEADLINE_MISSED,
        deadlines.missed_message(
            run,
            template.name,
            f"its last job {classification.summary}, and {why}",
            last_ended=(
                f"{classification.failure.value}: {classification.message}"
                if classification.failure
                else classification.summary
            ),
        ),
        deadlines.missed_what_to_do(run, template.name),
    )


def _user_budget_spent(
    run: Run, template: Template, classification: Classification, used: int
) -> Decision:
    allowed = template.retry.user_failures
    return _failed(
        AlertReason.RETRIES_EXHAUSTED,
        f"run {run.run_id}: the training code failed ({used} user-code failure(s), "
        f"user_failures allows {allowed} retr{'y' if allowed == 1 else 'ies'}): "
        f"{classification.message or classification.summary}",
        "read the job's logs, fix the training code or its inputs, then "
        f"`vertex-dispatch retry {run.run_id}`; to retry such failures by themselves, raise "
        f"retry.user_failures of template {template.name!r}",
    )


def _attempts_exhausted(run: Run, template: Template, classification: Classification) -> Decision:
    attempts = template.retry.attempts
    return _failed(
        AlertReason.RETRIES_EXHAUSTED,
        f"run {run.run_id}: all {attempts} attempts allowed by template {template.name!r} are "
        f"used; the last one ended {classification.summary}",
        f"find why the attempts failed (the alert lists each one), then raise retry.attempts of "
        f"template {template.name!r} or `vertex-dispatch retry {run.run_id}`",
    )


def _failed(reason: str, message: str, what_to_do: str) -> Decision:
    return Decision(
        RunStatus.FAILED,
        alert=AlertSpec(reason=str(reason), message=message, what_to_do=what_to_do),
        explanation=f"{reason}: {_one_line(message)}",
    )


def _one_line(text: str) -> str:
    """Log lines stay single: a job's error may quote a whole traceback."""
    collapsed = " ".join(text.split())
    if len(collapsed) <= EXPLANATION_CHARS:
        return collapsed
    return collapsed[: EXPLANATION_CHARS - 1] + "…"
