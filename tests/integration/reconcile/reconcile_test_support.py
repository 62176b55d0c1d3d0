"""The world of the reconcile tests: the real dispatch, job-state and reconcile code, in-process.

An in-process Vertex AI emulator with a frozen clock (only ``advance`` moves it) is the only clock:
``Services.now`` reads it, so ledger times, backoffs and job times agree. Messages the code
publishes (hints, retries, alerts) are pulled from subscriptions made for the test and delivered
by hand, as Eventarc would, which lets a test drop one (a missed event) or deliver one twice.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
import urllib.request
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cloudevents.http import CloudEvent

from emulator_stack import LOCAL_PROJECT
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateResult, handle_job_event
from shared.handlers.reconcile import ReconcileReport, reconcile
from shared.handlers.services import Services
from shared.model.results import DispatchResult

REGION = "us-central1"
EAST_REGION = "us-east4"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
TOPIC_IDS = {
    "alerts": "reconcile-it-alerts",
    "requests": "reconcile-it-requests",
    "hints": "reconcile-it-job-events",
}
VERTEX_WORLD: dict[str, Any] = {
    "project_numbers": {LOCAL_PROJECT: "123456789012"},
    "capacity": {
        REGION: {"NVIDIA_TESLA_A100": 64, "NVIDIA_L4": 0},
        EAST_REGION: {"NVIDIA_TESLA_A100": 64},
    },
    "timings": {"provisioning": "2m"},
    "default_outcome": {"result": "succeeded", "duration": "10m"},
}

_message_ids = itertools.count(1)

CONFIG = Path(__file__).parent / "configs" / "reconcile.yaml"


def topic(kind: str) -> str:
    return f"projects/{LOCAL_PROJECT}/topics/{TOPIC_IDS[kind]}"


@dataclass(frozen=True)
class Message:
    """A message pulled from a subscription: what Eventarc would deliver."""

    data: bytes
    attributes: dict[str, str]
    message_id: str

    def body(self) -> dict[str, Any]:
        return json.loads(self.data)

    def cloud_event(self, topic_name: str) -> CloudEvent:
        return CloudEvent(
            {
                "type": PUBSUB_PUBLISHED,
                "source": f"//pubsub.googleapis.com/{topic_name}",
                "id": self.message_id,
            },
            {
                "message": {
                    "data": base64.b64encode(self.data).decode(),
                    "attributes": self.attributes,
                    "messageId": self.message_id,
                    "publishTime": "2026-12-01T02:00:03.412Z",
                },
                "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/eventarc-reconcile-it",
            },
        )


class Subscription:
    """Pulls what was published on a topic since this subscription was made."""

    def __init__(self, subscriber: Any, name: str) -> None:
        self._subscriber = subscriber
        self.name = name

    def pull(self, quiet_seconds: float = 0.3) -> list[Message]:
        messages: list[Message] = []
        deadline = time.monotonic() + quiet_seconds
        while time.monotonic() < deadline:
            # return_immediately (deprecated for production streaming pulls): the emulator
            # otherwise holds an empty pull until its timeout, seconds per call.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                response = self._subscriber.pull(
                    subscription=self.name, max_messages=1000, return_immediately=True, timeout=5
                )
            received = list(response.received_messages)
            if not received:
                time.sleep(0.05)
                continue
            self._subscriber.acknowledge(
                subscription=self.name, ack_ids=[m.ack_id for m in received]
            )
            messages += [
                Message(m.message.data, dict(m.message.attributes), m.message.message_id)
                for m in received
            ]
            deadline = time.monotonic() + quiet_seconds
        return messages


class VertexAdmin:
    """The in-process emulator's admin API."""

    def __init__(self, rest_url: str) -> None:
        self._base_url = f"{rest_url}/emulator/v1/"

    def call(self, http_method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            self._base_url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=http_method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def now(self) -> datetime:
        return datetime.fromisoformat(self.call("GET", "clock")["now"].replace("Z", "+00:00"))

    def advance(self, seconds: float) -> None:
        self.call("POST", "clock:advance", {"seconds": seconds})

    def requests(self, method: str) -> list[dict[str, Any]]:
        return self.call("GET", f"requests?method={method}")["requests"]

    def forget_requests(self) -> None:
        self.call("DELETE", "requests")


@dataclass
class World:
    """The services under test and the subscriptions that see what they publish."""

    services: Services
    vertex: VertexAdmin
    hints: Subscription
    retries: Subscription
    alerts: Subscription
    results: list[Any] = field(default_factory=list)

    def request_run(self, template: str, dataset_uri: str = "gs://acme/data/") -> DispatchResult:
        """A job request on the requests topic, dispatched: opens a run and creates attempt 1."""
        message = Message(
            json.dumps({"template": template, "params": {"dataset_uri": dataset_uri}}).encode(),
            {"kind": "train"},
            f"req-{time.time_ns()}-{next(_message_ids)}",
        )
        return dispatch_event(message.cloud_event(topic("requests")), self.services)

    def reconcile(self) -> ReconcileReport:
        return reconcile(self.services, self.services.now())

    def deliver_hints(self, messages: list[Message]) -> list[JobStateResult]:
        return [handle_job_event(m.cloud_event(topic("hints")), self.services) for m in messages]

    def deliver_retries(self, messages: list[Message]) -> list[DispatchResult]:
        return [dispatch_event(m.cloud_event(topic("requests")), self.services) for m in messages]

    def run(self, run_id: str) -> Any:
        snapshot = self.services.ledger.get_run(run_id)
        assert snapshot is not None, f"run {run_id} is not in the ledger"
        return snapshot.run

    def creates(self, run_id: str) -> list[dict[str, Any]]:
        return [
            entry
            for entry in self.vertex.requests("CreateCustomJob")
            if entry["request"]["customJob"].get("labels", {}).get("vd-run") == run_id
        ]


def of_run(messages: list[Message], run_id: str, key: str = "run_id") -> list[Message]:
    return [m for m in messages if m.body().get(key) == run_id]


Clock = Callable[[], datetime]
