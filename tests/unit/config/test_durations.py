"""shared.config.durations: the spellings users and the REST API use."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.config.durations import describe_duration, parse_duration, rest_duration


@pytest.mark.parametrize(
    ("written", "duration"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        ("7200s", timedelta(hours=2)),  # the seed's gcloud maxWaitDuration
        ("1.5s", timedelta(seconds=1.5)),  # protobuf Duration JSON allows fractions
        (" 2H ", timedelta(hours=2)),
        (7200, timedelta(hours=2)),
        (0, timedelta(0)),  # FLEX_START: wait forever
        (0.5, timedelta(seconds=0.5)),
        ("3650d", timedelta(days=3650)),  # the longest read
    ],
)
def test_durations_read(written: object, duration: timedelta) -> None:
    assert parse_duration(written) == duration


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("2 hours", "not a duration"),
        ("7200", "not a duration"),  # a unit is required in text: 7200 what?
        ("-5s", "not a duration"),
        (-5, "cannot be negative"),
        (True, "boolean"),
        ([1], "expected a duration"),
        # Past what Python can hold (the property test found the loader crash on these).
        (86400000000000.0, "longer than 3650 days"),
        ("999999999999d", "longer than 3650 days"),
        (float("inf"), "longer than 3650 days"),
        (float("nan"), "longer than 3650 days"),
        ("3651d", "longer than 3650 days"),
        ("", "not a duration"),
    ],
)
def test_bad_durations_say_how_to_write_them(written: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_duration(written)


@pytest.mark.parametrize(
    ("duration", "rest", "described"),
    [
        (timedelta(hours=2), "7200s", "2h"),
        (timedelta(days=7), "604800s", "7d"),
        (timedelta(seconds=1.5), "1.5s", "1.5s"),
        (timedelta(0), "0s", "0s"),
    ],
)
def test_durations_print(duration: timedelta, rest: str, described: str) -> None:
    assert rest_duration(duration) == rest
    assert describe_duration(duration) == described
