"""Typed readers for YAML values: each checks one value, records a problem when it is wrong.

A reader returns the value in the type asked for, or ``None`` when it is missing or wrong, after
recording a ``Problem`` under the value's key path. Callers keep going with ``None`` so that one
pass finds every mistake. ``None`` in the YAML (``key:`` with nothing after it) counts as missing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any

from shared.config.durations import parse_duration
from shared.config.problems import Problems, child, item

_SCALAR_TEXT_TYPES = (str, int, float)  # numbers are accepted where text is meant, never booleans


def describe(value: object) -> str:
    """How a YAML value reads in a message: its type, and the value when it is short."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()} (YAML reads yes/no/on/off as booleans: quote it)"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def suggest(key: str, allowed: Collection[str]) -> str:
    """ "; did you mean 'x'?" when ``key`` looks like a misspelling of an allowed key."""
    close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def read_mapping(
    value: object,
    path: str,
    problems: Problems,
    *,
    allowed: Collection[str],
    required: Collection[str] = (),
) -> Mapping[str, Any] | None:
    """A mapping whose keys are all in ``allowed`` and which holds every key in ``required``."""
    if not isinstance(value, Mapping):
        problems.add(path, f"expected a mapping of keys to values, got {describe(value)}")
        return None
    for key in value:
        if not isinstance(key, str):
            problems.add(path, f"key {key!r} is not text; quote it")
        elif key not in allowed:
            # "; did you mean 'x'? Allowed here: ...", or with no guess "; allowed here: ...".
            guess = suggest(key, allowed)
            listed = ", ".join(sorted(allowed))
            after = f"{guess} Allowed here" if guess else "; allowed here"
            problems.add(child(path, key), f"unknown key {key!r}{after}: {listed}.")
    for key in required:
        if value.get(key) is None:
            problems.add(child(path, key), "is required here; add it")
    return value


def read_text(
    value: object,
    path: str,
    problems: Problems,
    *,
    pattern: re.Pattern[str] | None = None,
    rule: str = "",
    required: bool = False,
) -> str | None:
    """Text (numbers are turned into text); when ``pattern`` is given it must match in full."""
    if value is None:
        if required:
            problems.add(path, "is required; add it")
        return None
    if isinstance(value, bool) or not isinstance(value, _SCALAR_TEXT_TYPES):
        problems.add(path, f"expected text, got {describe(value)}")
        return None
    text = str(value)
    if not text:
        problems.add(path, "is empty; give it a value or remove the key")
        return None
    if pattern is not None and not pattern.fullmatch(text):
        problems.add(path, f"{text!r} is not valid: {rule}")
        return None
    return text


def read_int(
    value: object,
    path: str,
    problems: Problems,
    *,
    minimum: int,
    maximum: int | None = None,
    required: bool = False,
) -> int | None:
    """A whole number in ``[minimum, maximum]``."""
    if value is None:
        if required:
            problems.add(path, "is required; add a whole number")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(path, f"expected a whole number, got {describe(value)}")
        return None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
        problems.add(path, f"{value} is out of range; use a whole number {bounds}")
        return None
    return value


def read_number(value: object, path: str, problems: Problems, *, above: float) -> float | None:
    """A number (whole or not) greater than ``above``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(path, f"expected a number, got {describe(value)}")
        return None
    if value <= above:
        problems.add(path, f"{value} is out of range; use a number greater than {above:g}")
        return None
    return float(value)


def read_duration(
    value: object, path: str, problems: Problems, *, required: bool = False
) -> timedelta | None:
    """A duration such as ``2h`` or ``7200s`` (see ``shared.config.durations``)."""
    if value is None:
        if required:
            problems.add(path, 'is required; set a duration such as "2h" (0 means no limit)')
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        problems.add(path, str(error))
        return None


def read_list(value: object, path: str, problems: Problems) -> list[Any] | None:
    """A YAML list (a single value is not silently wrapped: the user meant one or the other)."""
    if value is None:
        return None
    if not isinstance(value, list):
        problems.add(path, f"expected a list, got {describe(value)}; write it as [a, b] or - a")
        return None
    return value


def read_text_list(
    value: object,
    path: str,
    problems: Problems,
    *,
    pattern: re.Pattern[str] | None = None,
    rule: str = "",
) -> tuple[str, ...] | None:
    """A list of text items, each checked like ``read_text``."""
    values = read_list(value, path, problems)
    if values is None:
        return None
    texts = [
        read_text(entry, item(path, index), problems, pattern=pattern, rule=rule, required=True)
        for index, entry in enumerate(values)
    ]
    return tuple(text for text in texts if text is not None)


def read_text_map(
    value: object,
    path: str,
    problems: Problems,
    *,
    key_pattern: re.Pattern[str],
    key_rule: str,
) -> dict[str, str] | None:
    """A mapping of names to text values, e.g. ``env`` or ``attributes``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.add(path, f"expected a mapping of names to values, got {describe(value)}")
        return None
    result: dict[str, str] = {}
    for key, entry in value.items():
        if not isinstance(key, str) or not key_pattern.fullmatch(key):
            problems.add(child(path, str(key)), f"{key!r} is not a valid name: {key_rule}")
            continue
        text = read_text(entry, child(path, key), problems, required=True)
        if text is not None:
            result[key] = text
    return result
