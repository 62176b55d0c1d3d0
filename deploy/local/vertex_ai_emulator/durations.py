"""Durations as people write them in config ("90s", "30m", "2h", "1d", or plain seconds)."""

from __future__ import annotations

import re

SECONDS_PER_UNIT: dict[str, float] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

_DURATION_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_duration(value: str | float) -> float:
    """Seconds in `value`: a number of seconds, or a string like "90s", "30m", "2h", "1d", "45".

    Raises ValueError for anything else, including negative numbers and booleans.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return float(value)
    if isinstance(value, str):
        match = _DURATION_PATTERN.match(value)
        if match:
            amount, unit = match.groups()
            return float(amount) * SECONDS_PER_UNIT[unit or "s"]
    raise ValueError(
        f'not a duration: {value!r} (use seconds or a string like "90s", "30m", "2h", "1d")'
    )


def format_duration(seconds: float) -> str:
    """The protobuf JSON form of a duration ("1800s"), as the real API prints it in messages."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:g}s"
