"""Real-shaped events, the HTTP deliveries that carry them, and readers of what dispatch left.

Events are built as Eventarc and Pub/Sub shape them (docs/messages.md) and POSTed
to functions-framework the ways the platform delivers them: a CloudEvent in binary mode (``ce-*``
headers) or structured mode (``application/cloudevents+json``), or a plain Pub/Sub push body sent
to ``/projects/P/topics/T``. The readers look only at state: the ledger in Firestore, messages on
the alerts subscription, and the Vertex AI emulator's request log and jobs; never at log text.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests
from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent

from emulator_stack import LOCAL_PROJECT

# The folder's config, which the functions under test read. Tests import it from here, never
# from ``conftest``: with several test folders in one session, ``import conftest`` finds
# whichever folder's conftest Python met first (the job-state one has a CONFIG of its own).
CONFIG = Path(__file__).parent / "configs" / "dispatch.yaml"

REGION = "us-central1"
PARENT = f"projects/{LOCAL_PROJECT}/locations/{REGION}"
DATASETS_BUCKET = "dispatch-it-datasets"  # the marker route's bucket (configs/dispatch.yaml)
MANIFESTS_BUCKET = "dispatch-it-manifests"  # the manifest route's bucket
ALERTS_TOPIC_ID = "dispatch-it-alerts"
ALERTS_TOPIC = f"projects/{LOCAL_PROJECT}/topics/{ALERTS_TOPIC_ID}"
REQUESTS_TOPIC = f"projects/{LOCAL_PROJECT}/topics/dispatch-it-requests"
POOL_ID = "a100-pool"  # the persistent resource template pool-then-flex tries first
# Template pipeline-pool's own resource: a pipeline's job holding a replica, or a refusal's
# cooldown, must not change what the tests of pool-then-flex see (one ledger, one emulator).
PIPELINE_POOL_ID = "pipeline-a100-pool"

STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
HTTP_TIMEOUT_SECONDS = 60.0
PULL_WAIT_SECONDS = 0.3

_event_ids = itertools.count(1)


@dataclass(frozen=True)
class FunctionUrls:
    """Where each Cloud Function answers (started by the ``functions`` fixture)."""

    object_finalized: str
    request: str


# --- events ----------------------------------------------------------------------------------


def object_finalized(bucket: str, name: str, generation: int, size: int = 1024) -> CloudEvent:
    """The CloudEvent Eventarc sends when ``gs://bucket/name`` is written (int64s as strings)."""
    return CloudEvent(
        {
            "type": STORAGE_FINALIZED,
            "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
            "subject": f"objects/{name}",
            "id": f"{generation}-{next(_event_ids)}",
            "time": "2026-12-01T02:00:00.000Z",
        },
        {
            "kind": "storage#object",
            "bucket": bucket,
            "name": name,
            "generation": str(generation),
            "metageneration": "1",
            "size": str(size),
            "contentType": "application/octet-stream",
            "timeCreated": "2026-12-01T02:00:00.000Z",
        },
    )


@dataclass(frozen=True)
class PubSubMessage:
    """A message as Pub/Sub delivers it: a body (bytes) and attributes, under a message ID."""

    message_id: str
    body: bytes
    attributes: Mapping[str, str]
    publish_time: str = "2026-12-01T02:00:03.412Z"

    def wire(self) -> dict[str, Any]:
        """The ``message`` object of a push body or of a messagePublished CloudEvent's data."""
        return {
            "data": base64.b64encode(self.body).decode(),
            "attributes": dict(self.attributes),
            "messageId": self.message_id,
            "publishTime": self.publish_time,
        }


def json_message(message_id: str, body: Mapping[str, Any], **attributes: str) -> PubSubMessage:
    return PubSubMessage(message_id, json.dumps(body).encode(), attributes)


def job_request(
    message_id: str, template: str, params: Mapping[str, str], **attributes: str
) -> PubSubMessage:
    """A job request for the on-request route (attribute kind=train) naming a template."""
    return json_message(
        message_id, {"template": template, "params": dict(params)}, kind="train", **attributes
    )


def message_published(message: PubSubMessage) -> CloudEvent:
    """The CloudEvent Eventarc sends for a message on the requests topic."""
    return CloudEvent(
        {
            "type": PUBSUB_PUBLISHED,
            "source": f"//pubsub.googleapis.com/{REQUESTS_TOPIC}",
            "id": message.message_id,
            "time": message.publish_time,
        },
        {
            "message": message.wire(),
            "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/eventarc-dispatch-it",
        },
    )


# --- deliveries ------------------------------------------------------------------------------


def deliver_binary(url: str, event: CloudEvent) -> int:
    """POST ``event`` in binary content mode; the HTTP status the function answered."""
    headers, body = to_binary(event)
    return _post(url, headers, body)


def deliver_structured(url: str, event: CloudEvent) -> int:
    """POST ``event`` in structured content mode (``application/cloudevents+json``)."""
    headers, body = to_structured(event)
    return _post(url, headers, body)


def deliver_push(url: str, message: PubSubMessage) -> int:
    """POST a plain Pub/Sub push body to the topic-shaped path functions-framework converts."""
    body = {
        "message": message.wire(),
        "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/push-dispatch-it",
    }
    return _post(
        f"{url}/{REQUESTS_TOPIC}",
        {"Content-Type": "application/json"},
        json.dumps(body).encode(),
    )


def deliver_until_acknowledged(deliver: Any, *args: Any, attempts: int = 10) -> list[int]:
    """Deliver again after each 500, as Pub/Sub and Eventarc do; every status answered."""
    statuses = [deliver(*args)]
    while statuses[-1] == 500 and len(statuses) < attempts:
        time.sleep(0.2)
        statuses.append(deliver(*args))
    return statuses


def _post(url: str, headers: Mapping[str, str], body: bytes | str) -> int:
    response = requests.post(url, headers=dict(headers), data=body, timeout=HTTP_TIMEOUT_SECONDS)
    return response.status_code


# --- Vertex AI emulator ----------------------------------------------------------------------


class VertexAdmin:
    """The Vertex AI emulator's admin API, and its public REST API to list jobs."""

    def __init__(self, address: str) -> None:
        self._base_url = f"http://{address}"

    def call(self, http_method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self._base_url}/emulator/v1/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=http_method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            return json.loads(response.read())

    def add_fault(self, **rule: Any) -> None:
        self.call("POST", "faults", rule)

    def put_persistent_resource(self, resource: Mapping[str, Any]) -> None:
        self.call("PUT", "persistentResources", dict(resource))

    def create_calls(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every CreateCustomJob call logged, answered or failed, oldest first.

        Each is ``{"status": gRPC status name, "customJob": the job asked for}``; with ``run_id``,
        only the calls for that run (label ``vd-run``).
        """
        logged = self.call("GET", "requests?method=CreateCustomJob")["requests"]
        calls = [
            {"status": entry["status"], "customJob": entry["request"]["customJob"]}
            for entry in logged
        ]
        if run_id is None:
            return calls
        return [c for c in calls if c["customJob"].get("labels", {}).get("vd-run") == run_id]

    def created_jobs(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The ``customJob`` of every CreateCustomJob call logged (see ``create_calls``)."""
        return [call["customJob"] for call in self.create_calls(run_id)]

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        """The jobs that exist in the region for ``run_id`` (ListCustomJobs by label)."""
        query = urllib.parse.urlencode({"filter": f'labels.vd-run="{run_id}"'})
        url = f"{self._base_url}/v1/{PARENT}/customJobs?{query}"
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_SECONDS) as response:
            return json.loads(response.read()).get("customJobs", [])


def persistent_resource(
    state: str = "RUNNING", replicas: int = 1, resource_id: str = POOL_ID
) -> dict[str, Any]:
    """The a100-pool persistent resource (or another of the same pools: ``resource_id``),
    matching template pool-then-flex's machine and disk."""
    return {
        "name": f"{PARENT}/persistentResources/{resource_id}",
        "state": state,
        "resourcePools": [
            {
                "id": "a100-x1",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                "replicaCount": replicas,
            }
        ],
    }


# --- alerts ----------------------------------------------------------------------------------


class AlertsReader:
    """Pulls the alerts published on the alerts topic since this reader's subscription exists."""

    def __init__(self, subscriber: Any, subscription: str) -> None:
        self._subscriber = subscriber
        self.subscription = subscription

    def pull(self, quiet_seconds: float = 0.5) -> list[dict[str, Any]]:
        """Every alert waiting, as ``{"attributes", "body"}``, once none arrived for a while.

        Dispatch publishes an alert before it answers the delivery, so waiting briefly for
        stragglers is only about the emulator's pull returning empty now and then.
        """
        alerts: list[dict[str, Any]] = []
        deadline = time.monotonic() + quiet_seconds
        while time.monotonic() < deadline:
            received = self._pull_now()
            if not received:
                time.sleep(0.05)
                continue
            self._subscriber.acknowledge(
                subscription=self.subscription, ack_ids=[m.ack_id for m in received]
            )
            alerts.extend(
                {"attributes": dict(m.message.attributes), "body": json.loads(m.message.data)}
                for m in received
            )
            deadline = time.monotonic() + quiet_seconds
        return alerts

    def _pull_now(self) -> list[Any]:
        # A pull on an empty subscription waits for messages until its deadline: keep it short.
        from google.api_core.exceptions import DeadlineExceeded

        try:
            response = self._subscriber.pull(
                subscription=self.subscription, max_messages=100, timeout=PULL_WAIT_SECONDS
            )
        except DeadlineExceeded:
            return []
        return list(response.received_messages)


def of_run(alerts: Iterable[Mapping[str, Any]], run_id: str) -> list[Mapping[str, Any]]:
    return [alert for alert in alerts if alert["body"]["run_id"] == run_id]


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def ensure_alerts_topic() -> str:
    """The config's alerts topic, created on the Pub/Sub emulator if no test made it yet."""
    from google.api_core.exceptions import AlreadyExists

    from shared.adapters import clients

    with contextlib.suppress(AlreadyExists):
        clients.publisher_client().create_topic(name=ALERTS_TOPIC)
    return ALERTS_TOPIC


def ensure_datasets_buckets() -> tuple[str, str]:
    """The buckets the storage routes watch, created on the Cloud Storage emulator if missing."""
    from shared.adapters import clients

    storage = clients.storage_client(LOCAL_PROJECT)
    for bucket in (DATASETS_BUCKET, MANIFESTS_BUCKET):
        if storage.lookup_bucket(bucket) is None:
            storage.create_bucket(bucket)
    return DATASETS_BUCKET, MANIFESTS_BUCKET


def age_intent(the_run_id: str, age: timedelta, attempt_index: int = 0) -> None:
    """Move an attempt's intent_at back by ``age`` in the real ledger, as if its creator had
    died (or its create had timed out) that long ago."""
    from shared.adapters import clients
    from shared.adapters.ledger import DEFAULT_COLLECTION

    collection = clients.firestore_client(LOCAL_PROJECT).collection(DEFAULT_COLLECTION)
    reference = collection.document(the_run_id)
    attempts = reference.get().to_dict()["attempts"]
    attempts[attempt_index]["intent_at"] = datetime.now(UTC) - age
    reference.update({"attempts": attempts})
