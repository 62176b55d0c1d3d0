"""shared.adapters.alerts: the documented JSON reaches a subscriber, the log line carries its
labels."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from emulator_stack import LOCAL_PROJECT, PubSubEmulator
from shared.adapters import alerts, clients
from shared.model.alerts import Alert, AlertReason, Severity
from shared.model.errors import TransientError

NO_PLACEMENT = Alert(
    run_id="r-0123456789abcdef01234567",
    run_key="gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
    template="resnet-a100",
    trigger="gs://acme-datasets/imagenet/2026-12-01/_SUCCESS (generation 1733100000000000)",
    reason=AlertReason.NO_PLACEMENT,
    message="no placement can take the job: a100-pool is full (2 of 2 replicas used), "
    "FLEX_START in us-central1 waited 2h",
    what_to_do="add a placement to templates.resnet-a100.placement or raise max_wait",
    attempts=(
        {
            "number": 1,
            "placement": {"persistent_resource": "a100-pool"},
            "job_name": None,
            "state": "INTENT",
            "error": {"message": "resource full"},
        },
    ),
    severity=Severity.CRITICAL,
    attempt=1,
)


def pull_one(subscription: str) -> tuple[dict[str, object], dict[str, str]]:
    from google.cloud import pubsub_v1

    with pubsub_v1.SubscriberClient() as subscriber:
        response = subscriber.pull(subscription=subscription, max_messages=10, timeout=10)
        [received] = response.received_messages
        subscriber.acknowledge(subscription=subscription, ack_ids=[received.ack_id])
    return json.loads(received.message.data), dict(received.message.attributes)


def test_a_sent_alert_is_pulled_with_the_documented_json(
    alerts_subscription: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    topic, subscription = alerts_subscription

    with caplog.at_level(logging.ERROR, logger=alerts.logger.name):
        message_id = alerts.send_alert(NO_PLACEMENT, topic)

    body, attributes = pull_one(subscription)
    assert message_id
    assert body == {
        "schema": "vertex-dispatch.alert.v1",
        "alert_id": "r-0123456789abcdef01234567/1/no_placement",
        "run_id": "r-0123456789abcdef01234567",
        "run_key": "gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
        "template": "resnet-a100",
        "trigger": "gs://acme-datasets/imagenet/2026-12-01/_SUCCESS (generation 1733100000000000)",
        "reason": "no_placement",
        "severity": "CRITICAL",
        "message": NO_PLACEMENT.message,
        "what_to_do": NO_PLACEMENT.what_to_do,
        "attempts": [
            {
                "number": 1,
                "placement": {"persistent_resource": "a100-pool"},
                "job_name": None,
                "state": "INTENT",
                "error": {"message": "resource full"},
            }
        ],
    }
    assert attributes == {
        "schema": "vertex-dispatch.alert.v1",
        "alert_id": "r-0123456789abcdef01234567/1/no_placement",
        "reason": "no_placement",
        "severity": "CRITICAL",
        "run_id": "r-0123456789abcdef01234567",
        "template": "resnet-a100",
    }
    [record] = caplog.records
    assert record.levelno == logging.CRITICAL
    assert record.labels == {
        "run_id": "r-0123456789abcdef01234567",
        "run_key": "gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
        "reason": "no_placement",
        "template": "resnet-a100",
    }
    assert record.fields["alert_id"] == "r-0123456789abcdef01234567/1/no_placement"


def test_an_alert_that_cannot_be_published_is_transient_and_still_logged(
    pubsub_emulator: PubSubEmulator,
    fresh_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    missing_topic = f"projects/{LOCAL_PROJECT}/topics/{fresh_name('never-created')}"

    with (
        caplog.at_level(logging.ERROR, logger=alerts.logger.name),
        pytest.raises(alerts.AlertNotSent, match="will be delivered again") as raised,
    ):
        alerts.send_alert(NO_PLACEMENT, missing_topic, clients.publisher_client())

    assert isinstance(raised.value, TransientError)
    assert [record.levelno for record in caplog.records] == [logging.CRITICAL]


@pytest.mark.parametrize(
    ("template", "severity", "expected_template", "expected_severity"),
    [
        ("resnet-a100", Severity.ERROR, "resnet-a100", "ERROR"),
        (None, Severity.CRITICAL, "", "CRITICAL"),
    ],
)
def test_attributes_are_strings_even_without_a_template(
    template: str | None,
    severity: Severity,
    expected_template: str,
    expected_severity: str,
) -> None:
    alert = Alert(
        run_id="r-1",
        run_key="pubsub:msg-1",
        template=template,
        trigger="message msg-1",
        reason=AlertReason.INVALID_REQUEST,
        message="the body is not JSON",
        what_to_do="send a JSON object",
        severity=severity,
    )

    assert alert.attributes()["template"] == expected_template
    assert alert.attributes()["severity"] == expected_severity
    assert alert.to_json()["template"] == template


def test_a_published_alert_is_also_posted_to_the_configured_webhook(
    alerts_subscription: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from shared.config.model import AlertWebhook, WebhookFormat

    posted: list[dict[str, object]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TEST_ALERT_WEBHOOK", f"http://127.0.0.1:{server.server_port}/hook")
    topic, subscription = alerts_subscription
    try:
        alerts.send_alert(
            NO_PLACEMENT,
            topic,
            webhook=AlertWebhook(url_env="TEST_ALERT_WEBHOOK", format=WebhookFormat.SLACK),
        )
    finally:
        server.shutdown()

    body, _ = pull_one(subscription)
    assert body["reason"] == "no_placement"
    [hook_body] = posted
    assert "no_placement" in str(hook_body["text"])
    assert NO_PLACEMENT.run_id in str(hook_body["text"])
