"""Reserve an attempt's worst case under its GPU-hour budgets before its intent is claimed.

``reserve`` is called by the submission once per delivery, just before the attempt's first claim
(docs/architecture.md, "GPU-hour budgets"). For each scope the run is held to (its template's,
the config's): read the scope's book, settle the reservations whose attempts are over (their
runs read from the ledger: what each held comes from its history), and decide
(``policy.budgets.check``). Admitted: the reservation (and any threshold alert claim) is written
to every book in one atomic compare-and-set batch; two submissions racing for the last GPU-hours
both read the same books, only the first batch lands, and the other reads again and finds the
budget taken. Waiting or refused: only the settling and the alert claims are written.

Threshold alerts (80%, 100%) are claimed in the book with the same write, then sent; a failed
send gives the claim back and raises, so the redelivery sends it (as ``alert_once`` does for a
run).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from shared.adapters.alerts import send_alert
from shared.adapters.ledger import MAX_REAPPLY, Ledger, LedgerConflict, Run
from shared.config.durations import describe_duration
from shared.handlers.rejections import attempts_summary
from shared.handlers.walk import Submission
from shared.logs import log
from shared.model.alerts import Alert, AlertReason
from shared.model.budgets import BudgetBook, Reservation, reservation_key
from shared.policy import budgets
from shared.policy.budgets import BudgetCheck, Verdict, WorstCase

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BudgetAdmission:
    """What the budgets said of one submission."""

    verdict: Verdict
    checks: tuple[BudgetCheck, ...] = ()  # one per scope; empty: no budget applies
    request: WorstCase | None = None

    @property
    def blocking(self) -> tuple[BudgetCheck, ...]:
        """The scopes that did not admit it."""
        return tuple(c for c in self.checks if c.verdict is not Verdict.ADMIT)

    def describe(self) -> str:
        lines = [c.describe() for c in (self.blocking or self.checks)]
        if self.request is not None:
            lines.append(f"worst case of the attempt: {self.request.text}")
        return "\n".join(lines)


ADMITTED = BudgetAdmission(Verdict.ADMIT)


def reserve(submission: Submission, run: Run, attempt: int, request: WorstCase) -> BudgetAdmission:
    """Reserve ``request`` for attempt ``attempt`` of ``run`` under every budget it is held to,
    or say why not (wait, reject). No budget: admitted, nothing read."""
    scopes = budgets.budget_scopes(submission.config, submission.template)
    if not scopes:
        return ADMITTED
    ledger = submission.ledger
    key = reservation_key(run.run_id, attempt)
    # A takeover or a move along the chain is admitted; an idle attempt (its create failed while
    # the run waits for a placement) whose reservation was freed must fit again.
    claimed = budgets.live_claim(run, attempt)
    for _ in range(MAX_REAPPLY):
        read = ledger.budget_books([scope for scope, _ in scopes])
        now = submission.now()
        runs = _runs_of(ledger, [book for book, _ in read], run)
        checks: list[BudgetCheck] = []
        writes: list[tuple[BudgetBook, datetime | None]] = []
        claims: list[tuple[BudgetCheck, tuple[str, ...]]] = []
        for (scope, budget), (book, known) in zip(scopes, read, strict=True):
            settled = budgets.settle(book, runs, now, budget.per)
            result = budgets.check(
                scope, budget, settled, key, request.gpu_hours, now, claimed=claimed
            )
            checks.append(result)
            owed = budgets.threshold_claims(result, settled, now)
            claims.append((result, owed))
            writes.append((budgets.with_alerted(settled, owed), known))
        verdict = budgets.combined(checks)
        if verdict is Verdict.ADMIT:
            writes = [
                (
                    budgets.with_reservation(book, _reservation(book, run, attempt, request, now)),
                    known,
                )
                for book, known in writes
            ]
        changed = [(book, known) for (book, known), (old, _) in zip(writes, read, strict=True)
                   if book != old]  # fmt: skip
        try:
            if changed:
                ledger.write_budget_books(changed)
        except LedgerConflict:
            continue
        admission = BudgetAdmission(verdict, tuple(checks), request)
        _send_threshold_alerts(submission, run, claims)
        log(
            logger,
            logging.INFO if verdict is Verdict.ADMIT else logging.WARNING,
            f"budget {verdict.value}",
            labels=submission.labels,
            attempt=attempt,
            worst_case_gpu_hours=round(request.gpu_hours, 3),
            budgets=[
                {
                    "scope": c.scope,
                    "spent": round(c.spent, 3),
                    "reserved": round(c.reserved, 3),
                    "gpu_hours": c.budget.gpu_hours,
                    "verdict": c.verdict.value,
                }
                for c in checks
            ],
        )
        return admission
    raise LedgerConflict(
        f"the budgets of run {run.run_id} kept changing under {MAX_REAPPLY} attempts to reserve; "
        "retry later"
    )


def _reservation(
    book: BudgetBook, run: Run, attempt: int, request: WorstCase, now: datetime
) -> Reservation:
    """The attempt's reservation in ``book``: the one it holds (raised to ``request`` if that
    is larger), else a new one."""
    held = book.reservations.get(reservation_key(run.run_id, attempt))
    if held is not None:
        if held.gpu_hours >= request.gpu_hours:
            return held
        return replace(held, gpu_hours=request.gpu_hours, gpus=max(held.gpus, request.gpus))
    return Reservation(run.run_id, attempt, run.template, request.gpu_hours, now, request.gpus)


def _runs_of(ledger: Ledger, books: Sequence[BudgetBook], own: Run) -> dict[str, Run | None]:
    """The runs of the books' reservations, read now in one batch (the submitting run as given):
    whether each reserved attempt is over, and what it held, is in its run's history."""
    others = {
        reservation.run_id
        for book in books
        for reservation in book.reservations.values()
        if reservation.run_id != own.run_id
    }
    runs: dict[str, Run | None] = {
        run_id: snapshot.run if snapshot is not None else None
        for run_id, snapshot in ledger.get_runs(sorted(others)).items()
    }
    runs[own.run_id] = own
    return runs


def _send_threshold_alerts(
    submission: Submission, run: Run, claims: Sequence[tuple[BudgetCheck, tuple[str, ...]]]
) -> None:
    """Send each threshold alert this submission claimed; a failed send gives the claim back
    and raises (the redelivery claims and sends it again)."""
    for check, owed in claims:
        for claim in owed:
            percent = int(claim.split("@", 1)[0])
            try:
                _send_threshold_alert(submission, run, check, percent, claim)
            except Exception:
                _release_claim(submission.ledger, check.scope, claim)
                raise


def _send_threshold_alert(
    submission: Submission, run: Run, check: BudgetCheck, percent: int, claim: str
) -> None:
    budget = check.budget
    reached = "reached" if percent < 100 else "is at or over"
    send_alert(
        Alert(
            run_id=run.run_id,
            run_key=run.run_key,
            template=run.template or None,
            trigger=submission.trigger,
            reason=AlertReason.BUDGET_THRESHOLD,
            message=(
                f"{budgets.describe_scope(check.scope)} {reached} {percent}% of its "
                f"{budget.gpu_hours:g} GPU-hours per {describe_duration(budget.per)} "
                f"(counting run {run.run_id}'s worst case): {check.describe()}"
            ),
            what_to_do=(
                "raise the budget's gpu_hours, or expect runs to "
                + (
                    "wait (WAITING_BUDGET)"
                    if budget.when_exceeded.value == "wait"
                    else "be refused"
                )
                + " until GPU-hours fall out of the window; this alert comes once per window"
            ),
            attempts=attempts_summary(run),
            claim=f"{check.scope}:{claim}",
        ),
        submission.config.alerts_topic,
        webhook=submission.config.alert_webhook,
    )


def _release_claim(ledger: Ledger, scope: str, claim: str) -> None:
    for _ in range(MAX_REAPPLY):
        [(book, known)] = ledger.budget_books([scope])
        if claim not in book.alerted:
            return
        try:
            ledger.write_budget_books([(budgets.without_alerted(book, [claim]), known)])
            return
        except LedgerConflict:
            continue
