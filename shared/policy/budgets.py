"""GPU-hour budgets: what a scope has used, what a submission may use at worst, and the verdict.

A budget (``budget: {gpu_hours, per, when_exceeded}``, a template's or the config's) caps the
GPU-hours its runs use over a rolling window ``per``. What counts, for one scope's book
(``shared.model.budgets``):

- **spent**: each ended attempt's held interval (start to end, from its history:
  ``policy.run_history``) times its GPUs, kept per UTC hour, the hours inside ``[now - per,
  now]`` (the one the window starts in pro rata: ``spent``);
- **reserved**: each attempt admitted and not yet ended, at its full worst case (it may run to
  its timeout, whenever it starts); an attempt whose create failed while its run waits for a
  placement holds none (``idle_attempt``), and its retry must fit again;
- **the request**: the worst case of the submission at hand: GPUs per job x timeout, a sweep's x
  ``max_trials``, as the guards count it (``config.model.jobs_in_all``).

A submission is admitted when spent + reserved + request fits the budget; otherwise it waits or
is refused per ``when_exceeded`` (a request larger than the whole budget is refused either way: no
wait would ever let it in). An attempt leaves the reservations when it ends (``settle``): the
worst case gives way to what it really held. Alerts: at 80% and at 100% of the budget (spent +
reserved + request), each once per alert window (``per``-long buckets from the epoch).

Everything here is pure: the clock is a parameter, the runs are given.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from shared.aiplatform import CustomJob
from shared.config.durations import describe_duration
from shared.config.model import (
    Budget,
    Config,
    HyperparameterTuning,
    Template,
    WhenExceeded,
    jobs_at_once,
    jobs_in_all,
)
from shared.model.budgets import (
    CONFIG_SCOPE,
    HOUR,
    BudgetBook,
    Reservation,
    add_held,
    template_scope,
)
from shared.model.runs import CREATE_FAILED_STATE, RETRY_WAITING_STATUSES, Run
from shared.policy.gpus import gpus_held
from shared.policy.jobspec import job_timeout
from shared.policy.run_history import SECONDS_PER_HOUR, held_interval
from shared.policy.timing import INTENT_LEASE

THRESHOLDS = (80, 100)
"""The percentages of a budget alerted at, each once per window."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SLACK = 1e-9  # float sums: a request that fits exactly must fit


class Verdict(enum.StrEnum):
    ADMIT = "admit"
    WAIT = "wait"
    REJECT = "reject"


def budget_scopes(config: Config, template: Template) -> list[tuple[str, Budget]]:
    """The budgets a run of ``template`` is held to: its own, then the config's."""
    scopes: list[tuple[str, Budget]] = []
    if template.budget is not None:
        scopes.append((template_scope(template.name), template.budget))
    if config.budget is not None:
        scopes.append((CONFIG_SCOPE, config.budget))
    return scopes


@dataclass(frozen=True)
class WorstCase:
    """The most a submission may use: ``gpus`` at once, ``gpu_hours`` in all."""

    gpus: int  # held at once: GPUs per job x a sweep's parallel_trials
    gpu_hours: float  # GPUs per job x timeout x a sweep's max_trials
    text: str  # how it was counted, for a message


def worst_case(job: CustomJob, tuning: HyperparameterTuning | None) -> WorstCase:
    """The worst case of the job that runs (a sweep's trial job, a pipeline's training task)."""
    gpus, timeout = gpus_held(job), job_timeout(job)  # a job without one: 7 days
    trials = jobs_in_all(tuning)
    hours = gpus * timeout.total_seconds() / SECONDS_PER_HOUR * trials
    text = f"{gpus} GPUs x {describe_duration(timeout)}" + (
        f" x max_trials {trials}" if tuning is not None else ""
    )
    return WorstCase(gpus * jobs_at_once(tuning), hours, text)


def spent(book: BudgetBook, now: datetime, per: timedelta) -> float:
    """The GPU-hours the book's ended attempts held inside the window ending ``now``.

    The book keeps them per UTC hour (``spent_by_hour``), so the hour the window's start falls
    in counts in proportion to its part inside the window, as if held evenly through it: off by
    at most that one hour's GPU-hours. Hours after ``now`` (another clock's end time) count."""
    start = now - per
    total = 0.0
    for hour, gpu_hours in book.spent_by_hour.items():
        if hour >= start:
            total += gpu_hours
        elif hour + HOUR > start:
            total += gpu_hours * ((hour + HOUR - start) / HOUR)
    return total


def reserved(book: BudgetBook) -> float:
    """The worst cases the book holds for attempts not yet ended."""
    return sum(r.gpu_hours for r in book.reservations.values())


def alert_window(now: datetime, per: timedelta) -> datetime:
    """The start of the ``per``-long bucket (from the epoch) ``now`` falls in: a threshold is
    alerted once per bucket."""
    buckets = (now - _EPOCH) // per
    return _EPOCH + buckets * per


def attempt_over(run: Run | None, reservation: Reservation, now: datetime) -> bool:
    """Whether the attempt a reservation was made for is over: it uses no more GPU-hours.

    Its run is gone or ended, the attempt's end is known (``ended_at``) or decided, a later
    attempt exists, or it was never claimed within ``INTENT_LEASE`` of its reservation (the
    delivery that reserved died before its claim; a redelivery reserves again). Or it is idle
    (``idle_attempt``: its create failed and the run waits, perhaps for days, for a placement)
    and was reserved ``INTENT_LEASE`` ago or more: a retry that reserves it again claims it at
    once, and keeps that fresh reservation (so a third submission settling the book between the
    two does not free it); the retry walk checks the budget again (``live_claim``)."""
    if run is None or run.status.is_terminal():
        return True
    if any(a.number > reservation.attempt for a in run.attempts):
        return True
    attempt = run.attempt(reservation.attempt)
    if attempt is None:
        return now - reservation.at >= INTENT_LEASE
    if attempt.ended_at is not None or attempt.decision is not None:
        return True
    return idle_attempt(run, reservation.attempt) and now - reservation.at >= INTENT_LEASE


def idle_attempt(run: Run, number: int) -> bool:
    """Whether attempt ``number`` of ``run`` is claimed but idle: its create failed
    (CREATE_FAILED, no job) and the run waits for its retry (no placement could take the job)
    or for a budget. No job holds GPUs for it and no delivery is creating one. An intent that
    is not CREATE_FAILED is not idle: its create's outcome may be unknown and its job may
    still appear."""
    attempt = run.attempt(number)
    return (
        attempt is not None
        and attempt.job_name is None
        and attempt.state == CREATE_FAILED_STATE
        and run.status in RETRY_WAITING_STATUSES
    )


def live_claim(run: Run, number: int) -> bool:
    """Whether attempt ``number`` of ``run`` is claimed and not idle: a submission for it (a
    takeover, a move along the chain) is admitted whatever the budget, since its job may exist
    or be under way and a run with a live attempt cannot wait. An idle attempt whose
    reservation was freed (``attempt_over``) must fit the budget again."""
    return run.attempt(number) is not None and not idle_attempt(run, number)


def settle(
    book: BudgetBook,
    runs: Mapping[str, Run | None],
    now: datetime,
    per: timedelta,
) -> BudgetBook:
    """``book`` with each reservation whose attempt is over replaced by what it held (from its
    history, added to the hours it was held in), and what fell out of the window dropped (hours
    wholly before it, old alert claims).

    ``runs`` holds the runs read for the reservations (None: not in the ledger); a reservation
    whose run was not read is kept as it is."""
    reservations = dict(book.reservations)
    spent_by_hour = dict(book.spent_by_hour)
    for key, reservation in book.reservations.items():
        if reservation.run_id not in runs:
            continue
        run = runs[reservation.run_id]
        if not attempt_over(run, reservation, now):
            continue
        # Settled once: in the write that drops its reservation (an attempt that held GPUs had
        # a job, and is never walked, so never reserved, again).
        del reservations[key]
        attempt = run.attempt(reservation.attempt) if run is not None else None
        held = held_interval(attempt, now) if attempt is not None else None
        if attempt is not None and held is not None:
            add_held(spent_by_hour, attempt.gpus or reservation.gpus, *held)
    start = now - per
    spent_by_hour = {h: v for h, v in spent_by_hour.items() if h + HOUR > start}
    current = alert_window(now, per).isoformat()
    alerted = tuple(claim for claim in book.alerted if claim.endswith("@" + current))
    return replace(book, reservations=reservations, spent_by_hour=spent_by_hour, alerted=alerted)


@dataclass(frozen=True)
class BudgetCheck:
    """One scope's verdict on one submission."""

    scope: str
    budget: Budget
    spent: float
    reserved: float  # the others' reservations (this attempt's excluded)
    request: float
    verdict: Verdict
    already_reserved: bool  # the attempt was admitted before (a redelivery, a takeover)
    thresholds: tuple[int, ...]  # the THRESHOLDS reached by spent + reserved + request

    @property
    def demand(self) -> float:
        return self.spent + self.reserved + self.request

    @property
    def never_fits(self) -> bool:
        return self.request > self.budget.gpu_hours + _SLACK

    def describe(self) -> str:
        """One line a human reads: the scope, what is used and what the attempt asks."""
        return (
            f"{describe_scope(self.scope)}: {self.spent:.1f} GPU-hours spent and "
            f"{self.reserved:.1f} reserved by attempts under way, of "
            f"{self.budget.gpu_hours:g} per {describe_duration(self.budget.per)}; this attempt "
            f"may use up to {self.request:.1f}"
        )


def describe_scope(scope: str) -> str:
    if scope == CONFIG_SCOPE:
        return "the config's budget (every template)"
    return f"template {scope.split(':', 1)[1]}'s budget"


def check(
    scope: str,
    budget: Budget,
    book: BudgetBook,
    key: str,
    request: float,
    now: datetime,
    *,
    claimed: bool = False,
) -> BudgetCheck:
    """Whether the attempt ``key`` with worst case ``request`` fits ``budget`` (``book`` as
    settled at ``now``). An attempt already reserved is admitted: it was, and holds its share
    (the thresholds it reaches are still reported: ``threshold_claims`` skips those alerted).
    So is one ``claimed`` already without a reservation (claimed before its budget was
    configured; ``live_claim``): its job may exist, and a run with a live attempt cannot wait;
    it is reserved from now on."""
    already = key in book.reservations or claimed
    others = sum(r.gpu_hours for k, r in book.reservations.items() if k != key)
    used = spent(book, now, budget.per)
    demand = used + others + request
    fits = demand <= budget.gpu_hours + _SLACK
    if already or fits:
        verdict = Verdict.ADMIT
    elif budget.when_exceeded is WhenExceeded.REJECT or request > budget.gpu_hours + _SLACK:
        verdict = Verdict.REJECT
    else:
        verdict = Verdict.WAIT
    # An attempt reserved already still owes the thresholds its demand reaches: a delivery
    # that reserved, then failed to send the alert, gave its claim back; the redelivery finds
    # the attempt reserved and must send it. The book's claims keep it to once per window.
    reached = thresholds_reached(demand, budget.gpu_hours)
    return BudgetCheck(scope, budget, used, others, request, verdict, already, reached)


def thresholds_reached(demand: float, gpu_hours: float) -> tuple[int, ...]:
    """The THRESHOLDS ``demand`` reaches of a budget of ``gpu_hours``."""
    return tuple(pct for pct in THRESHOLDS if demand + _SLACK >= gpu_hours * pct / 100)


def combined(checks: Sequence[BudgetCheck]) -> Verdict:
    """The submission's verdict over its scopes: refused if any refuses, else waits if any
    waits, else admitted."""
    verdicts = {c.verdict for c in checks}
    for verdict in (Verdict.REJECT, Verdict.WAIT):
        if verdict in verdicts:
            return verdict
    return Verdict.ADMIT


def threshold_claims(check_: BudgetCheck, book: BudgetBook, now: datetime) -> tuple[str, ...]:
    """The threshold alerts ``check_`` owes and ``book`` has not claimed in this window."""
    window = alert_window(now, check_.budget.per).isoformat()
    claims = (f"{pct}@{window}" for pct in check_.thresholds)
    return tuple(claim for claim in claims if claim not in book.alerted)


def with_reservation(book: BudgetBook, reservation: Reservation) -> BudgetBook:
    return replace(book, reservations={**book.reservations, reservation.key: reservation})


def with_alerted(book: BudgetBook, claims: Sequence[str]) -> BudgetBook:
    added = tuple(c for c in claims if c not in book.alerted)
    return replace(book, alerted=(*book.alerted, *added)) if added else book


def without_alerted(book: BudgetBook, claims: Sequence[str]) -> BudgetBook:
    return replace(book, alerted=tuple(c for c in book.alerted if c not in claims))
