"""The ``budget`` key: a cap on GPU-hours over a rolling window, on a template or at the top level.

Users write::

    budget:                 # at the top level: every template's runs together
      gpu_hours: 500
      per: 7d
      when_exceeded: wait   # or reject; default wait

    templates:
      train:
        budget: {gpu_hours: 100, per: 7d, when_exceeded: reject}   # this template's runs

A zero, negative or unreadable ``gpu_hours`` or ``per``, or another ``when_exceeded``, is a load
error naming the key. What a budget does at submission is ``shared.policy.budgets``'.
"""

from __future__ import annotations

from datetime import timedelta

from shared.config.fields import describe, read_duration, read_mapping, read_number
from shared.config.model import Budget, WhenExceeded
from shared.config.problems import Problems, child

BUDGET_KEYS = frozenset({"gpu_hours", "per", "when_exceeded"})
WHEN_EXCEEDED_VALUES = tuple(value.value for value in WhenExceeded)


def read_budget(value: object, path: str, problems: Problems) -> Budget | None:
    """The budget at ``path``, or None when left out (or wrong, once the problems are recorded)."""
    if value is None:
        return None
    spec = read_mapping(value, path, problems, allowed=BUDGET_KEYS, required=("gpu_hours", "per"))
    if spec is None:
        return None
    gpu_hours = read_number(spec.get("gpu_hours"), child(path, "gpu_hours"), problems, above=0)
    per_path = child(path, "per")
    per = read_duration(spec.get("per"), per_path, problems)
    if per is not None and per <= timedelta(0):
        problems.add(
            per_path, "must be longer than 0s: the window the GPU-hours count over, e.g. 7d"
        )
        per = None
    when = _when_exceeded(spec.get("when_exceeded"), child(path, "when_exceeded"), problems)
    if gpu_hours is None or per is None or when is None:
        return None
    return Budget(gpu_hours=gpu_hours, per=per, when_exceeded=when)


def _when_exceeded(value: object, path: str, problems: Problems) -> WhenExceeded | None:
    if value is None:
        return WhenExceeded.WAIT
    if isinstance(value, str) and value in WHEN_EXCEEDED_VALUES:
        return WhenExceeded(value)
    problems.add(
        path,
        f"{describe(value)} is not one of {', '.join(WHEN_EXCEEDED_VALUES)}: wait (the run "
        "waits until the budget frees) or reject (the run ends, alerted)",
    )
    return None
