"""The five-field cron expressions Cloud Scheduler takes, matched against a minute.

Supports what schedules are written with: ``*``, numbers, ranges ``a-b``, lists ``a,b`` and steps
``*/n`` or ``a-b/n``, in minute, hour, day of month, month and day of week (0 or 7 is Sunday).
When both day fields are restricted, either may match, as in cron.
"""

from __future__ import annotations

from datetime import datetime

FIELD_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
FIELD_NAMES = ("minute", "hour", "day of month", "month", "day of week")


class CronError(ValueError):
    """A cron expression this matcher cannot read; the message names the field and the fix."""


def cron_matches(expression: str, moment: datetime) -> bool:
    """Whether ``expression`` fires in the minute of ``moment``."""
    fields = expression.split()
    if len(fields) != len(FIELD_RANGES):
        raise CronError(
            f"cron {expression!r} has {len(fields)} fields; write five: "
            "minute hour day-of-month month day-of-week"
        )
    minute, hour, day, month, weekday = (
        _values(text, name, bounds)
        for text, name, bounds in zip(fields, FIELD_NAMES, FIELD_RANGES, strict=True)
    )
    cron_weekday = (moment.weekday() + 1) % 7  # cron counts from Sunday = 0
    day_matches = moment.day in day
    weekday_matches = cron_weekday in weekday or (cron_weekday == 0 and 7 in weekday)
    if fields[2] != "*" and fields[4] != "*":
        days_ok = day_matches or weekday_matches
    else:
        days_ok = day_matches and weekday_matches
    return moment.minute in minute and moment.hour in hour and moment.month in month and days_ok


def _values(text: str, name: str, bounds: tuple[int, int]) -> set[int]:
    low, high = bounds
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if span == "*":
                start, end = low, high
            elif "-" in span:
                start, end = (int(each) for each in span.split("-", 1))
            else:
                start = end = int(span)
        except ValueError:
            raise CronError(
                f"cron {name} field {text!r}: use *, N, A-B, lists with ',' and steps '/N'"
            ) from None
        if not (low <= start <= end <= high) or step < 1:
            raise CronError(f"cron {name} field {text!r}: values must lie in {low}-{high}")
        values.update(range(start, end + 1, step))
    return values
