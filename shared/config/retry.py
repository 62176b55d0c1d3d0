"""A template's retry policy, read and bounded here; applied by the job-state function.

Users write::

    retry:
      attempts: 4                        # every attempt of a run, fallbacks included
      backoff: {base: 60s, cap: 30m}     # doubles from base up to cap
      user_failures: 1                   # retries allowed after the training code itself failed
      retry_on: [capacity, infrastructure]

Anything left out takes the default of ``model.RetryPolicy``.
"""

from __future__ import annotations

from datetime import timedelta

from shared.config.durations import describe_duration
from shared.config.fields import read_duration, read_int, read_list, read_mapping, read_text
from shared.config.model import FailureClass, RetryPolicy
from shared.config.problems import Problems, child, item

RETRY_KEYS = frozenset({"attempts", "backoff", "user_failures", "retry_on"})
BACKOFF_KEYS = frozenset({"base", "cap"})
MAX_ATTEMPTS = 20  # Vertex already retries stockouts; ours come on top and must stay bounded

# Cancelled jobs were stopped by a person; user-code failures have their own budget.
NEVER_RETRIED = {
    FailureClass.CANCELLED: "a cancelled job was stopped on purpose and is never retried",
    FailureClass.USER_CODE: "user-code failures are retried through user_failures: N instead",
}
RETRYABLE_NAMES = tuple(kind.value for kind in FailureClass if kind not in NEVER_RETRIED)


def read_retry_policy(value: object, path: str, problems: Problems) -> RetryPolicy:
    """The policy, with defaults for what is left out (and for what is wrong, once recorded)."""
    default = RetryPolicy()
    if value is None:
        return default
    policy = read_mapping(value, path, problems, allowed=RETRY_KEYS)
    if policy is None:
        return default
    attempts = read_int(
        policy.get("attempts"), child(path, "attempts"), problems, minimum=1, maximum=MAX_ATTEMPTS
    )
    base, cap = _backoff(policy.get("backoff"), child(path, "backoff"), problems, default)
    user_failures = read_int(
        policy.get("user_failures"), child(path, "user_failures"), problems, minimum=0
    )
    retry_on = _retry_on(policy.get("retry_on"), child(path, "retry_on"), problems)
    result = RetryPolicy(
        attempts=default.attempts if attempts is None else attempts,
        backoff_base=base,
        backoff_cap=cap,
        user_failures=default.user_failures if user_failures is None else user_failures,
        retry_on=default.retry_on if retry_on is None else retry_on,
    )
    if result.user_failures >= result.attempts:
        problems.add(
            child(path, "user_failures"),
            f"{result.user_failures} retries of user-code "
            f"failures need more than {result.attempts} attempts in all; raise attempts "
            f"to {result.user_failures + 1} or lower user_failures",
        )
    return result


def _backoff(
    value: object, path: str, problems: Problems, default: RetryPolicy
) -> tuple[timedelta, timedelta]:
    if value is None:
        return default.backoff_base, default.backoff_cap
    backoff = read_mapping(value, path, problems, allowed=BACKOFF_KEYS)
    if backoff is None:
        return default.backoff_base, default.backoff_cap
    base = read_duration(backoff.get("base"), child(path, "base"), problems)
    cap = read_duration(backoff.get("cap"), child(path, "cap"), problems)
    base = default.backoff_base if base is None else base
    cap = default.backoff_cap if cap is None else cap
    if not base:
        problems.add(child(path, "base"), "must be longer than 0s; e.g. 60s")
    if base > cap:
        problems.add(
            path,
            f"base ({describe_duration(base)}) is longer than cap ({describe_duration(cap)}); "
            "the backoff doubles from base up to cap, so raise cap or lower base",
        )
    return base, cap


def _retry_on(value: object, path: str, problems: Problems) -> frozenset[FailureClass] | None:
    names = read_list(value, path, problems)
    if names is None:
        return None
    classes: set[FailureClass] = set()
    for index, name in enumerate(names):
        text = read_text(name, item(path, index), problems, required=True)
        kind = next((kind for kind in FailureClass if kind.value == text), None)
        if text is None:
            continue
        if kind is None:
            problems.add(
                item(path, index),
                f"{text!r} is not a failure class; use one of {', '.join(RETRYABLE_NAMES)}",
            )
        elif kind in NEVER_RETRIED:
            problems.add(item(path, index), f"{text!r} cannot be listed: {NEVER_RETRIED[kind]}")
        else:
            classes.add(kind)
    return frozenset(classes)
