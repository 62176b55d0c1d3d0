"""shared.policy.budgets: spent GPU-hours in the window, worst cases, settling, the verdict and
the 80% / 100% thresholds; every case with its own clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.adapters.config_source import load_config
from shared.config.model import Budget, Config, Template, WhenExceeded
from shared.model.budgets import (
    CONFIG_SCOPE,
    HOUR,
    BudgetBook,
    Reservation,
    add_held,
    book_from_document,
    book_to_document,
    template_scope,
)
from shared.model.runs import CREATE_FAILED_STATE, INTENT_STATE, Attempt, Run, RunStatus
from shared.policy import budgets
from shared.policy.budgets import Verdict
from shared.policy.jobspec import render_job
from shared.policy.timing import INTENT_LEASE

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
WEEK = timedelta(days=7)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.yaml"


@dataclass(frozen=True)
class Held:
    """An ended attempt's held interval, as a book keeps it (per hour)."""

    gpus: int
    start: datetime
    end: datetime


def _settled(key: str, gpus: int, start: datetime, end: datetime) -> Held:
    return Held(gpus, start, end)


def _hours(*held: Held) -> dict[datetime, float]:
    hours: dict[datetime, float] = {}
    for h in held:
        add_held(hours, h.gpus, h.start, h.end)
    return hours


def _book(*entries: Held | Reservation, alerted: tuple[str, ...] = ()) -> BudgetBook:
    return BudgetBook(
        "template:t",
        reservations={e.key: e for e in entries if isinstance(e, Reservation)},
        spent_by_hour=_hours(*(e for e in entries if isinstance(e, Held))),
        alerted=alerted,
    )


@pytest.mark.parametrize(
    ("gpus", "start", "end", "expected"),
    [
        (8, NOW - 3 * H, NOW - H, 16.0),  # wholly inside the window
        (8, NOW - WEEK - 2 * H, NOW - WEEK + H, 8.0),  # began before the window: clipped
        (2, NOW - WEEK - 5 * H, NOW - WEEK - H, 0.0),  # wholly before the window
        (4, NOW - 30 * timedelta(minutes=1), NOW, 2.0),  # half an hour on 4 GPUs
        (0, NOW - 3 * H, NOW, 0.0),  # no GPUs held
        (1, NOW - 2 * WEEK, NOW, 168.0),  # a job longer than the window counts the window
    ],
)
def test_spent_is_held_time_times_gpus_clipped_to_the_window(
    gpus: int, start: datetime, end: datetime, expected: float
) -> None:
    book = _book(_settled("r-a#1", gpus, start, end))
    assert budgets.spent(book, NOW, WEEK) == pytest.approx(expected)


def test_spent_and_reserved_add_over_the_books_entries() -> None:
    book = _book(
        _settled("r-a#1", 2, NOW - 5 * H, NOW - 3 * H),
        _settled("r-b#1", 1, NOW - 2 * H, NOW - H),
        Reservation("r-c", 1, "t", 48.0, NOW - H),
        Reservation("r-d", 2, "t", 2.5, NOW),
    )
    assert budgets.spent(book, NOW, WEEK) == pytest.approx(5.0)
    assert budgets.reserved(book) == pytest.approx(50.5)


# The three job kinds of the example config, as dispatch renders them: a CustomJob (1 A100 x
# 24h), a sweep (1 A100 x 4h per trial, 20 trials, 4 at once), a pipeline's training task
# (1 A100 x 24h); and bert-package: 2 pools, 2 A100 x 1 + 2 A100 x 3 replicas, 1 day.
@pytest.mark.parametrize(
    ("template", "gpus", "gpu_hours", "text"),
    [
        ("llm-finetune", 1, 24.0, "1 GPUs x 1d"),
        ("resnet-sweep", 4, 80.0, "1 GPUs x 4h x max_trials 20"),
        ("resnet-pipeline", 1, 24.0, "1 GPUs x 1d"),
        ("bert-package", 8, 192.0, "8 GPUs x 1d"),
    ],
)
def test_the_worst_case_of_each_job_kind_is_gpus_times_timeout_as_the_guards_count(
    template: str, gpus: int, gpu_hours: float, text: str
) -> None:
    config = load_config(str(EXAMPLE))
    spec = config.templates[template]
    rendered = render_job(
        spec,
        dict.fromkeys(spec.params, "gs://bucket/data"),
        spec.placements[-1],
        project=config.project,
        default_region=config.region,
        run_id="r-" + "0" * 24,
        attempt=1,
    )
    worst = budgets.worst_case(rendered.custom_job, spec.hyperparameter_tuning)
    assert (worst.gpus, worst.gpu_hours) == (gpus, pytest.approx(gpu_hours))
    assert worst.text.startswith(text)


def test_a_job_without_a_timeout_counts_vertex_ais_seven_days() -> None:
    from shared.aiplatform import CustomJob

    job = CustomJob(
        job_spec={
            "worker_pool_specs": [
                {
                    "machine_spec": {
                        "machine_type": "a2-highgpu-2g",
                        "accelerator_type": "NVIDIA_TESLA_A100",
                        "accelerator_count": 2,
                    },
                    "replica_count": 1,
                },
                {},  # a skipped pool holds nothing
            ]
        }
    )
    assert budgets.worst_case(job, None).gpu_hours == pytest.approx(2 * 168)


def _run(status: RunStatus, *attempts: Attempt) -> Run:
    return Run("r-a", "k", "route", "t", {}, status=status, attempts=attempts)


def _attempt(number: int, **fields: object) -> Attempt:
    return Attempt(number, {}, "us-central1", "p", NOW - 5 * H, **fields)  # type: ignore[arg-type]


RESERVED = Reservation("r-a", 1, "t", 24.0, NOW - 4 * H, gpus=2)


@pytest.mark.parametrize(
    ("run", "over"),
    [
        (None, True),  # the run left the ledger
        (_run(RunStatus.SUCCEEDED, _attempt(1, job_name="j")), True),
        (_run(RunStatus.RUNNING, _attempt(1, job_name="j", state="JOB_STATE_RUNNING")), False),
        (_run(RunStatus.SUBMITTING, _attempt(1)), False),  # claimed, job being created
        (_run(RunStatus.WAITING_RETRY, _attempt(1, ended_at=NOW - H)), True),
        (_run(RunStatus.WAITING_RETRY, _attempt(1, decision={"move": "retry"})), True),
        (_run(RunStatus.SUBMITTED, _attempt(1), _attempt(2)), True),  # a later attempt
        (_run(RunStatus.ACCEPTED), True),  # never claimed, reserved 4h ago: past the lease
    ],
)
def test_an_attempt_is_over_when_its_end_is_known(run: Run | None, over: bool) -> None:
    assert budgets.attempt_over(run, RESERVED, NOW) is over


FAILED = {"state": CREATE_FAILED_STATE}
FRESH = Reservation("r-a", 1, "t", 24.0, NOW - INTENT_LEASE / 2, gpus=2)


@pytest.mark.parametrize(
    ("run", "reservation", "over"),
    [
        # Its create failed and the run waits for a placement (or a budget): no GPU is held.
        (_run(RunStatus.WAITING_RETRY, _attempt(1, **FAILED)), RESERVED, True),
        (_run(RunStatus.WAITING_BUDGET, _attempt(1, **FAILED)), RESERVED, True),
        # A retry reserved it again moments ago and is about to claim it: kept.
        (_run(RunStatus.WAITING_RETRY, _attempt(1, **FAILED)), FRESH, False),
        # An intent not known to have failed (its create's outcome unknown): its job may exist.
        (_run(RunStatus.WAITING_RETRY, _attempt(1, state=INTENT_STATE)), RESERVED, False),
        # CREATE_FAILED while SUBMITTING: the redelivery is taking it over now.
        (_run(RunStatus.SUBMITTING, _attempt(1, **FAILED)), RESERVED, False),
        # Claimed again by the retry (INTENT, SUBMITTING): under way.
        (_run(RunStatus.SUBMITTING, _attempt(1, state=INTENT_STATE)), RESERVED, False),
    ],
)
def test_an_attempt_whose_create_failed_while_its_run_waits_holds_no_reservation(
    run: Run, reservation: Reservation, over: bool
) -> None:
    assert budgets.attempt_over(run, reservation, NOW) is over


@pytest.mark.parametrize(
    ("run", "live"),
    [
        (_run(RunStatus.ACCEPTED), False),  # not claimed
        (_run(RunStatus.SUBMITTING, _attempt(1, state=INTENT_STATE)), True),  # a takeover
        (_run(RunStatus.WAITING_RETRY, _attempt(1, state=INTENT_STATE)), True),  # job may exist
        (_run(RunStatus.SUBMITTING, _attempt(1, **FAILED)), True),  # taken over now
        (_run(RunStatus.WAITING_RETRY, _attempt(1, **FAILED)), False),  # idle
        (_run(RunStatus.WAITING_BUDGET, _attempt(1, **FAILED)), False),  # idle
    ],
)
def test_only_a_claim_that_is_not_idle_is_admitted_whatever_the_budget(
    run: Run, live: bool
) -> None:
    assert budgets.live_claim(run, 1) is live


@pytest.mark.parametrize(
    ("state", "status", "verdict", "kept"),
    [
        # Idle for long: its reservation frees, and its retry must fit again (the budget is
        # full: it waits).
        (CREATE_FAILED_STATE, RunStatus.WAITING_RETRY, Verdict.WAIT, False),
        # A live intent is admitted, its reservation kept.
        (INTENT_STATE, RunStatus.WAITING_RETRY, Verdict.ADMIT, True),
        (CREATE_FAILED_STATE, RunStatus.SUBMITTING, Verdict.ADMIT, True),
    ],
)
def test_the_retry_of_an_idle_attempt_checks_the_budget_again(
    state: str, status: RunStatus, verdict: Verdict, kept: bool
) -> None:
    other = Reservation("r-b", 1, "t", 90.0, NOW - H)
    book = _book(RESERVED, other)
    run = _run(status, _attempt(1, state=state))
    running = _attempt(1, job_name="j", state="JOB_STATE_RUNNING")
    runs: dict[str, Run | None] = {
        "r-a": run,
        "r-b": Run("r-b", "k", "route", "t", {}, status=RunStatus.RUNNING, attempts=(running,)),
    }
    settled = budgets.settle(book, runs, NOW, WEEK)
    assert (RESERVED.key in settled.reservations) is kept
    result = budgets.check(
        "template:t", WAIT, settled, RESERVED.key, 24.0, NOW, claimed=budgets.live_claim(run, 1)
    )
    assert result.verdict is verdict


def test_a_fresh_reservation_not_claimed_yet_is_kept() -> None:
    fresh = Reservation("r-a", 1, "t", 24.0, NOW - INTENT_LEASE / 2)
    assert budgets.attempt_over(_run(RunStatus.ACCEPTED), fresh, NOW) is False


def test_settling_turns_an_ended_attempt_into_what_it_held_and_keeps_the_others() -> None:
    ended = _attempt(
        1, job_name="j", started_at=NOW - 3 * H, ended_at=NOW - H, gpus=0, decision={"x": 1}
    )
    other = Reservation("r-b", 1, "t", 10.0, NOW - H)
    unread = Reservation("r-c", 1, "t", 5.0, NOW - H)
    old = _settled("r-z#1", 1, NOW - WEEK - 3 * H, NOW - WEEK - H)  # ended before the window
    book = _book(RESERVED, other, unread, old, alerted=("80@1970-01-01T00:00:00+00:00",))
    runs: dict[str, Run | None] = {
        "r-a": _run(RunStatus.WAITING_RETRY, ended),
        "r-b": Run(
            "r-b", "k", "route", "t", {}, status=RunStatus.SUBMITTING, attempts=(_attempt(1),)
        ),
    }
    settled = budgets.settle(book, runs, NOW, WEEK)
    assert set(settled.reservations) == {"r-b#1", "r-c#1"}  # r-c's run not read: kept
    # The history records no GPUs (written before it did): the reservation's count stands in.
    assert settled.spent_by_hour == _hours(Held(2, NOW - 3 * H, NOW - H))
    assert settled.alerted == ()  # an old window's claim
    assert budgets.spent(settled, NOW, WEEK) == pytest.approx(4.0)


def test_an_ended_attempt_that_never_started_leaves_nothing() -> None:
    run = _run(RunStatus.FAILED, _attempt(1, job_name="j"))
    settled = budgets.settle(_book(RESERVED), {"r-a": run}, NOW, WEEK)
    assert (settled.reservations, settled.spent_by_hour) == ({}, {})


WAIT = Budget(100.0, WEEK)
REJECT = Budget(100.0, WEEK, WhenExceeded.REJECT)


@pytest.mark.parametrize(
    ("budget", "spent_h", "reserved_h", "asked", "verdict", "thresholds"),
    [
        (WAIT, 0, 0, 10, Verdict.ADMIT, ()),
        (WAIT, 50, 20, 10, Verdict.ADMIT, (80,)),  # 80 of 100: the 80% alert
        (WAIT, 50, 20, 30, Verdict.ADMIT, (80, 100)),  # exactly full still fits
        (WAIT, 50, 20, 31, Verdict.WAIT, (80, 100)),
        (REJECT, 50, 20, 31, Verdict.REJECT, (80, 100)),
        (WAIT, 0, 0, 101, Verdict.REJECT, (80, 100)),  # larger than the budget: never fits
        (WAIT, 0, 90, 20, Verdict.WAIT, (80, 100)),  # reservations count at their worst case
        (WAIT, 79.9, 0, 0, Verdict.ADMIT, ()),
    ],
)
def test_the_verdict_and_the_thresholds(
    budget: Budget,
    spent_h: float,
    reserved_h: float,
    asked: float,
    verdict: Verdict,
    thresholds: tuple[int, ...],
) -> None:
    entries: list[Held | Reservation] = []
    if spent_h:
        entries.append(_settled("r-s#1", 1, NOW - timedelta(hours=spent_h), NOW))
    if reserved_h:
        entries.append(Reservation("r-r", 1, "t", reserved_h, NOW))
    result = budgets.check("template:t", budget, _book(*entries), "r-new#1", asked, NOW)
    assert (result.verdict, result.thresholds) == (verdict, thresholds)
    assert result.demand == pytest.approx(spent_h + reserved_h + asked)


WINDOW = budgets.alert_window(NOW, WEEK).isoformat()


@pytest.mark.parametrize(
    ("alerted", "owed"),
    [
        # The delivery that reserved failed to send its alerts and gave the claims back: the
        # redelivery finds the attempt reserved and owes them still.
        ((), (f"80@{WINDOW}", f"100@{WINDOW}")),
        ((f"80@{WINDOW}",), (f"100@{WINDOW}",)),  # the 80% one was sent
        ((f"80@{WINDOW}", f"100@{WINDOW}"), ()),  # both sent: nothing again
    ],
)
def test_an_attempt_reserved_already_is_admitted_and_owes_the_thresholds_not_alerted(
    alerted: tuple[str, ...], owed: tuple[str, ...]
) -> None:
    book = _book(
        Reservation("r-r", 1, "t", 95.0, NOW),
        Reservation("r-new", 1, "t", 30.0, NOW),
        alerted=alerted,
    )
    result = budgets.check("template:t", WAIT, book, "r-new#1", 30.0, NOW)
    assert (result.verdict, result.already_reserved, result.reserved) == (
        Verdict.ADMIT,
        True,
        95.0,
    )
    assert result.thresholds == (80, 100)
    assert budgets.threshold_claims(result, book, NOW) == owed


def test_an_attempt_claimed_before_its_budget_existed_is_admitted_and_reserved() -> None:
    book = _book(Reservation("r-r", 1, "t", 95.0, NOW))
    result = budgets.check("template:t", WAIT, book, "r-old#1", 30.0, NOW, claimed=True)
    assert (result.verdict, result.already_reserved) == (Verdict.ADMIT, True)


@pytest.mark.parametrize(
    ("verdicts", "combined"),
    [
        ((), Verdict.ADMIT),
        ((Verdict.ADMIT, Verdict.ADMIT), Verdict.ADMIT),
        ((Verdict.ADMIT, Verdict.WAIT), Verdict.WAIT),
        ((Verdict.WAIT, Verdict.REJECT), Verdict.REJECT),
    ],
)
def test_a_submission_waits_or_is_refused_if_any_of_its_budgets_says_so(
    verdicts: tuple[Verdict, ...], combined: Verdict
) -> None:
    checks = [budgets.BudgetCheck("s", WAIT, 0, 0, 0, v, False, ()) for v in verdicts]
    assert budgets.combined(checks) is combined


@pytest.mark.parametrize(
    ("now", "per", "window"),
    [
        (NOW, timedelta(days=1), datetime(2026, 3, 10, tzinfo=UTC)),
        (NOW + 5 * H, timedelta(hours=6), datetime(2026, 3, 10, 12, tzinfo=UTC)),
        (datetime(1970, 1, 8, tzinfo=UTC), WEEK, datetime(1970, 1, 8, tzinfo=UTC)),
    ],
)
def test_a_threshold_alerts_once_per_window(
    now: datetime, per: timedelta, window: datetime
) -> None:
    assert budgets.alert_window(now, per) == window
    result = budgets.BudgetCheck("s", Budget(10, per), 9, 0, 0, Verdict.ADMIT, False, (80,))
    claims = budgets.threshold_claims(result, _book(), now)
    assert claims == (f"80@{window.isoformat()}",)
    assert budgets.threshold_claims(result, budgets.with_alerted(_book(), claims), now) == ()
    later = now + per  # the next window alerts again
    assert budgets.threshold_claims(result, budgets.with_alerted(_book(), claims), later) != ()


def test_a_runs_budgets_are_its_templates_then_the_configs() -> None:
    template = Template("t", "t", {}, (), budget=WAIT)
    bare = Template("u", "u", {}, ())
    config = Config("p", "us-central1", "s", "a", budget=REJECT, templates={"t": template})
    assert budgets.budget_scopes(config, template) == [
        (template_scope("t"), WAIT),
        (CONFIG_SCOPE, REJECT),
    ]
    assert budgets.budget_scopes(Config("p", "r", "s", "a"), bare) == []


def test_a_book_round_trips_through_its_document() -> None:
    book = _book(
        RESERVED, _settled("r-b#2", 4, NOW - 2 * H, NOW), alerted=("80@2026-03-10T00:00:00+00:00",)
    )
    assert book_from_document(book.scope, book_to_document(book)) == book
    assert book_from_document("config", None) == BudgetBook("config")


@pytest.mark.parametrize(
    ("now", "expected", "exact"),
    [
        (NOW, 1.0, 1.0),  # the window starts on an hour: exact
        # It starts 15 minutes into the hour the attempt held 2 GPUs for its first half: the
        # hour counts 3/4 of its 1 GPU-hour, where 2 GPUs x 15 min were held in the window.
        (NOW + timedelta(minutes=15), 0.75, 0.5),
        (NOW + timedelta(minutes=45), 0.25, 0.0),
    ],
)
def test_the_hour_a_window_starts_in_counts_pro_rata_off_by_at_most_that_hour(
    now: datetime, expected: float, exact: float
) -> None:
    held = Held(2, NOW - WEEK - 30 * timedelta(minutes=1), NOW - WEEK + 30 * timedelta(minutes=1))
    book = _book(held)
    assert budgets.spent(book, now, WEEK) == pytest.approx(expected)
    assert abs(expected - exact) <= 2 * (HOUR / H)  # one hour of its 2 GPUs at most


@pytest.mark.parametrize(
    ("attempts", "per", "max_hours"),
    [
        (50_000, WEEK, 7 * 24 + 1),
        (50_000, timedelta(days=30), 30 * 24 + 1),
        (1, WEEK, 1),
    ],
)
def test_a_book_stays_small_however_many_attempts_it_settles(
    attempts: int, per: timedelta, max_hours: int
) -> None:
    """Every attempt settled adds to the hours it was held in: a config-wide budget settling
    50,000 attempts keeps one entry per hour of its window, far from Firestore's 1 MiB."""
    import json

    hours: dict[datetime, float] = {}
    for i in range(attempts):
        end = NOW - timedelta(minutes=(i * 37) % int(per / timedelta(minutes=1)))
        add_held(hours, 1 + i % 8, end - timedelta(minutes=20 + i % 100), end)
    settled = budgets.settle(BudgetBook("config", spent_by_hour=hours), {}, NOW, per)
    assert len(settled.spent_by_hour) <= max_hours
    size = len(json.dumps(book_to_document(settled), default=str))
    assert size <= 40 * max_hours + 100  # bytes; a 30-day window: about 29 KiB
    # Nothing is lost inside the window but for the hour it starts in.
    inside = sum(v for h, v in hours.items() if h >= NOW - per)
    assert budgets.spent(settled, NOW, per) == pytest.approx(inside)


def test_a_book_written_before_the_hours_were_kept_is_read_into_hours() -> None:
    document = {
        "scope": "template:t",
        "reservations": {},
        "settled": {
            "r-a#1": {
                "run_id": "r-a",
                "attempt": 1,
                "template": "t",
                "gpus": 4,
                "started_at": NOW - 90 * timedelta(minutes=1),
                "ended_at": NOW,
            }
        },
        "alerted": [],
    }
    book = book_from_document("template:t", document)
    assert book.spent_by_hour == {NOW - 2 * H: 2.0, NOW - H: 4.0}
    assert budgets.spent(book, NOW, WEEK) == pytest.approx(6.0)
    assert "settled" not in book_to_document(book)
