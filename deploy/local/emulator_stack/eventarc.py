"""An Eventarc stand-in for Cloud Storage: new object generations become finalized CloudEvents.

The Cloud Storage emulator emits no notifications, so this polls it: every ``poll_seconds`` it
lists each watched bucket and, for every (object, generation) it has not seen, delivers a
``google.cloud.storage.object.v1.finalized`` CloudEvent (binary content mode, the object resource
as data, int64 fields as JSON strings, as Eventarc sends them) to the function's URL.

Delivery is at least once, as Eventarc's: an answer other than 2xx, or no answer, is retried with
a doubling backoff up to ``max_attempts``; a delivery that still fails is logged and dropped (in
production it would go on for up to 24 hours).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

FINALIZED_TYPE = "google.cloud.storage.object.v1.finalized"
INT64_FIELDS = ("generation", "metageneration", "size")  # JSON strings in Storage's resources
_DELIVERY_TIMEOUT_SECONDS = 30.0
_LIST_TIMEOUT_SECONDS = 10.0

logger = logging.getLogger("emulator_stack.eventarc")


@dataclass(frozen=True)
class DeliveryPolicy:
    """Eventarc's retry, shortened for a laptop."""

    max_attempts: int = 5
    first_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 5.0

    def backoff(self, failed_attempts: int) -> float:
        doubled = self.first_backoff_seconds * 2 ** (failed_attempts - 1)
        return min(doubled, self.max_backoff_seconds)


@dataclass
class DeliveryCounts:
    """What the stand-in did, for health output and tests."""

    delivered: int = 0
    retried: int = 0
    dropped: int = 0
    seen: set[tuple[str, str, str]] = field(default_factory=set)  # (bucket, name, generation)


def finalized_event(resource: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """The HTTP headers and body Eventarc posts for one object resource (binary content mode)."""
    bucket, name, generation = resource["bucket"], resource["name"], str(resource["generation"])
    data = dict(resource)
    for key in INT64_FIELDS:
        if key in data:
            data[key] = str(data[key])
    headers = {
        "Content-Type": "application/json",
        "ce-specversion": "1.0",
        "ce-type": FINALIZED_TYPE,
        "ce-source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "ce-subject": f"objects/{name}",
        "ce-id": f"{bucket}/{name}/{generation}",
        # Eventarc's time is the write's (the object's updated), not the delivery's.
        "ce-time": str(resource.get("updated") or "")
        or datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    return headers, json.dumps(data).encode()


class StorageEventarc:
    """Polls buckets on the Storage emulator and delivers finalized events to ``function_url``."""

    def __init__(
        self,
        storage_url: str,
        buckets: Iterable[str],
        function_url: str,
        poll_seconds: float = 0.5,
        policy: DeliveryPolicy = DeliveryPolicy(),
        workers: int = 4,
    ) -> None:
        self._storage_url = storage_url.rstrip("/")
        self._buckets = sorted(set(buckets))
        self._function_url = function_url
        self._poll_seconds = poll_seconds
        self._policy = policy
        self.counts = DeliveryCounts()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="eventarc-delivery")
        self._thread = threading.Thread(target=self._run, name="eventarc-poll", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; deliveries under way are abandoned (idempotent)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def is_running(self) -> bool:
        return self._thread.is_alive()

    def poll_once(self) -> int:
        """List every bucket once and queue a delivery for each new generation; how many."""
        queued = 0
        for bucket in self._buckets:
            for resource in self._list(bucket):
                key = (bucket, resource["name"], str(resource["generation"]))
                with self._lock:
                    if key in self.counts.seen:
                        continue
                    self.counts.seen.add(key)
                self._pool.submit(self._deliver, resource)
                queued += 1
        return queued

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.poll_once()
            except (OSError, ValueError) as error:  # the emulator is stopping, or a bucket is gone
                logger.warning("eventarc: listing failed: %s", error)
            self._stopping.wait(self._poll_seconds)

    def _list(self, bucket: str) -> list[dict[str, Any]]:
        url = f"{self._storage_url}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o"
        try:
            with urllib.request.urlopen(url, timeout=_LIST_TIMEOUT_SECONDS) as response:
                items: list[dict[str, Any]] = json.loads(response.read()).get("items", [])
                return items
        except urllib.error.HTTPError as error:
            if error.code == 404:  # the bucket is not created yet
                return []
            raise

    def _deliver(self, resource: Mapping[str, Any]) -> None:
        headers, body = finalized_event(resource)
        for attempt in range(1, self._policy.max_attempts + 1):
            if self._stopping.is_set():
                return
            status = _post(self._function_url, headers, body)
            if status is not None and 200 <= status < 300:
                with self._lock:
                    self.counts.delivered += 1
                return
            logger.warning(
                "eventarc: delivery %s of %s answered %s", attempt, headers["ce-id"], status
            )
            if attempt < self._policy.max_attempts:
                with self._lock:
                    self.counts.retried += 1
                time.sleep(self._policy.backoff(attempt))
        with self._lock:
            self.counts.dropped += 1
        logger.error("eventarc: dropped %s after %s attempts", headers["ce-id"], attempt)


def _post(url: str, headers: Mapping[str, str], body: bytes) -> int | None:
    """The HTTP status of the POST, or None when the function did not answer."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=_DELIVERY_TIMEOUT_SECONDS) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None
