"""No secret reaches a log line, an alert or a ledger record.

The alert webhook's URL is the one secret vertex-dispatch handles (Slack and Chat webhooks carry
their credential in the URL). Here it holds a token; an invalid request and a create refused by a
quota are dispatched for real (emulators), each sending an alert through the topic AND the
webhook. Then every structured log line, every alert message and every ledger document is searched
for the token.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cloudevents.http import CloudEvent

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator, PubSubEmulator, VertexAIEmulator
from shared import logs
from shared.adapters import clients
from shared.adapters.ledger import Ledger
from shared.config.loader import parse_config
from shared.handlers.dispatch import dispatch_event
from shared.handlers.services import Services

TOKEN = "T0KEN-s3cr3t-4f9c2b"
URL_VARIABLE = "HOSTILE_ALERT_WEBHOOK_URL"
DISPATCH_CONFIG = Path(__file__).parents[1] / "dispatch" / "configs" / "dispatch.yaml"
QUOTA_MESSAGE = (
    "Quota exceeded for aiplatform.googleapis.com/"
    "custom_model_training_preemptible_nvidia_a100_gpus"
)


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[bytes]]]:
    """A local webhook receiver whose URL carries the token, as Slack's do."""
    received: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/services/{TOKEN}", received
    server.shutdown()


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """Every log line, formatted exactly as the functions write them (Cloud Logging JSON)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.CloudLoggingFormatter())
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield stream
    root.removeHandler(handler)
    root.setLevel(previous_level)


def test_the_webhook_token_appears_in_no_log_alert_or_ledger_record(
    webhook: tuple[str, list[bytes]],
    captured_logs: io.StringIO,
    pubsub_emulator: PubSubEmulator,
    clean_firestore: FirestoreEmulator,
    clean_vertex_ai: VertexAIEmulator,
    fresh_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud import pubsub_v1

    url, posted = webhook
    monkeypatch.setenv(URL_VARIABLE, url)
    alerts_topic = f"projects/{LOCAL_PROJECT}/topics/{fresh_name('hostile-alerts')}"
    subscription = f"projects/{LOCAL_PROJECT}/subscriptions/{fresh_name('hostile-alerts')}"
    clients.publisher_client().create_topic(name=alerts_topic)
    subscriber = pubsub_v1.SubscriberClient()
    subscriber.create_subscription(name=subscription, topic=alerts_topic)
    text = DISPATCH_CONFIG.read_text().replace(
        "alerts_topic: dispatch-it-alerts",
        f"alerts_topic: {alerts_topic}\nalert_webhook: {{url_env: {URL_VARIABLE}}}",
    )
    config = parse_config(text, "hostile.yaml", DISPATCH_CONFIG.parent)
    collection = fresh_name("hostile-runs")
    ledger = Ledger(clients.firestore_client(LOCAL_PROJECT), collection)
    services = Services(config, _ledger=ledger)
    _add_vertex_fault(
        clean_vertex_ai,
        {"method": "CreateCustomJob", "code": "RESOURCE_EXHAUSTED", "message": QUOTA_MESSAGE},
    )

    invalid = dispatch_event(
        job_request_event({"template": "flex-a100", "params": {"image": "evil"}}), services
    )
    refused = dispatch_event(
        job_request_event({"template": "flex-a100", "params": {"dataset_uri": "gs://d/x/"}}),
        services,
    )

    assert (invalid.outcome.value, refused.outcome.value) == ("rejected", "rejected")
    assert len(posted) == 2  # both alerts really went through the secret URL
    alerts = subscriber.pull(subscription=subscription, max_messages=10, timeout=10)
    alert_texts = [
        message.message.data.decode() + json.dumps(dict(message.message.attributes))
        for message in alerts.received_messages
    ]
    assert len(alert_texts) == 2
    ledger_texts = [
        json.dumps(document.to_dict(), default=str)
        for document in clients.firestore_client(LOCAL_PROJECT).collection(collection).stream()
    ]
    assert len(ledger_texts) == 2
    log_text = captured_logs.getvalue()
    assert '"severity": "ERROR"' in log_text  # the alerts were logged

    places = {"logs": [log_text], "alerts": alert_texts, "ledger": ledger_texts}
    leaks = {where: [t for t in texts if TOKEN in t] for where, texts in places.items()}
    assert leaks == {"logs": [], "alerts": [], "ledger": []}


def _add_vertex_fault(emulator: VertexAIEmulator, rule: dict[str, object]) -> None:
    request = urllib.request.Request(
        f"{emulator.admin_url}faults", data=json.dumps(rule).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def job_request_event(body: dict[str, object]) -> CloudEvent:
    """A job request as Eventarc delivers it from the requests topic."""
    message_id = str(uuid.uuid4().int % 10**16)
    return CloudEvent(
        {
            "type": "google.cloud.pubsub.topic.v1.messagePublished",
            "source": f"//pubsub.googleapis.com/projects/{LOCAL_PROJECT}/topics/requests",
            "id": message_id,
        },
        {
            "message": {
                "data": base64.b64encode(json.dumps(body).encode()).decode(),
                "attributes": {"kind": "train"},
                "messageId": message_id,
                "publishTime": "2026-12-02T12:00:00Z",
            },
            "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/dispatch",
        },
    )
