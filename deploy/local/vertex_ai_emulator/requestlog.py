"""The record of every Vertex AI call the emulator received, for tests to assert on.

Only calls of the emulated Vertex AI services are recorded (never the admin API). The log is
bounded so that a long-running emulator cannot grow without limit: the oldest entries go first.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_CAPACITY = 100_000


@dataclass(frozen=True)
class RequestRecord:
    """One call as the service saw it and answered it."""

    time: str  # simulated time of arrival, RFC 3339
    transport: str  # "rest" or "grpc"
    method: str  # RPC name, e.g. "CreateCustomJob"
    resource: str  # the request's `name` or `parent`
    request: dict[str, Any]  # the whole request message in REST JSON (camelCase, enum names)
    status: str  # canonical status name of the answer: "OK", "INVALID_ARGUMENT", ...
    injected_fault: bool  # whether the answer (or its delay) came from a fault rule

    def to_json_dict(self) -> dict[str, Any]:
        """The record as the admin API prints it (camelCase keys)."""
        fields = asdict(self)
        fields["injectedFault"] = fields.pop("injected_fault")
        return fields


class RequestLog:
    """A thread-safe, bounded, append-only list of `RequestRecord`s."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._lock = threading.Lock()
        self._records: deque[RequestRecord] = deque(maxlen=capacity)

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def records(self, method: str | None = None) -> list[RequestRecord]:
        """The records in arrival order, optionally only those of one RPC method."""
        with self._lock:
            snapshot = list(self._records)
        if method is None:
            return snapshot
        return [record for record in snapshot if record.method == method]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)
