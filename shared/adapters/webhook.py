"""The optional webhook channel for alerts: one JSON POST to Slack or Google Chat, with a timeout.

The alerts topic and the ERROR log line are the channels that must work; a webhook is a courtesy
on top. So ``notify`` never raises: a missing URL, a refused connection, a slow or failing
receiver is logged as a WARNING and the function carries on. The URL is a secret and comes only
from the environment variable the config names (``alert_webhook.url_env``), never from the
config file or a message. Only the standard library is used: no client library to import.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from shared.config.model import AlertWebhook, WebhookFormat
from shared.logs import log
from shared.model.alerts import Alert

ALLOWED_SCHEMES = ("https://", "http://")  # never file:// or other urllib schemes
MAX_ATTEMPTS_SHOWN = 5

logger = logging.getLogger(__name__)


def alert_text(alert: Alert) -> str:
    """The alert as the few lines a person reads in a chat room (both formats take this markup)."""
    lines = [
        f"*{alert.severity.value}* vertex-dispatch `{alert.reason}`: run `{alert.run_id}`"
        + (f" (template `{alert.template}`)" if alert.template else ""),
        f"Trigger: {alert.trigger}",
        alert.message,
        f"*What to do:* {alert.what_to_do}",
    ]
    for attempt in alert.attempts[-MAX_ATTEMPTS_SHOWN:]:
        error = (attempt.get("error") or {}).get("message")
        lines.append(
            f"• attempt {attempt.get('number')}: {attempt.get('state')}"
            + (f" on {attempt.get('job_name')}" if attempt.get("job_name") else "")
            + (f": {error}" if error else "")
        )
    # The id a reader (or a bot) tells a second copy of this alert by: alerts are at least once.
    lines.append(f"Alert id: `{alert.alert_id}`")
    return "\n".join(lines)


def _slack_body(alert: Alert) -> dict[str, Any]:
    # A console link unfurled into a preview card is noise in an alerts channel.
    return {"text": alert_text(alert), "unfurl_links": False}


def _chat_body(alert: Alert) -> dict[str, Any]:
    return {"text": alert_text(alert)}


BODY_BY_FORMAT: Mapping[WebhookFormat, Callable[[Alert], dict[str, Any]]] = {
    WebhookFormat.SLACK: _slack_body,
    WebhookFormat.CHAT: _chat_body,
}


def webhook_body(alert: Alert, webhook_format: WebhookFormat) -> dict[str, Any]:
    """The JSON body the receiver of ``webhook_format`` expects."""
    return BODY_BY_FORMAT[webhook_format](alert)


def notify(
    alert: Alert, settings: AlertWebhook | None, environ: Mapping[str, str] = os.environ
) -> bool:
    """POST ``alert`` to the webhook ``settings`` describe; True when it answered 2xx.

    Never raises: without settings it does nothing, and every failure is logged as a WARNING.
    """
    if settings is None:
        return False
    labels = {"run_id": alert.run_id, "reason": str(alert.reason)}
    url = environ.get(settings.url_env, "").strip()
    if not url.startswith(ALLOWED_SCHEMES):
        log(
            logger,
            logging.WARNING,
            f"alert webhook skipped: the environment variable {settings.url_env} (named by "
            "alert_webhook.url_env) is "
            + ("not set" if not url else "not an http(s) URL")
            + "; set it to the Slack or Google Chat incoming-webhook URL, or remove alert_webhook",
            labels=labels,
        )
        return False
    try:
        _post_json(url, webhook_body(alert, settings.format), settings.timeout)
    except Exception as error:  # a courtesy channel must never fail the function
        log(
            logger,
            logging.WARNING,
            f"alert webhook ({settings.format.value}, URL from {settings.url_env}) failed: "
            f"{_failure(error)}; the alert still went to the alerts topic and the log. Check "
            "the URL and the receiver, or raise alert_webhook.timeout if it is slow",
            labels=labels,
        )
        return False
    return True


def _failure(error: Exception) -> str:
    """What went wrong, without the error's text: it may quote the URL, which holds a secret."""
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code}"
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, TimeoutError):
        return "timed out"
    return f"{type(reason).__name__} (no answer)"


def _post_json(url: str, body: Mapping[str, Any], timeout: timedelta) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(body, ensure_ascii=False).encode(),
        method="POST",
        headers={"Content-Type": "application/json; charset=UTF-8"},
    )
    # urlopen raises HTTPError for any status >= 400; the body is read so the socket is reused.
    with urllib.request.urlopen(request, timeout=timeout.total_seconds()) as response:
        response.read()
