"""Topics and push subscriptions on the Pub/Sub emulator, wired as production is.

Every function fed by Pub/Sub gets a push subscription whose endpoint is the function's URL plus
``/projects/P/topics/T``: functions-framework takes the topic of the CloudEvent it builds from a
plain push body only from that path. Each push subscription has a dead-letter policy onto one
dead-letter topic (kept by a pull subscription, so nothing dead-lettered is lost) and, unlike
production, NO retry policy: the emulator (0.8.20) strands messages when several back off at once
under one (of 30 messages nacked twice under a 1-5 s policy, 26 were neither redelivered nor
dead-lettered after 200 s; tests/integration/faults/test_faults_nack.py measures it). Without a
policy a nacked message comes back about every second, which is what a local run wants anyway.

Uses the emulator's REST surface with the standard library: wiring needs no client library.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEAD_LETTER_TOPIC_ID = "vertex-dispatch-dead-letter"
DEAD_LETTER_SUBSCRIPTION_ID = "vertex-dispatch-dead-letter-kept"
RECONCILE_TICKS_TOPIC_ID = "vertex-dispatch-reconcile-ticks"
MAX_DELIVERY_ATTEMPTS = 100
"""Pub/Sub's most. Deployed, 10 deliveries 10 s to 600 s apart span about 40 minutes; here, with
no retry policy, a delivery comes back every second, so 10 would dead-letter a trigger after a
10-second outage (the soak's crashed servers and frozen ledger did, 100 times in 2,000)."""
PRODUCTION_LIKE_RETRY_POLICY = {"minimumBackoff": "1s", "maximumBackoff": "5s"}
"""A short backoff, as production's 10 s to 600 s scaled down: NOT used by the local stack (see the
module docstring); kept for the test that measures the emulator's behaviour under it."""
ACK_DEADLINE_SECONDS = 60  # a cold function pays ~3 s of imports on its first event
_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class PushRoute:
    """One topic pushed to one function."""

    topic: str  # projects/P/topics/T
    function_url: str

    @property
    def subscription(self) -> str:
        project, topic_id = _project_and_id(self.topic)
        return f"projects/{project}/subscriptions/{topic_id}-push"

    @property
    def endpoint(self) -> str:
        return f"{self.function_url}/{self.topic}"


def topic_path(project: str, topic: str) -> str:
    """``topic`` as a full path: an id is taken to be in ``project``."""
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


class PubSubWiring:
    """Creates topics and subscriptions on one Pub/Sub emulator (idempotent: existing is fine)."""

    def __init__(self, emulator_address: str) -> None:
        self._base = f"http://{emulator_address}/v1/"

    def create_topic(self, topic: str) -> None:
        self._put(topic, {})

    def create_pull_subscription(self, subscription: str, topic: str) -> None:
        self._put(subscription, {"topic": topic, "ackDeadlineSeconds": ACK_DEADLINE_SECONDS})

    def create_push_subscription(
        self,
        route: PushRoute,
        dead_letter_topic: str,
        retry_policy: Mapping[str, str] | None = None,
        max_delivery_attempts: int = MAX_DELIVERY_ATTEMPTS,
    ) -> None:
        """``retry_policy=None``: none, so a nacked message is redelivered as soon as possible."""
        subscription: dict[str, Any] = {
            "topic": route.topic,
            "pushConfig": {"pushEndpoint": route.endpoint},
            "ackDeadlineSeconds": ACK_DEADLINE_SECONDS,
            "deadLetterPolicy": {
                "deadLetterTopic": dead_letter_topic,
                "maxDeliveryAttempts": max_delivery_attempts,
            },
        }
        if retry_policy is not None:
            subscription["retryPolicy"] = dict(retry_policy)
        self._put(route.subscription, subscription)

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str]) -> str:
        """Publish one message; its message id."""
        message = {"data": base64.b64encode(data).decode(), "attributes": dict(attributes)}
        answer = self._call("POST", f"{topic}:publish", {"messages": [message]})
        return str(answer["messageIds"][0])

    def pull(self, subscription: str, max_messages: int = 100) -> list[dict[str, Any]]:
        """Pull and acknowledge what is there now: each message as the emulator's REST JSON."""
        answer = self._call(
            "POST",
            f"{subscription}:pull",
            {"maxMessages": max_messages, "returnImmediately": True},
        )
        received = answer.get("receivedMessages", [])
        if received:
            ack_ids = [each["ackId"] for each in received]
            self._call("POST", f"{subscription}:acknowledge", {"ackIds": ack_ids})
        return [each["message"] for each in received]

    def wire(self, project: str, routes: list[PushRoute], plain_topics: list[str]) -> str:
        """Create every topic and push route with its dead-letter policy; the dead-letter topic."""
        dead_letter = topic_path(project, DEAD_LETTER_TOPIC_ID)
        self.create_topic(dead_letter)
        self.create_pull_subscription(
            f"projects/{project}/subscriptions/{DEAD_LETTER_SUBSCRIPTION_ID}", dead_letter
        )
        for topic in dict.fromkeys([*plain_topics, *(route.topic for route in routes)]):
            self.create_topic(topic)
        for route in routes:
            self.create_push_subscription(route, dead_letter)
        return dead_letter

    def _put(self, resource: str, body: Mapping[str, Any]) -> None:
        try:
            self._call("PUT", resource, body)
        except urllib.error.HTTPError as error:
            if error.code != 409:  # ALREADY_EXISTS: wiring twice is fine
                raise

    def _call(self, method: str, resource: str, body: Mapping[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self._base + resource,
            data=json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer


def _project_and_id(topic: str) -> tuple[str, str]:
    parts = topic.split("/")
    if len(parts) != 4 or parts[0] != "projects" or parts[2] != "topics":
        raise ValueError(f"topic must be projects/PROJECT/topics/ID; got {topic!r}")
    return parts[1], parts[3]
