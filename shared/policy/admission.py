"""Retry admission: whether a retry message may start, resume or reopen an attempt of a run.

Every retry (the job-state function's, the reconciler's, an operator's) goes through the same door
as new work, and this is the one place that decides what the door does with it, from the run as
the ledger holds it and the template the config has now. Dispatch acts on the verdict; the
property tests check dispatch against it.

The rule that matters most: a new attempt starts only while no job of the run is live and the run
awaits that attempt (the retry its last decision planned, its first attempt never claimed, or an
operator's grant). Anything else (a retry for attempt 3 while attempt 2 runs) would be a second
GPU job. An attempt already claimed is resumed: the submission settles it (a duplicate, a job
found by label, or a takeover of a stale intent).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from shared.config.model import Template
from shared.model.runs import LIVE_STATUSES, RETRY_WAITING_STATUSES, Run, RunStatus


class RetryVerdict(enum.Enum):
    """What dispatch does with a retry message."""

    RESUME = "resume"  # the attempt is claimed already: the submission settles it
    START = "start"  # a new attempt the run awaits
    REOPEN = "reopen"  # an operator's retry of an ended run: reopen it, then start the attempt
    NOT_AWAITED = "not_awaited"  # acknowledged, no job (``reason`` says why)
    REFUSED = "refused"  # the message asks what the template forbids: rejected and alerted
    END_RUN = "end_run"  # a waiting run whose template left the config: end it, alerted once


@dataclass(frozen=True)
class RetryAdmission:
    verdict: RetryVerdict
    reason: str = ""  # for NOT_AWAITED, REFUSED and END_RUN: a sentence a human reads


def admit_retry(
    run: Run, template: Template | None, attempt: int, placement_index: int
) -> RetryAdmission:
    """The verdict on a retry message for ``attempt`` at ``placement_index`` of ``run``;
    ``template`` is the run's template as the config has it now (None: it left the config)."""
    claimed = run.attempt(attempt) is not None
    # The ledger says whether an operator allowed this attempt; a message's own say-so (its
    # reason) is anyone's who may publish on the requests topic.
    by_operator = run.operator_grant == attempt
    if template is not None:
        # A claimed attempt was within the budget (or granted) when it was claimed.
        problem = retry_problem(
            run.run_id, template, attempt, placement_index, within_budget=by_operator or claimed
        )
        if problem is not None:
            return RetryAdmission(RetryVerdict.REFUSED, problem)
    gone = "its template left the config"
    if claimed:
        # Without its template, its job (if any) is the job-state function's to follow.
        if template is None:
            return RetryAdmission(RetryVerdict.NOT_AWAITED, gone)
        return RetryAdmission(RetryVerdict.RESUME)
    if not retry_awaited(run, attempt, by_operator=by_operator):
        return RetryAdmission(RetryVerdict.NOT_AWAITED, "the run does not await it")
    if template is None:
        if run.status.is_terminal():
            return RetryAdmission(RetryVerdict.NOT_AWAITED, gone)
        # A waiting run: every later retry (the reconciler's included) would fail the same way.
        return RetryAdmission(
            RetryVerdict.END_RUN,
            f"run {run.run_id} used template {run.template!r}, which the config no longer has; "
            f"restore the template, then `vertex-dispatch retry {run.run_id}`",
        )
    if by_operator and run.status.is_terminal():
        return RetryAdmission(RetryVerdict.REOPEN)
    return RetryAdmission(RetryVerdict.START)


def retry_awaited(run: Run, attempt_number: int, *, by_operator: bool) -> bool:
    """Whether a retry message for ``attempt_number`` may start, or resume, that attempt.

    An attempt already claimed may always be resumed. A new one may start only while no job of
    the run is live, and only if the run awaits it: the retry its last decision planned, its
    first attempt never claimed, or an operator's.
    """
    if run.attempt(attempt_number) is not None:
        return True
    if run.status in LIVE_STATUSES:
        return False
    if by_operator:
        return True
    if run.status in RETRY_WAITING_STATUSES:
        return run.next_retry is not None and run.next_retry.attempt == attempt_number
    return run.status is RunStatus.ACCEPTED and not run.attempts and attempt_number == 1


def retry_problem(
    run_id: str, template: Template, attempt: int, placement_index: int, *, within_budget: bool
) -> str | None:
    """Why the template forbids a retry for ``attempt`` at ``placement_index``, or None;
    ``within_budget`` lifts the attempt budget (an operator's grant, an attempt already claimed).
    """
    if placement_index >= len(template.placements):
        return (
            f"retry of run {run_id} asks for placement {placement_index}, but "
            f"template {template.name} has {len(template.placements)}"
        )
    if attempt > template.retry.attempts and not within_budget:
        return (
            f"retry of run {run_id} asks for attempt {attempt}, over the "
            f"{template.retry.attempts} attempts template {template.name} allows"
        )
    return None
