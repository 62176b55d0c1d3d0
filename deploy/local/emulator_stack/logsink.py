"""A Cloud Logging sink stand-in: the Vertex AI emulator's ml_job log entries, filtered, on Pub/Sub.

Deployed, a log sink (deploy/terraform monitoring.tf) routes the Vertex AI job log entries its
filter takes to the job-events topic, one message per entry, the LogEntry JSON as the body. The
Vertex AI emulator writes simulated entries for its jobs (service lines at state changes, chatty
trainer output: ``vertex_ai_emulator.joblogs``); this stand-in reads them from its admin API
(``GET /emulator/v1/logEntries``) and publishes the ones the filter takes, as the sink would.

The filter is evaluated, not assumed: ``SinkFilter`` understands the subset of the Logging query
language the sink uses (equalities joined by ``AND``) and refuses anything else loudly, so the
stand-in and Terraform, which share ``shared.decode.hints.SINK_FILTER``, cannot drift apart.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.decode.hints import SINK_FILTER

Publish = Callable[[str, bytes, Mapping[str, str]], str]
TIMESTAMP_ATTRIBUTE = "logging.googleapis.com/timestamp"  # what a sink puts on each message
PAGE_SIZE = 1000
_TIMEOUT_SECONDS = 10.0
_EQUALITY = re.compile(
    r"(?P<path>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*=\s*"
    r'(?:"(?P<quoted>[^"\\]*)"|(?P<bare>[A-Za-z0-9_.\-/]+))'
)

logger = logging.getLogger("emulator_stack.logsink")


class UnsupportedFilter(ValueError):
    """A sink filter outside the subset the stand-in evaluates (``path="value" AND ...``)."""


@dataclass(frozen=True)
class SinkFilter:
    """A conjunction of equalities on a LogEntry's fields: ``a.b="x" AND c=y``."""

    text: str
    terms: tuple[tuple[tuple[str, ...], str], ...]

    @classmethod
    def parse(cls, text: str) -> SinkFilter:
        """The filter ``text``; ``UnsupportedFilter`` names what the stand-in cannot evaluate."""
        terms = []
        for part in re.split(r"\s+AND\s+", text.strip()):
            found = _EQUALITY.fullmatch(part.strip())
            if found is None:
                raise UnsupportedFilter(
                    f"log sink filter {text!r}: the stand-in evaluates only equalities joined by "
                    f'AND (resource.type="ml_job" AND ...); cannot evaluate {part!r}. Keep the '
                    "sink filter (shared.decode.hints.SINK_FILTER) in that subset, or teach "
                    "emulator_stack.logsink the rest"
                )
            value = found["quoted"] if found["quoted"] is not None else found["bare"]
            terms.append((tuple(found["path"].split(".")), value))
        return cls(text, tuple(terms))

    def matches(self, entry: Mapping[str, Any]) -> bool:
        """Whether the sink would route ``entry``."""
        return all(_field(entry, path) == value for path, value in self.terms)


def _field(entry: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = entry
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


@dataclass
class SinkCounts:
    """What the stand-in did: entries read, published (taken by the filter), and left out."""

    read: int = 0
    published: int = 0
    left_out: int = 0
    by_task: dict[str, int] = field(default_factory=dict)  # published, per task_name


class LogSink:
    """Routes the Vertex AI emulator's log entries that ``filter_text`` takes to ``topic``."""

    def __init__(
        self,
        vertex_admin_url: str,
        publish: Publish,
        topic: str,
        filter_text: str = SINK_FILTER,
        poll_seconds: float = 0.5,
    ) -> None:
        self._entries_url = vertex_admin_url.rstrip("/") + "/logEntries"
        self._publish = publish
        self.topic = topic
        self.filter = SinkFilter.parse(filter_text)
        self._poll_seconds = poll_seconds
        self._cursor = 0
        self.counts = SinkCounts()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-sink", daemon=True)

    def skip_to_now(self) -> None:
        """Route nothing written so far (e.g. another test's jobs): start from the next entry."""
        with self._lock:
            while page := self._page():
                self._cursor = page[1]

    def pump(self) -> int:
        """Read every entry written since the last pump and publish those the filter takes;
        how many were published."""
        published = 0
        with self._lock:
            while page := self._page():
                entries, self._cursor = page
                for entry in entries:
                    published += self._route(entry)
        return published

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def is_running(self) -> bool:
        return self._thread.is_alive()

    def _route(self, entry: Mapping[str, Any]) -> int:
        self.counts.read += 1
        if not self.filter.matches(entry):
            self.counts.left_out += 1
            return 0
        attributes = {TIMESTAMP_ATTRIBUTE: str(entry.get("timestamp", ""))}
        self._publish(self.topic, json.dumps(entry).encode(), attributes)
        self.counts.published += 1
        task = str(_field(entry, ("resource", "labels", "task_name")))
        self.counts.by_task[task] = self.counts.by_task.get(task, 0) + 1
        return 1

    def _page(self) -> tuple[list[dict[str, Any]], int] | None:
        url = f"{self._entries_url}?after={self._cursor}&pageSize={PAGE_SIZE}"
        with urllib.request.urlopen(url, timeout=_TIMEOUT_SECONDS) as response:
            answer = json.loads(response.read())
        entries: list[dict[str, Any]] = answer["entries"]
        return (entries, int(answer["cursor"])) if entries else None

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.pump()
            except (OSError, ValueError) as error:  # an emulator is stopping
                logger.warning("log sink: routing failed: %s", error)
            self._stopping.wait(self._poll_seconds)
