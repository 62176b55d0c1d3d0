"""Alerts to humans: one JSON message on the alerts topic and one ERROR/CRITICAL log line.

The log line is written first, so that a log-based alert policy fires even when Pub/Sub is down;
its Cloud Logging labels (``run_id``, ``run_key``, ``reason``, ``template``) are what such a
policy filters and groups on, and its jsonPayload field ``alert_id`` names the alert. Then the
message is published; if that fails, ``AlertNotSent`` (transient) makes the platform deliver the
event again, so the alert is not lost. Sending twice is prevented by the ledger's claim
(``Ledger.record_alert`` before the send, given back when it fails: ``rejections.alert_once``),
not here; a publish that went through but answered too late is sent again, with the same
``alert_id``, so the receiver drops the copy (docs/messages.md, "Alerts").

The message on the alerts topic (data: UTF-8 JSON; attributes: ``schema``, ``alert_id``,
``reason``, ``severity``, ``run_id``, ``template`` for subscription filters)::

    {
      "schema": "vertex-dispatch.alert.v1",
      "alert_id": "r-0123456789abcdef01234567/1/no_placement",  # run/attempt/reason: the
                                                     # same for every copy of this alert
      "run_id": "r-0123456789abcdef01234567",
      "run_key": "gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
      "template": "resnet-a100",                     # null when no template was chosen
      "trigger": "gs://acme-datasets/imagenet/2026-12-01/_SUCCESS (generation 1733100000000000)",
      "reason": "no_placement",                      # an AlertReason value, or another token
      "severity": "ERROR",                           # ERROR | CRITICAL
      "message": "what happened, naming the field or rule",
      "what_to_do": "the change that fixes it",
      "attempts": [                                  # one map per attempt, oldest first
        {"number": 1, "placement": {"persistent_resource": "a100-pool"},
         "job_name": null, "state": "INTENT", "error": {"message": "..."}}
      ]
    }
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters import clients
from shared.logs import log
from shared.model.alerts import Alert
from shared.model.errors import TransientError

if TYPE_CHECKING:
    from google.cloud import pubsub_v1

    from shared.config.model import AlertWebhook

PUBLISH_TIMEOUT_SECONDS = 30.0

_LEVEL_BY_SEVERITY: dict[str, int] = {"ERROR": logging.ERROR, "CRITICAL": logging.CRITICAL}

logger = logging.getLogger(__name__)


class AlertNotSent(TransientError):
    """The alert could not be published; deliver the event again so it is not lost."""


def send_alert(
    alert: Alert,
    topic: str,
    publisher: pubsub_v1.PublisherClient | None = None,
    webhook: AlertWebhook | None = None,
) -> str:
    """Log ``alert``, publish it on ``topic`` (``projects/P/topics/T``), then post it to the
    optional ``webhook`` (best effort: a failing webhook is logged, never raised); the message id.
    """
    payload = alert.to_json()
    log(
        logger,
        _LEVEL_BY_SEVERITY[alert.severity.value],
        f"{alert.reason}: {alert.message}",
        labels={
            "run_id": alert.run_id,
            "run_key": alert.run_key,
            "reason": str(alert.reason),
            "template": alert.template or "",
        },
        alert_id=alert.alert_id,
        alert=payload,
    )
    data = json.dumps(payload, default=_json_value, ensure_ascii=False).encode()
    publisher = publisher or clients.publisher_client()
    try:
        future = publisher.publish(
            topic,
            data,
            timeout=PUBLISH_TIMEOUT_SECONDS,
            # Message attributes; mypy would match a ** mapping against named parameters too.
            **alert.attributes(),  # type: ignore[arg-type]
        )
        message_id = future.result(timeout=PUBLISH_TIMEOUT_SECONDS)
    # Any failure at all must retry the event: an alert swallowed here would be lost for good.
    except Exception as error:
        raise AlertNotSent(
            f"alert {alert.reason} for run {alert.run_id} was not published on {topic}: "
            f"{error!r}; the event will be delivered again. If this persists, check that the "
            "topic exists and the function's service account has roles/pubsub.publisher on it"
        ) from error
    if webhook is not None:
        from shared.adapters.webhook import notify

        notify(alert, webhook)
    return message_id


def _json_value(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)
