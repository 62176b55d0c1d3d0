"""The stockout benchmark's trace (bench.capacity_trace): deterministic from its seed, shaped as
the settings say, and turned into a Vertex AI emulator config the emulator accepts."""

from __future__ import annotations

import itertools
import random

import pytest

from bench import capacity_trace as tracing
from bench.capacity_trace import CapacityStep, TraceSettings, Window
from vertex_ai_emulator.config import EmulatorConfig


def test_the_same_seed_gives_the_same_trace_and_another_seed_another() -> None:
    settings = TraceSettings(triggers=50, days=2)
    assert tracing.generate(settings) == tracing.generate(settings)
    assert tracing.generate(TraceSettings(triggers=50, days=2, seed=15)) != tracing.generate(
        settings
    )


@pytest.mark.parametrize(
    ("triggers", "days", "duplicate_share"),
    [(20, 1.0, 0.0), (210, 7.0, 0.1), (210, 7.0, 1.0), (1, 0.5, 0.5)],
)
def test_triggers_are_sorted_within_the_days_and_duplicated_by_the_share(
    triggers: int, days: float, duplicate_share: float
) -> None:
    trace = tracing.generate(
        TraceSettings(triggers=triggers, days=days, duplicate_share=duplicate_share)
    )
    times = [t.at_s for t in trace.triggers]
    assert len(times) == triggers
    assert times == sorted(times)
    assert all(0 <= at <= days * tracing.DAY_S for at in times)
    assert [t.index for t in trace.triggers] == list(range(triggers))
    assert {t.deliveries for t in trace.triggers} <= {1, 2}
    if duplicate_share == 0.0:
        assert all(t.deliveries == 1 for t in trace.triggers)
    if duplicate_share == 1.0:
        assert all(t.deliveries == 2 for t in trace.triggers)


@pytest.mark.parametrize(
    ("share", "cycle_s", "horizon_s", "expected"),
    [
        (0.0, 3600.0, 86_400.0, ()),
        (1.0, 3600.0, 86_400.0, (Window(0.0, 86_400.0),)),
    ],
)
def test_windows_at_the_extreme_shares(
    share: float, cycle_s: float, horizon_s: float, expected: tuple[Window, ...]
) -> None:
    assert tracing.windows(random.Random(1), share, cycle_s, horizon_s) == expected


@pytest.mark.parametrize("share", [0.15, 0.4, 0.5, 0.8])
def test_windows_cover_about_their_share_never_overlap_and_start_on_minutes(share: float) -> None:
    horizon = 60 * tracing.DAY_S  # long enough for the share to settle
    found = tracing.windows(random.Random(7), share, 8 * tracing.HOUR_S, horizon)
    assert tracing.covered_share(found, horizon) == pytest.approx(share, abs=0.08)
    for before, after in itertools.pairwise(found):
        assert before.end_s < after.start_s
    assert all(w.start_s % 60 == 0 and w.length_s >= 60 for w in found)


@pytest.mark.parametrize(
    ("found", "at_s", "inside"),
    [
        ((Window(60, 120),), 59.9, False),
        ((Window(60, 120),), 60, True),
        ((Window(60, 120),), 120, False),
        ((Window(0, 10), Window(60, 120)), 5, True),
        ((), 5, False),
    ],
)
def test_in_window_is_half_open(found: tuple[Window, ...], at_s: float, inside: bool) -> None:
    assert tracing.in_window(found, at_s) is inside


def test_the_primary_region_is_out_of_stock_most_of_the_time_and_the_second_never_empty() -> None:
    trace = tracing.generate(TraceSettings())
    primary = [s for s in trace.capacity if s.region == tracing.PRIMARY_REGION]
    second = [s for s in trace.capacity if s.region == tracing.SECOND_REGION]
    assert primary[0] == CapacityStep(0.0, tracing.PRIMARY_REGION, 0)
    assert {s.total for s in primary} == {0, TraceSettings().primary_gpus}
    assert trace.notes["primary_in_stock_share"] < 0.3
    assert second[0].at_s == 0.0
    assert {s.total for s in second} <= set(TraceSettings().second_levels)
    assert 0.35 <= trace.notes["pool_busy_share"] <= 0.65


def test_the_emulator_accepts_the_config_and_its_timeline_matches_the_trace() -> None:
    trace = tracing.generate(TraceSettings(triggers=30, days=1))
    # Without the progress model: its outcome keys come with the resume work (issue 14).
    raw = tracing.emulator_config(trace, progress=False)
    config = EmulatorConfig.from_dict(raw)
    later = [s for s in trace.capacity if s.at_s > 0]
    assert [(c.at_seconds, c.region, c.total) for c in config.capacity_timeline] == [
        (s.at_s, s.region, s.total) for s in later
    ]
    assert config.capacity[tracing.PRIMARY_REGION][tracing.ACCELERATOR] == 0
    assert len(config.outcome_rules) == len(trace.pool_busy)
    assert config.default_outcome.duration_seconds == TraceSettings().training_s


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"triggers": 0}, "at least one trigger"),
        ({"days": 0}, "positive number of days"),
        ({"duplicate_share": 1.5}, "duplicate_share must be within"),
        ({"pool_busy_share": -0.1}, "pool_busy_share must be within"),
    ],
)
def test_bad_settings_name_what_is_wrong(changes: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TraceSettings(**changes)  # type: ignore[arg-type]
