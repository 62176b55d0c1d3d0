"""Simulated time and durations: the clock's scale and manual advance, duration strings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from core_builders import PARENT, job

from vertex_ai_emulator.clock import SimulatedClock
from vertex_ai_emulator.config import EmulatorConfig
from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.durations import format_duration, parse_duration

START = datetime(2025, 1, 1, tzinfo=UTC)


class FakeMonotonic:
    """Real time that the test moves."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


def test_clock_runs_at_its_scale_and_adds_manual_advances() -> None:
    real = FakeMonotonic()
    clock = SimulatedClock(time_scale=60, start=START, monotonic=real)
    real.seconds += 2
    assert clock.now() == START + timedelta(minutes=2)
    clock.advance(30)
    assert clock.now() == START + timedelta(minutes=2, seconds=30)
    clock.time_scale = 0
    real.seconds += 100
    assert clock.now() == START + timedelta(minutes=2, seconds=30)


def test_clock_refuses_to_go_back() -> None:
    with pytest.raises(ValueError):
        SimulatedClock(start=START).advance(-1)


def test_naive_start_is_taken_as_utc() -> None:
    clock = SimulatedClock(time_scale=0, start=datetime(2025, 1, 1))
    assert clock.now() == START


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("45", 45),
        ("1.5h", 5400),
        (" 10 m ", 600),
        (0, 0),
        (12.5, 12.5),
    ],
)
def test_valid_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10 minutes", "-5s", -1, "1w", True, None, "s", "1h30m"])
def test_invalid_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(("seconds", "text"), [(1800, "1800s"), (0.5, "0.5s"), (86400.0, "86400s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_emulator_catches_up_with_scaled_real_time_on_every_call() -> None:
    real = FakeMonotonic()
    emulator = Emulator(EmulatorConfig.default(), SimulatedClock(60, START, monotonic=real))
    created = emulator.create_custom_job(PARENT, job())
    real.seconds += 13  # 13 simulated minutes: 2 of provisioning, then 10 running, 1 to spare
    finished = emulator.get_custom_job(created.name)
    assert finished.state.name == "JOB_STATE_SUCCEEDED"
    assert finished.end_time == START + timedelta(minutes=12)
