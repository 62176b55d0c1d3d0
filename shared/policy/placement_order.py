"""Learned placement order: a run of a ``placement_order: learned`` template walks its chain
fastest-to-start first, as the placements' recent history measured it (docs/architecture.md,
"Learned placement order").

Pure rules over plain data (the runs ``Ledger.recent_runs`` read, an injected ``now``):

- ``placement_stats``: per placement of the chain, keyed as a cooldown keys it
  (``policy.cooldown.placement_key``: kind|region|machine, so two placements on the same machines
  share what was measured), over ``LEARNING_WINDOW``: the measured time-to-start of each attempt
  that started (``run_history.time_to_start``), the capacity failures (an attempt whose outcome
  class is ``capacity``, or a create refused for capacity, recorded as a skip; not an end the
  run's own deadline caused, ``deadlines.ended_by_own_deadline``) and when it was last used; and
  the waits of jobs that did not start: one that ended without a start (an end its run's deadline
  caused, say) counts in the median when longer than it, and a job still waiting now makes the
  expected wait at least as long as it has waited (a pool that filled up an hour ago is seen at
  once, not after a week of starts in seconds has aged out).
- ``order_placements``: the order and a short reason per placement. Placements that started in
  the window come first, by expected wait (the median time-to-start, plus ``CAPACITY_PENALTY``
  per capacity failure); then the untried ones; then those that only failed, fewest failures
  first. Ties keep the written order. Exploration: for about ``EXPLORE_SHARE`` of runs (drawn from
  the run id, so every delivery and every later walk of a run sees the same order) one untried
  or long-unused placement (not used for ``LONG_UNUSED``) goes first, so that a placement whose
  capacity came back is measured again; a template with no history at all keeps its written
  order. What a placement costs is not measured: the written order is the only say cost has.
- ``recorded_order`` / ``start_of_order``: the order a run recorded (``Run.placement_order``),
  when it still fits its template's chain, and where a walk that starts over begins.

The order is chosen once per run, at its first walk (``handlers.placement_orders``), and kept on
the run: every later walk and fallback follows it (``policy.cooldown.walk_indices``,
``policy.decisions``).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from shared.config.durations import describe_duration
from shared.config.model import Template
from shared.model.jobstates import is_terminal
from shared.model.runs import Attempt, CancelReason, Run, SkipClass, cancel_reason_of
from shared.policy.cooldown import KEY_SEPARATOR, placement_key
from shared.policy.deadlines import ended_by_own_deadline
from shared.policy.records import chain_record, placement_kind, placement_record
from shared.policy.run_history import created_at, outcome_class, time_to_start

LEARNING_WINDOW: Final = timedelta(days=7)
"""How far back the history counts: long enough to hold a few runs of a daily template, short
enough that a region's capacity a week ago no longer decides where a job goes today."""

LONG_UNUSED: Final = timedelta(days=1)
"""A placement no run used for this long is sampled by exploration: capacity comes and goes
within a day, so its last measure may be stale."""

EXPLORE_SHARE: Final = 0.1
"""About one run in ten tries an untried or long-unused placement first: enough to notice that
a placement came back within a day of busy use, little enough to cost the other nine nothing."""

CAPACITY_PENALTY: Final = timedelta(minutes=30)
"""What one recent capacity failure adds to a placement's expected wait: a failure costs at
least the resubmission and often a FLEX_START wait that ran out, and the default cooldown (30m)
says how long such a failure is thought to last."""

CAPACITY_CLASS: Final = "capacity"  # run_history.outcome_class's name for a capacity end


@dataclass(frozen=True)
class PlacementStats:
    """What the window's history says about one placement key."""

    key: str
    starts: tuple[timedelta, ...] = ()  # measured time-to-start of each attempt that started
    capacity_failures: int = 0
    last_used: datetime | None = None
    # How long each job that ended without starting had waited (not a capacity failure counted
    # above, not an operator's cancel): a lower bound of its time-to-start.
    unstarted: tuple[timedelta, ...] = ()
    # How long the longest-waiting job of the placement still waits, now: live evidence that its
    # time-to-start is at least that, whatever the older starts measured.
    waiting: timedelta | None = None

    @property
    def tried(self) -> bool:
        return self.last_used is not None

    @property
    def median_start(self) -> timedelta | None:
        """The median time-to-start of the starts, counting each wait that ended without a start
        as a sample when it is longer than the starts' own median (a lower bound says something
        only about a wait longer than what was measured); None when nothing started."""
        if not self.starts:
            return None
        measured = _median(self.starts)
        return _median((*self.starts, *(wait for wait in self.unstarted if wait > measured)))

    @property
    def expected_wait(self) -> timedelta | None:
        """The median time-to-start plus the capacity penalty, and at least as long as a job of
        the placement waits right now; None when nothing started."""
        median = self.median_start
        if median is None:
            return None
        return max(median + CAPACITY_PENALTY * self.capacity_failures, self.waiting or median)


@dataclass(frozen=True)
class LearnedOrder:
    """A run's chain order (chain indices) and, per chain index, why it is where it is."""

    order: tuple[int, ...]
    reasons: Mapping[int, str] = field(default_factory=dict)
    explored: int | None = None  # the placement exploration put first, if any

    def lines(self) -> list[str]:
        """One line per placement, in the order: ``placement[i]: reason``."""
        return [f"placement[{index}]: {self.reasons.get(index, '')}" for index in self.order]


def attempt_key(attempt: Attempt, chain_keys: Mapping[str, str]) -> str | None:
    """``attempt``'s placement key: kind|region|machine as recorded with its intent, else (an
    attempt recorded before the machine was) the key of the chain placement it ran on;
    ``chain_keys`` maps each chain placement's record (as JSON) to its key."""
    if attempt.machine:
        kind = placement_kind(attempt.placement)
        return KEY_SEPARATOR.join((kind, attempt.region, attempt.machine))
    return chain_keys.get(_record_text(attempt.placement))


def last_seen(attempt: Attempt) -> datetime:
    """The latest moment the attempt's history records: its end, start, create or intent."""
    times = (attempt.intent_at, created_at(attempt), attempt.started_at, attempt.ended_at)
    return max(moment for moment in times if moment is not None)


def placement_stats(
    keys: Sequence[str],
    runs: Iterable[Run],
    now: datetime,
    *,
    chain_records: Mapping[str, str] | None = None,
    window: timedelta = LEARNING_WINDOW,
    max_queue: timedelta | None = None,
) -> dict[str, PlacementStats]:
    """The stats of each key in ``keys`` from the attempts of ``runs`` seen within ``window``
    before ``now``. ``chain_records``: each chain placement's record (JSON) to its key, to place
    an attempt without a recorded machine and a create refused for capacity (a skip).
    A capacity end the run's own deadline caused (``deadlines.ended_by_own_deadline``;
    ``max_queue``: the template's) is no failure of the placement's."""
    records = chain_records or {}
    wanted = set(keys)
    starts: dict[str, list[timedelta]] = {key: [] for key in wanted}
    unstarted: dict[str, list[timedelta]] = {key: [] for key in wanted}
    waiting: dict[str, timedelta] = {}
    failures = dict.fromkeys(wanted, 0)
    used: dict[str, datetime] = {}
    since = now - window

    def note(key: str | None, at: datetime) -> bool:
        if key not in wanted or at < since:
            return False
        assert key is not None
        used[key] = max(used.get(key, at), at)
        return True

    for run in runs:
        for attempt in run.attempts:
            key = attempt_key(attempt, records)
            if note(key, last_seen(attempt)):
                assert key is not None
                waited = time_to_start(attempt)
                if waited is not None:
                    starts[key].append(waited)
                elif outcome_class(attempt) == CAPACITY_CLASS and not ended_by_own_deadline(
                    run, attempt, max_queue=max_queue
                ):
                    failures[key] += 1
                elif (wait := _unstarted_wait(attempt, now)) is not None:
                    if attempt.ended_at is None:
                        waiting[key] = max(waiting.get(key, wait), wait)
                    else:
                        unstarted[key].append(wait)
            for skip in attempt.skips:
                if skip.skip_class != SkipClass.CAPACITY.value:
                    continue
                skipped = records.get(_record_text(skip.placement))
                if note(skipped, skip.at):
                    assert skipped is not None
                    failures[skipped] += 1
    return {
        key: PlacementStats(
            key,
            tuple(starts[key]),
            failures[key],
            used.get(key),
            tuple(unstarted[key]),
            waiting.get(key),
        )
        for key in keys
    }


def _unstarted_wait(attempt: Attempt, now: datetime) -> timedelta | None:
    """How long the attempt's job waited without starting: until its end, or until ``now`` while
    it still waits; None when it has no job, started, or an operator cancelled it (a wait
    someone cut short on purpose says nothing of the placement)."""
    created = created_at(attempt)
    if created is None or attempt.started_at is not None:
        return None
    if cancel_reason_of(attempt) is CancelReason.OPERATOR:
        return None
    if attempt.ended_at is None and is_terminal(attempt.state):
        return None  # ended before its end time was recorded: its wait is not known
    return max((attempt.ended_at or now) - created, timedelta(0))


def _median(waits: Iterable[timedelta]) -> timedelta:
    return timedelta(seconds=statistics.median(wait.total_seconds() for wait in waits))


def order_placements(
    keys: Sequence[str],
    stats: Mapping[str, PlacementStats],
    *,
    run_id: str,
    now: datetime,
    window: timedelta = LEARNING_WINDOW,
) -> LearnedOrder:
    """The chain order for run ``run_id`` from ``stats`` (placement ``i`` has key ``keys[i]``);
    see the module docstring."""
    empty = {key: PlacementStats(key) for key in keys}
    of = [stats.get(key, empty[key]) for key in keys]
    ranked = sorted(range(len(keys)), key=lambda index: _rank(of[index], index))
    reasons = {index: _reason(of[index], now, window) for index in range(len(keys))}
    explored = _explored(ranked, of, run_id, now)
    if explored is not None:
        ranked.remove(explored)
        ranked.insert(0, explored)
        reasons[explored] = (
            f"explored (about 1 run in {round(1 / EXPLORE_SHARE)} tries an untried or long-unused "
            f"placement first): {reasons[explored]}"
        )
    return LearnedOrder(tuple(ranked), reasons, explored)


def learn_order(
    template: Template,
    default_region: str,
    runs: Iterable[Run],
    *,
    run_id: str,
    now: datetime,
    window: timedelta = LEARNING_WINDOW,
) -> LearnedOrder:
    """The order of ``template``'s chain for run ``run_id``, learned from ``runs`` (the
    template's recent runs, any order)."""
    keys = [placement_key(p, template, default_region).key for p in template.placements]
    records = {
        _record_text(placement_record(placement)): key
        for placement, key in zip(template.placements, keys, strict=True)
    }
    stats = placement_stats(
        keys, runs, now, chain_records=records, window=window, max_queue=template.max_queue
    )
    return order_placements(keys, stats, run_id=run_id, now=now, window=window)


def written_order(template: Template, why: str) -> LearnedOrder:
    """The chain as written, each placement saying ``why`` (no history, or none readable)."""
    indices = tuple(range(len(template.placements)))
    return LearnedOrder(indices, dict.fromkeys(indices, why))


def recorded_order(run: Run, template: Template) -> tuple[int, ...] | None:
    """The order ``run`` recorded, when it is an order of ``template``'s chain as it is now;
    None for a run that recorded none, or whose template's chain changed length since (it then
    walks the chain as written)."""
    order = run.placement_order
    if order is None or sorted(order) != list(range(len(template.placements))):
        return None
    return tuple(order)


def start_of_order(run: Run, template: Template) -> int:
    """The chain index a walk that starts over (a wait for a placement, an operator's retry)
    begins at: the first of the run's order, else 0."""
    order = recorded_order(run, template)
    return order[0] if order else 0


def resume_index(run: Run, template: Template, attempt: int) -> int:
    """The chain index a wait that holds attempt ``attempt`` back (a GPU-hour budget's) resumes
    its walk at: where the run's own planned retry for that attempt would have walked from, else
    the head of the run's order (``start_of_order``: a learned order's best-ranked placement)."""
    planned = run.next_retry
    if planned is not None and planned.attempt == attempt:
        return planned.placement_index
    return start_of_order(run, template)


def _rank(stats: PlacementStats, index: int) -> tuple[int, float, int]:
    expected = stats.expected_wait
    if expected is not None:
        return (0, expected.total_seconds(), index)
    if not stats.tried:
        return (1, 0.0, index)
    return (2, float(stats.capacity_failures), index)


def _reason(stats: PlacementStats, now: datetime, window: timedelta) -> str:
    span = describe_duration(window)
    if not stats.tried:
        return f"untried in the last {span}"
    failures = _failures_text(stats.capacity_failures)
    median, expected = stats.median_start, stats.expected_wait
    if median is None or expected is None:
        return f"no start in the last {span}; {failures}"
    count = len(stats.starts)
    text = (
        f"median time-to-start {describe_duration(_whole_seconds(median))} over {count} "
        f"start{'s' if count != 1 else ''} in the last {span}; {failures}"
    )
    if stats.capacity_failures:
        text += f" (expected wait {describe_duration(_whole_seconds(expected))})"
    assert stats.last_used is not None
    if now - stats.last_used >= LONG_UNUSED:
        age = timedelta(hours=int((now - stats.last_used) / timedelta(hours=1)))
        text += f"; last used {describe_duration(age)} ago"
    return text


def _failures_text(count: int) -> str:
    if count == 0:
        return "no capacity failure"
    return f"{count} capacity failure{'s' if count != 1 else ''}"


def _explored(
    ranked: Sequence[int], of: Sequence[PlacementStats], run_id: str, now: datetime
) -> int | None:
    """The placement this run explores first, if its draw says so and one is due a sample."""
    candidates = [
        index
        for index in ranked[1:]
        if (last := of[index].last_used) is None or now - last >= LONG_UNUSED
    ]
    draw, pick = run_draws(run_id)
    # Nothing measured yet: the written order is all there is to go by (it may rank by cost).
    nothing_measured = not any(stats.tried for stats in of)
    if nothing_measured or not candidates or draw >= EXPLORE_SHARE:
        return None
    return candidates[int(pick * len(candidates))]


def run_draws(run_id: str) -> tuple[float, float]:
    """Two numbers in [0, 1) fixed by the run id: whether the run explores, and which one."""
    digest = hashlib.sha256(run_id.encode()).digest()
    scale = float(2**64)
    return (
        int.from_bytes(digest[:8], "big") / scale,
        int.from_bytes(digest[8:16], "big") / scale,
    )


def _whole_seconds(length: timedelta) -> timedelta:
    return timedelta(seconds=int(length.total_seconds()))


def _record_text(record: Mapping[str, object]) -> str:
    # chain_record: an attempt whose wait a deadline cut still counts for its chain placement.
    return json.dumps(chain_record(record), sort_keys=True, default=str)
