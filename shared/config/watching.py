"""The settings of the job-state side: reconcile bounds, the watchdog's grace, the alert webhook.

Users write (all optional; docs/configuration.md, "Top level")::

    job_events_topic: vertex-dispatch-job-events   # where the reconciler publishes job-state hints
    watchdog_grace: 30m                             # beyond a placement's max wait
    reconcile_max_runs: 2000                        # active runs one reconcile tick reads
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
    DEFAULT_RECONCILE_MAX_RUNS,
    DEFAULT_WATCHDOG_GRACE,
    DEFAULT_WEBHOOK_TIMEOUT,
    AlertWebhook,
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
