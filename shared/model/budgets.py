"""GPU-hour budgets: what the ledger keeps of one budget scope (a template's, or the config's).

Plain data, no cloud import. The arithmetic and the decision are ``shared.policy.budgets``; the
store is the ledger (``Ledger.budget_books``, ``Ledger.write_budget_books``), one small document
per scope, written only by compare-and-set (several scopes of one submission in one atomic
batch), so that two submissions racing for the last GPU-hours never both reserve them::

    vertex-dispatch-runs-budgets/{config | template-NAME}
      scope         "config" or "template:NAME"
      reservations  {RUN_ID#ATTEMPT: {run_id, attempt, template, gpu_hours, at, gpus}}
                    the worst case of each attempt admitted and not yet ended
      settled       {RUN_ID#ATTEMPT: {run_id, attempt, template, gpus, started_at, ended_at}}
                    what each ended attempt really held, from its history, kept while its end
                    is inside the window
      alerted       ["80@WINDOW_START", "100@WINDOW_START"]: the threshold alerts claimed
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

CONFIG_SCOPE = "config"
TEMPLATE_SCOPE_PREFIX = "template:"


def template_scope(template: str) -> str:
    """The scope of ``template``'s own budget."""
    return TEMPLATE_SCOPE_PREFIX + template


def reservation_key(run_id: str, attempt: int) -> str:
    """The map key of an attempt's reservation (and, once it ended, of its settled figures)."""
    return f"{run_id}#{attempt}"


@dataclass(frozen=True)
class Reservation:
    """The worst case of an attempt admitted under a budget, held until the attempt ends."""

    run_id: str
    attempt: int
    template: str
    gpu_hours: float  # GPUs x timeout (a sweep's x max_trials): the most it may spend
    at: datetime  # when it was reserved (just before its intent was claimed)
    gpus: int = 0  # held at once, for its settled figures when its history records none

    @property
    def key(self) -> str:
        return reservation_key(self.run_id, self.attempt)


@dataclass(frozen=True)
class Settled:
    """What an ended attempt held, read from its history: counted while inside the window."""

    run_id: str
    attempt: int
    template: str
    gpus: int
    started_at: datetime
    ended_at: datetime

    @property
    def key(self) -> str:
        return reservation_key(self.run_id, self.attempt)


@dataclass(frozen=True)
class BudgetBook:
    """One budget scope's document."""

    scope: str
    reservations: Mapping[str, Reservation] = field(default_factory=dict)
    settled: Mapping[str, Settled] = field(default_factory=dict)
    alerted: tuple[str, ...] = ()


def book_to_document(book: BudgetBook) -> dict[str, Any]:
    return {
        "scope": book.scope,
        "reservations": {
            key: {
                "run_id": r.run_id,
                "attempt": r.attempt,
                "template": r.template,
                "gpu_hours": r.gpu_hours,
                "at": r.at,
                "gpus": r.gpus,
            }
            for key, r in book.reservations.items()
        },
        "settled": {
            key: {
                "run_id": s.run_id,
                "attempt": s.attempt,
                "template": s.template,
                "gpus": s.gpus,
                "started_at": s.started_at,
                "ended_at": s.ended_at,
            }
            for key, s in book.settled.items()
        },
        "alerted": list(book.alerted),
    }


def book_from_document(scope: str, document: Mapping[str, Any] | None) -> BudgetBook:
    """The book a document holds; an empty one for a scope never written."""
    if not document:
        return BudgetBook(scope)
    reservations = {
        key: Reservation(
            run_id=entry["run_id"],
            attempt=int(entry["attempt"]),
            template=entry.get("template") or "",
            gpu_hours=float(entry["gpu_hours"]),
            at=entry["at"],
            gpus=int(entry.get("gpus") or 0),
        )
        for key, entry in (document.get("reservations") or {}).items()
    }
    settled = {
        key: Settled(
            run_id=entry["run_id"],
            attempt=int(entry["attempt"]),
            template=entry.get("template") or "",
            gpus=int(entry.get("gpus") or 0),
            started_at=entry["started_at"],
            ended_at=entry["ended_at"],
        )
        for key, entry in (document.get("settled") or {}).items()
    }
    return BudgetBook(
        scope, reservations, settled, tuple(str(a) for a in document.get("alerted") or ())
    )
