"""Real-shaped events for the job-state scenarios, and readers of what the functions left.

The scenarios call ``dispatch_event`` and ``handle_job_event`` in-process with the CloudEvents
Eventarc would deliver, and look only at state: the ledger, the messages on the alerts, requests
and completions topics (through subscriptions made per test), and the Vertex AI emulator's jobs
and request log, whose simulated clock the tests move with ``advance``.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

from cloudevents.http import CloudEvent

from emulator_stack import LOCAL_PROJECT
from shared.decode.hints import job_state_message

PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
HTTP_TIMEOUT_SECONDS = 30.0

_message_ids = itertools.count(1)


def message_published(body: bytes, attributes: Mapping[str, str], topic: str) -> CloudEvent:
    """The CloudEvent Eventarc sends for a message on ``topic``."""
    message_id = f"jobstate-it-{time.monotonic_ns()}-{next(_message_ids)}"
    return CloudEvent(
        {"type": PUBSUB_PUBLISHED, "source": f"//pubsub.googleapis.com/{topic}", "id": message_id},
        {
            "message": {
                "data": base64.b64encode(body).decode(),
                "attributes": dict(attributes),
                "messageId": message_id,
                "publishTime": "2026-12-01T02:00:03.412Z",
            },
            "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/eventarc-jobstate-it",
        },
    )


def job_request(template: str, idempotency_key: str) -> CloudEvent:
    body = json.dumps({"template": template}).encode()
    attributes = {"kind": "train", "idempotency_key": idempotency_key}
    return message_published(body, attributes, f"projects/{LOCAL_PROJECT}/topics/requests")


def job_state_hint(job_name: str, observed_state: str) -> CloudEvent:
    """Our job-state message on the job-events topic, as the reconciler publishes it."""
    body, attributes = job_state_message(job_name, observed_state)
    return message_published(body, attributes, f"projects/{LOCAL_PROJECT}/topics/job-events")


class Subscription:
    """Pulls what a topic received since this subscription was made."""

    def __init__(self, subscriber: Any, name: str) -> None:
        self._subscriber = subscriber
        self.name = name

    def pull(self, quiet_seconds: float = 0.5) -> list[tuple[bytes, dict[str, str]]]:
        """Every message waiting, as (body, attributes), once none arrived for a while."""
        messages: list[tuple[bytes, dict[str, str]]] = []
        deadline = time.monotonic() + quiet_seconds
        while time.monotonic() < deadline:
            response = self._subscriber.pull(subscription=self.name, max_messages=100, timeout=5)
            received = list(response.received_messages)
            if not received:
                time.sleep(0.05)
                continue
            self._subscriber.acknowledge(
                subscription=self.name, ack_ids=[m.ack_id for m in received]
            )
            messages.extend((m.message.data, dict(m.message.attributes)) for m in received)
            deadline = time.monotonic() + quiet_seconds
        return messages

    def pull_json(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body, _ in self.pull()]


class VertexAdmin:
    """The Vertex AI emulator's admin API."""

    def __init__(self, address: str) -> None:
        self._base_url = f"http://{address}/emulator/v1"

    def call(self, http_method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self._base_url}/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=http_method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            return json.loads(response.read())

    def advance(self, seconds: float) -> None:
        """Move simulated time forward, playing every job event on the way."""
        self.call("POST", "clock:advance", {"seconds": seconds})

    def set_capacity(self, region: str, accelerator: str, count: int) -> None:
        self.call(
            "PUT", "capacity", {"region": region, "acceleratorType": accelerator, "count": count}
        )

    def add_outcome(self, **rule: Any) -> None:
        self.call("POST", "outcomes", rule)

    def created_jobs(self, run_id: str) -> list[dict[str, Any]]:
        """The ``customJob`` of every successful CreateCustomJob for ``run_id``, oldest first."""
        logged = self.call("GET", "requests?method=CreateCustomJob")["requests"]
        return [
            entry["request"]["customJob"]
            for entry in logged
            if entry["status"] == "OK"
            and entry["request"]["customJob"].get("labels", {}).get("vd-run") == run_id
        ]
