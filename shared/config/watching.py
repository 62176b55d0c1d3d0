"""The settings of the job-state side: reconcile bounds, the watchdogs' limits, the alert webhook.

Users write (all optional; docs/configuration.md, "Top level")::

    job_events_topic: vertex-dispatch-job-events   # where the reconciler publishes job-state hints
    watchdog_grace: 30m                             # beyond a placement's max wait
    reconcile_max_runs: 2000                        # active runs one reconcile tick reads
    no_placement_alert: 6h                          # a run no placement takes: alert, then daily
    no_placement_give_up: 7d                        # ... and end it FAILED
    cooldown: 30m                                   # a placement that failed for capacity: last
    data_timeout: 24h                               # a run waiting for its data, at most
    alert_webhook: {url_env: ALERT_WEBHOOK_URL, format: slack, timeout: 5s}

The webhook URL is a credential (anyone holding it may post), so the config names only the
environment variable that holds it; the variable is read when an alert is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta

from shared.config.durations import describe_duration
from shared.config.fields import read_duration, read_int, read_mapping, read_text
from shared.config.model import (
    DEFAULT_COOLDOWN,
    DEFAULT_DATA_TIMEOUT,
    DEFAULT_NO_PLACEMENT_ALERT,
    DEFAULT_NO_PLACEMENT_GIVE_UP,
    DEFAULT_RECONCILE_MAX_RUNS,
    DEFAULT_WATCHDOG_GRACE,
    DEFAULT_WEBHOOK_TIMEOUT,
    AlertWebhook,
    Template,
    WebhookFormat,
)
from shared.config.problems import Problems, child

WEBHOOK_KEYS = frozenset({"url_env", "format", "timeout"})
MAX_RECONCILE_RUNS = 100_000  # a tick must finish well inside the scheduler's 1-minute period
MAX_WEBHOOK_TIMEOUT = timedelta(seconds=30)  # a slow webhook must not hold the function up
ENV_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
ENV_VARIABLE_RULE = "an environment variable name: capital letters, digits and _, e.g. ALERT_URL"
FORMAT_NAMES = tuple(kind.value for kind in WebhookFormat)


def read_watchdog_grace(value: object, path: str, problems: Problems) -> timedelta:
    grace = read_duration(value, path, problems)
    return DEFAULT_WATCHDOG_GRACE if grace is None else grace


def read_watchdog_limit(value: object, path: str, problems: Problems) -> timedelta | None:
    """A watchdog's limit (``max_queue``, ``no_placement_alert``, ``no_placement_give_up``):
    a duration longer than 0s, or None when left out (or wrong, once the problem is recorded)."""
    limit = read_duration(value, path, problems)
    if limit is not None and limit <= timedelta(0):
        problems.add(path, "must be longer than 0s, e.g. 24h; or leave it out for the default")
        return None
    return limit


def read_start_by(value: object, path: str, problems: Problems) -> timedelta | None:
    """A template's ``start_by`` (how long after its trigger a run must have a job RUNNING):
    a duration longer than 0s, or None when left out (or wrong, once the problem is recorded)."""
    start_by = read_duration(value, path, problems)
    if start_by is not None and start_by <= timedelta(0):
        problems.add(
            path,
            "must be longer than 0s: how long after its trigger a run must have a job running, "
            "e.g. 6h; or leave it out for no deadline",
        )
        return None
    return start_by


MAX_COOLDOWN = timedelta(days=7)  # longer would hide a placement that is back for good


def read_cooldown(value: object, path: str, problems: Problems) -> timedelta | None:
    """A ``cooldown`` (top level or a template's): a duration from 0 (off) to 7 days, or None
    when left out (or wrong, once the problem is recorded)."""
    length = read_duration(value, path, problems)
    if length is not None and not timedelta(0) <= length <= MAX_COOLDOWN:
        problems.add(
            path,
            f"{describe_duration(length)} is out of range: use 0 (no cooldown) up to "
            f"{describe_duration(MAX_COOLDOWN)}, e.g. 30m",
        )
        return None
    return length


def read_top_cooldown(value: object, path: str, problems: Problems) -> timedelta:
    """The top-level ``cooldown``, ``DEFAULT_COOLDOWN`` (30m) when left out."""
    length = read_cooldown(value, path, problems)
    return DEFAULT_COOLDOWN if length is None else length


def read_no_placement_limits(
    top: Mapping[str, object], problems: Problems
) -> tuple[timedelta, timedelta]:
    """The top-level ``no_placement_alert`` and ``no_placement_give_up``, defaults filled in."""
    alert = read_watchdog_limit(top.get("no_placement_alert"), "no_placement_alert", problems)
    give_up = read_watchdog_limit(top.get("no_placement_give_up"), "no_placement_give_up", problems)
    return (
        DEFAULT_NO_PLACEMENT_ALERT if alert is None else alert,
        DEFAULT_NO_PLACEMENT_GIVE_UP if give_up is None else give_up,
    )


def check_no_placement_limits(
    alert: timedelta,
    give_up: timedelta,
    templates: Mapping[str, Template],
    problems: Problems,
) -> None:
    """Each template's no_placement_alert (its own, or the config's) comes before its
    no_placement_give_up: otherwise a run would end without anyone being told it waited."""
    pairs = {"": (alert, give_up, "no_placement_give_up")}
    for name, template in templates.items():
        if template.no_placement_alert is None and template.no_placement_give_up is None:
            continue
        own = template.no_placement_give_up is not None
        pairs[name] = (
            template.no_placement_alert or alert,
            template.no_placement_give_up or give_up,
            f"templates.{name}.no_placement_{'give_up' if own else 'alert'}",
        )
    for effective_alert, effective_give_up, path in pairs.values():
        if effective_alert >= effective_give_up:
            problems.add(
                path,
                f"no_placement_give_up ({describe_duration(effective_give_up)}) must be longer "
                f"than no_placement_alert ({describe_duration(effective_alert)}): a run would "
                "end before anyone is told it waits; raise no_placement_give_up or lower "
                "no_placement_alert",
            )


def read_reconcile_max_runs(value: object, path: str, problems: Problems) -> int:
    count = read_int(value, path, problems, minimum=1, maximum=MAX_RECONCILE_RUNS)
    return DEFAULT_RECONCILE_MAX_RUNS if count is None else count


def read_alert_webhook(value: object, path: str, problems: Problems) -> AlertWebhook | None:
    """The webhook channel, or None when absent (or wrong, once the problem is recorded)."""
    if value is None:
        return None
    webhook: Mapping[str, object] | None = read_mapping(
        value, path, problems, allowed=WEBHOOK_KEYS, required=["url_env"]
    )
    if webhook is None:
        return None
    url_env = read_text(
        webhook.get("url_env"),
        child(path, "url_env"),
        problems,
        pattern=ENV_VARIABLE,
        rule=ENV_VARIABLE_RULE,
    )
    webhook_format = _format(webhook.get("format"), child(path, "format"), problems)
    timeout = _timeout(webhook.get("timeout"), child(path, "timeout"), problems)
    if url_env is None:
        return None
    return AlertWebhook(url_env=url_env, format=webhook_format, timeout=timeout)


def _format(value: object, path: str, problems: Problems) -> WebhookFormat:
    text = read_text(value, path, problems)
    if text is None:
        return WebhookFormat.SLACK
    found = next((kind for kind in WebhookFormat if kind.value == text), None)
    if found is None:
        problems.add(path, f"{text!r} is not a webhook format; use {' or '.join(FORMAT_NAMES)}")
        return WebhookFormat.SLACK
    return found


def _timeout(value: object, path: str, problems: Problems) -> timedelta:
    timeout = read_duration(value, path, problems)
    if timeout is None:
        return DEFAULT_WEBHOOK_TIMEOUT
    if not timedelta(0) < timeout <= MAX_WEBHOOK_TIMEOUT:
        problems.add(
            path,
            f"{describe_duration(timeout)} is out of range: use more than 0s and at most "
            f"{describe_duration(MAX_WEBHOOK_TIMEOUT)}, e.g. 5s",
        )
        return DEFAULT_WEBHOOK_TIMEOUT
    return timeout


def read_data_timeout(value: object, path: str, problems: Problems) -> timedelta:
    """The top-level ``data_timeout``: longer than 0s; ``DEFAULT_DATA_TIMEOUT`` (24h) when left
    out (or wrong, once the problem is recorded)."""
    length = read_duration(value, path, problems)
    if length is None:
        return DEFAULT_DATA_TIMEOUT
    if length <= timedelta(0):
        problems.add(
            path,
            "must be longer than 0s: it is how long a run waits for its data (a manifest's "
            "missing files, a quiet dataset's min_objects) before it fails; e.g. 24h",
        )
        return DEFAULT_DATA_TIMEOUT
    return length
