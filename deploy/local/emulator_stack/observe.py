"""Read what the local stack did, the way a test or the demo asserts on it: no log text.

- the run ledger (Firestore) through ``shared.adapters.ledger``;
- a topic (alerts, completions) through a pull subscription made for the reader;
- the Vertex AI emulator's request log, jobs and admin API (capacity, quota, reservations, Spot
  preemption, create-time refusals);
- objects written to the Cloud Storage emulator, as an uploader would.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from emulator_stack.wiring import PubSubWiring

_TIMEOUT_SECONDS = 10.0


def http_json(method: str, url: str, body: object | None = None) -> Any:
    """Call a JSON endpoint; the decoded answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:
        return json.loads(response.read() or b"{}")


class VertexAdmin:
    """The Vertex AI emulator's admin API and REST jobs, by its ``host:port``."""

    def __init__(self, address: str) -> None:
        self._admin = f"http://{address}/emulator/v1/"
        self._api = f"http://{address}/v1/"

    def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        query = f"?method={method}" if method else ""
        entries: list[dict[str, Any]] = http_json("GET", f"{self._admin}requests{query}")[
            "requests"
        ]
        return entries

    def created_jobs(self) -> list[dict[str, Any]]:
        """The ``customJob`` of every successful CreateCustomJob call, oldest first."""
        return [
            entry["request"]["customJob"]
            for entry in self.requests("CreateCustomJob")
            if entry["status"] == "OK"
        ]

    def job(self, name: str) -> dict[str, Any]:
        answer: dict[str, Any] = http_json("GET", self._api + name)
        return answer

    def set_capacity(self, region: str, accelerator: str, count: int) -> None:
        body = {"region": region, "acceleratorType": accelerator, "count": count}
        http_json("PUT", self._admin + "capacity", body)

    def set_quota(self, kind: str, region: str, accelerator: str, count: int | None) -> None:
        """Limit (None: lift) a GPU quota, `kind` `on_demand` or `preemptible`."""
        body = {"kind": kind, "region": region, "acceleratorType": accelerator, "count": count}
        http_json("PUT", self._admin + "quota", body)

    def put_reservation(self, **fields: Any) -> dict[str, Any]:
        """Add a Compute Engine reservation (`name`, `machine_type`, `accelerator_type`,
        `accelerator_count`, `count`), or change the keys given of one: `name` and `count`
        resize it. Answers it with its VMs `in_use` and `free`."""
        answer: dict[str, Any] = http_json("PUT", self._admin + "reservations", fields)
        return answer

    def set_spot_preemption(self, after: str | float | None) -> None:
        """Preempt Spot jobs this long ("10m", seconds) after they start RUNNING; None: never."""
        http_json("PUT", self._admin + "spot", {"preempt_after": after})

    def set_create_refusals(self, **changes: Any) -> None:
        """`quota_when_exceeded` ("queue" or "refuse") and/or `offered_accelerators`
        ({region: [types]}, a region mapped to None offers everything)."""
        http_json("PUT", self._admin + "createRefusals", changes)

    def reset(self) -> None:
        http_json("POST", self._admin + "reset", {})


class TopicReader:
    """Messages published on a topic after this reader was made (its own pull subscription)."""

    def __init__(self, pubsub: PubSubWiring, project: str, topic: str) -> None:
        self._pubsub = pubsub
        topic_id = topic.rsplit("/", 1)[-1]
        self.subscription = f"projects/{project}/subscriptions/{topic_id}-{uuid.uuid4().hex[:8]}"
        pubsub.create_pull_subscription(self.subscription, topic)
        self.received: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        """Pull what arrived since the last poll; every JSON body received so far."""
        for message in self._pubsub.pull(self.subscription):
            self.received.append(json.loads(base64.b64decode(message.get("data", ""))))
        return self.received

    def find(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        return next((body for body in self.poll() if predicate(body)), None)


def upload_object(storage_url: str, bucket: str, name: str, data: bytes) -> dict[str, Any]:
    """Write one object as a client would; the object resource (with its generation)."""
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    request = urllib.request.Request(
        f"{storage_url}/upload/storage/v1/b/{bucket}/o?{query}", data=data, method="POST"
    )
    with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:
        resource: dict[str, Any] = json.loads(response.read())
        return resource
