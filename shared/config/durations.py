"""Durations as users write them: ``90s``, ``30m``, ``2h``, ``1d``, ``1h30m``, ``7200s`` or seconds.

The REST form Vertex AI prints (``"7200s"``, ``"1.5s"``) is one of the accepted spellings, so values
copied from a ``gcloud`` config file or a REST body read the same way.
"""

from __future__ import annotations

import re
from datetime import timedelta

SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}

_PART = r"(\d+(?:\.\d+)?)([smhd])"
_WHOLE = re.compile(rf"(?:{_PART})+")
_PARTS = re.compile(_PART)

DURATION_HINT = 'write a number with a unit (s, m, h, d), e.g. "90s", "30m", "2h", "1d", "1h30m"'
MAX_DURATION = timedelta(days=3650)
"""The longest duration read: no wait, timeout or period here needs ten years, and beyond a
billion days Python cannot hold one at all (arithmetic on it would crash the loader)."""


def parse_duration(value: object) -> timedelta:
    """Read a duration; raise ``ValueError`` saying what is wrong and how to write it instead."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got boolean {str(value).lower()}; {DURATION_HINT}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative (got {value}); use 0 or more")
        return _at_most_max(float(value), value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration, got {type(value).__name__}; {DURATION_HINT}")
    text = value.strip().lower()
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"{value!r} is not a duration; {DURATION_HINT}")
    seconds = sum(float(number) * SECONDS_PER_UNIT[unit] for number, unit in _PARTS.findall(text))
    return _at_most_max(seconds, value)


def _at_most_max(seconds: float, value: object) -> timedelta:
    if not seconds <= MAX_DURATION.total_seconds():  # also refuses nan and inf
        raise ValueError(
            f"{value!r} is longer than {MAX_DURATION.days} days; no duration here needs that: "
            f"{DURATION_HINT}"
        )
    return timedelta(seconds=seconds)


def rest_duration(duration: timedelta) -> str:
    """The ``google.protobuf.Duration`` JSON form Vertex AI expects, e.g. ``"7200s"``."""
    seconds = duration.total_seconds()
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds:.9f}".rstrip("0") + "s"


def describe_duration(duration: timedelta) -> str:
    """A duration as users write it, in the largest whole unit: ``7d``, ``48h``, ``90m``, ``5s``."""
    seconds = duration.total_seconds()
    for unit, size in sorted(SECONDS_PER_UNIT.items(), key=lambda entry: -entry[1]):
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def age_text(delta: timedelta) -> str:
    """A duration as whole seconds, for messages: ``"5400s"``."""
    return f"{int(delta.total_seconds())}s"
