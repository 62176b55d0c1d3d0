"""GPU-hour budgets: what the ledger keeps of one budget scope (a template's, or the config's).

Plain data, no cloud import. The arithmetic and the decision are ``shared.policy.budgets``; the
store is the ledger (``Ledger.budget_books``, ``Ledger.write_budget_books``), one small document
per scope, written only by compare-and-set (several scopes of one submission in one atomic
batch), so that two submissions racing for the last GPU-hours never both reserve them::

    vertex-dispatch-runs-budgets/{config | template-NAME}
      scope         "config" or "template:NAME"
      reservations  {RUN_ID#ATTEMPT: {run_id, attempt, template, gpu_hours, at, gpus}}
                    the worst case of each attempt admitted and not yet ended
      spent_by_hour {"2026-03-10T12": 6.5, ...}: the GPU-hours ended attempts really held
                    (from their histories), summed per UTC hour they were held in; an hour is
                    kept while it overlaps the window
      alerted       ["80@WINDOW_START", "100@WINDOW_START"]: the threshold alerts claimed

Its size is bounded by the window, not by the number of attempts: at most ``per`` / 1 h + 1
hours (a 7-day budget: 169 entries, about 4 KiB), however many attempts a config-wide budget
settles. A document written before the hours were kept (``settled``: one entry per ended
attempt) is read into hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

CONFIG_SCOPE = "config"
TEMPLATE_SCOPE_PREFIX = "template:"


def template_scope(template: str) -> str:
    """The scope of ``template``'s own budget."""
    return TEMPLATE_SCOPE_PREFIX + template


def reservation_key(run_id: str, attempt: int) -> str:
    """The map key of an attempt's reservation."""
    return f"{run_id}#{attempt}"


@dataclass(frozen=True)
class Reservation:
    """The worst case of an attempt admitted under a budget, held until the attempt ends."""

    run_id: str
    attempt: int
    template: str
    gpu_hours: float  # GPUs x timeout (a sweep's x max_trials): the most it may spend
    at: datetime  # when it was reserved (just before its intent was claimed)
    gpus: int = 0  # held at once, for what it held when its history records no GPUs

    @property
    def key(self) -> str:
        return reservation_key(self.run_id, self.attempt)


@dataclass(frozen=True)
class BudgetBook:
    """One budget scope's document."""

    scope: str
    reservations: Mapping[str, Reservation] = field(default_factory=dict)
    spent_by_hour: Mapping[datetime, float] = field(default_factory=dict)  # UTC hour -> GPU-h
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
        "spent_by_hour": {
            hour_key(hour): gpu_hours for hour, gpu_hours in sorted(book.spent_by_hour.items())
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
    spent_by_hour: dict[datetime, float] = {}
    for key, gpu_hours in (document.get("spent_by_hour") or {}).items():
        hour = hour_from_key(key)
        spent_by_hour[hour] = spent_by_hour.get(hour, 0.0) + float(gpu_hours)
    for entry in (document.get("settled") or {}).values():  # written before the hours were kept
        add_held(spent_by_hour, int(entry.get("gpus") or 0), entry["started_at"], entry["ended_at"])
    return BudgetBook(
        scope, reservations, spent_by_hour, tuple(str(a) for a in document.get("alerted") or ())
    )


HOUR = timedelta(hours=1)
_HOUR_KEY = "%Y-%m-%dT%H"


def hour_of(moment: datetime) -> datetime:
    """The start of the UTC hour ``moment`` falls in."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_key(hour: datetime) -> str:
    return hour.astimezone(UTC).strftime(_HOUR_KEY)


def hour_from_key(key: str) -> datetime:
    return datetime.strptime(key, _HOUR_KEY).replace(tzinfo=UTC)


def add_held(
    spent_by_hour: dict[datetime, float], gpus: int, started_at: datetime, ended_at: datetime
) -> None:
    """Add to ``spent_by_hour`` the GPU-hours ``gpus`` held from ``started_at`` to ``ended_at``,
    each part in the hour it was held in."""
    if gpus <= 0:
        return
    hour = hour_of(started_at)
    while hour < ended_at:
        start, end = max(hour, started_at), min(hour + HOUR, ended_at)
        if end > start:
            held = gpus * (end - start).total_seconds() / HOUR.total_seconds()
            spent_by_hour[hour] = spent_by_hour.get(hour, 0.0) + held
        hour += HOUR
