"""What the stockout benchmark's harness does when (bench.capacity.schedule), as tables: every
delivery of a trigger, the pool's other system, Spot's preempting windows, and the steps."""

from __future__ import annotations

import pytest

from bench import capacity
from bench.capacity_trace import Trace, TraceSettings, Trigger, Window


def trace(
    triggers: tuple[Trigger, ...] = (),
    pool_busy: tuple[Window, ...] = (),
    spot: tuple[Window, ...] = (),
) -> Trace:
    settings = TraceSettings(triggers=1, days=1 / 24, drain_s=0.0)  # one hour: 6 steps of 10 m
    return Trace(settings, triggers, (), pool_busy, spot)


def kinds(found: list[capacity.Happening]) -> list[tuple[float, str]]:
    return [(h.at_s, h.what) for h in found]


@pytest.mark.parametrize(
    ("played", "expected"),
    [
        (trace(), [(600.0 * n, "tick") for n in range(1, 7)]),
        (
            trace(triggers=(Trigger(0, 600.0, 1),)),
            [(600.0, "trigger"), (600.0, "tick")],  # a trigger at a step comes before its tick
        ),
        (
            trace(triggers=(Trigger(0, 100.0, 2),)),
            [(100.0, "trigger"), (130.0, "trigger")],  # the second delivery 30 s later
        ),
        (
            trace(pool_busy=(Window(600.0, 1200.0),)),
            [(600.0, "blocker"), (600.0, "tick")],  # the other system before the tick
        ),
        (
            trace(spot=(Window(300.0, 900.0),)),
            [(300.0, "spot"), (900.0, "spot")],
        ),
    ],
)
def test_the_schedule_orders_deliveries_before_the_steps_tick(
    played: Trace, expected: list[tuple[float, str]]
) -> None:
    found = [k for k in kinds(capacity.schedule(played, 600.0)) if k[1] != "tick" or k in expected]
    assert found == expected


def test_spot_windows_set_and_lift_the_preemption() -> None:
    played = trace(spot=(Window(300.0, 900.0),))
    spot = [h.payload for h in capacity.schedule(played, 600.0) if h.what == "spot"]
    assert spot == [played.settings.preempt_after_s, None]


@pytest.mark.parametrize(
    ("message", "key", "expected"),
    [
        (
            "config /tmp/x.yaml has 1 problem:\n"
            "- templates.t.start_by: unknown key 'start_by'; allowed here: a, b",
            "start_by",
            "templates.t.start_by: unknown key 'start_by'",
        ),
        ("something else entirely", "start_by", "something else entirely"),
    ],
)
def test_a_missing_feature_is_named_by_its_config_error_line(
    message: str, key: str, expected: str
) -> None:
    assert capacity.config_problem(message, key) == expected
