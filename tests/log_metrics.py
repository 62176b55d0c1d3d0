"""The Terraform module's log-based metrics, read as data, and applied to log lines as Cloud Logging
would: a test in any folder imports it by name (``from log_metrics import module_metrics``).

``module_metrics`` parses ``dashboards.tf`` (python-hcl2) into ``LogMetric`` records, with the
module's name prefix set to ``PREFIX``. ``entry_of`` turns one line our code wrote (the JSON of
``shared.logs.CloudLoggingFormatter``) into the log entry Cloud Run makes of it: ``severity`` and
``logging.googleapis.com/labels`` become the entry's own, the rest is ``jsonPayload``. A
``LogMetric`` then says whether it counts an entry (``matches``) and what its extractors read
from it (``labels_of``, ``value_of``).

Only the part of the Logging query language the module uses is understood: clauses joined by
``AND``, each ``PATH="text"``, ``PATH=number``, ``PATH=~"regex"``, ``PATH:*`` or
``severity>=LEVEL``; extractors ``EXTRACT(PATH)``. Anything else raises ``UnsupportedFilter``, so a
filter written beyond it fails the tests instead of being half-read.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hcl2

from shared.logs import LABELS_FIELD

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "deploy" / "terraform" / "modules" / "vertex-dispatch"
DASHBOARDS_TF = MODULE / "dashboards.tf"
DASHBOARD_TEMPLATE = MODULE / "dashboard.json.tftpl"
PREFIX = "vd"
SERVICE = f"{PREFIX}-job-event"  # a Cloud Run service of the module's functions
OPTIONS = hcl2.SerializationOptions(
    strip_string_quotes=True, explicit_blocks=False, with_comments=False
)
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT")

_CLAUSE = re.compile(
    r'^(?P<path>[A-Za-z_][\w.]*)\s*(?:(?P<op>=~|>=|=|!=)\s*(?P<value>"(?:[^"\\]|\\.)*"|[\w.-]+)'
    r"|(?P<has>:\*))$"
)
_EXTRACT = re.compile(r"^EXTRACT\((?P<path>[A-Za-z_][\w.]*)\)$")


class UnsupportedFilter(ValueError):
    """A filter or extractor outside the subset this module reads."""


@dataclass(frozen=True)
class Clause:
    path: str  # e.g. jsonPayload.message, labels.reason, resource.type, severity
    op: str  # "=", "!=", "=~", ">=" or ":*"
    value: str | float | None  # a string (quoted in the filter), a number, or None for ":*"

    def holds(self, entry: Mapping[str, Any]) -> bool:
        found, present = lookup(entry, self.path)
        if self.op == ":*":
            return present
        if not present:
            return self.op == "!="
        if self.op == "=~":
            return isinstance(found, str) and re.search(str(self.value), found) is not None
        if self.op == ">=":
            return SEVERITIES.index(str(found)) >= SEVERITIES.index(str(self.value))
        equal = (
            isinstance(found, int | float) and not isinstance(found, bool) and found == self.value
            if isinstance(self.value, float)
            else found == self.value
        )
        return equal if self.op == "=" else not equal


@dataclass(frozen=True)
class LogMetric:
    resource: str  # the Terraform resource name
    name: str  # the metric's name, with PREFIX
    filter: str
    clauses: tuple[Clause, ...]
    value_type: str  # INT64 or DISTRIBUTION
    labels: Mapping[str, str]  # label key -> value type (STRING, INT64, BOOL)
    label_extractors: Mapping[str, str]  # label key -> the path EXTRACT reads
    value_extractor: str | None  # the path EXTRACT reads, for a distribution
    raw: Mapping[str, Any]

    def matches(self, entry: Mapping[str, Any]) -> bool:
        return all(clause.holds(entry) for clause in self.clauses)

    def labels_of(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """What each label extractor reads from ``entry`` (absent: ``KeyError``)."""
        values = {}
        for key, path in self.label_extractors.items():
            found, present = lookup(entry, path)
            if not present:
                raise KeyError(f"metric {self.name}: label {key} reads {path}, absent in {entry}")
            values[key] = found
        return values

    def value_of(self, entry: Mapping[str, Any]) -> Any:
        assert self.value_extractor is not None, f"metric {self.name} has no value extractor"
        found, present = lookup(entry, self.value_extractor)
        if not present:
            raise KeyError(f"metric {self.name}: value reads {self.value_extractor}, absent")
        return found

    def paths_read(self) -> set[str]:
        """Every entry path the filter, the label extractors and the value extractor read."""
        paths = {clause.path for clause in self.clauses}
        paths.update(self.label_extractors.values())
        if self.value_extractor:
            paths.add(self.value_extractor)
        return paths


def has_json_type(value: Any, kind: type) -> bool:
    """Whether ``value`` (as read back from JSON) is of the registry's type ``kind``: a ``float``
    field may read back as an ``int`` (JSON has one number type); a bool is never a number."""
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def lookup(entry: Mapping[str, Any], path: str) -> tuple[Any, bool]:
    """The value at a dotted ``path`` of ``entry``, and whether it is there."""
    found: Any = entry
    for part in path.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return None, False
        found = found[part]
    return found, True


def parse_filter(text: str) -> tuple[Clause, ...]:
    clauses = []
    for part in text.split(" AND "):
        match = _CLAUSE.match(part.strip())
        if match is None:
            raise UnsupportedFilter(f"clause {part!r} of filter {text!r}")
        if match["has"]:
            clauses.append(Clause(match["path"], ":*", None))
            continue
        raw = match["value"]
        value: str | float
        if raw.startswith('"'):
            value = json.loads(raw)
        elif match["path"] == "severity":
            value = raw
        else:
            try:
                value = float(raw)
            except ValueError:
                raise UnsupportedFilter(f"unquoted value {raw!r} in {text!r}") from None
        clauses.append(Clause(match["path"], match["op"], value))
    return tuple(clauses)


def extracted_path(extractor: str) -> str:
    match = _EXTRACT.match(extractor)
    if match is None:
        raise UnsupportedFilter(f"extractor {extractor!r}")
    return match["path"]


@functools.cache
def parsed_dashboards_tf() -> dict[str, Any]:
    return hcl2.loads(DASHBOARDS_TF.read_text(encoding="utf-8"), serialization_options=OPTIONS)


def module_locals() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for block in parsed_dashboards_tf().get("locals", []):
        merged.update(block)
    return merged


def resources(kind: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for block in parsed_dashboards_tf().get("resource", []):
        found.update(block.get(kind, {}))
    return found


def with_prefix(text: str) -> str:
    return text.replace("${var.name_prefix}", PREFIX)


def function_entries_filter() -> str:
    """The clauses every metric starts with: our functions' entries only."""
    return with_prefix(module_locals()["function_entries"])


def _one(value: Any) -> Any:
    return value[0] if isinstance(value, list) else value


@functools.cache
def module_metrics() -> dict[str, LogMetric]:
    """Every ``google_logging_metric`` of the module, by Terraform resource name."""
    metrics = {}
    entries = function_entries_filter()
    for resource, body in resources("google_logging_metric").items():
        text = with_prefix(body["filter"]).replace("${local.function_entries}", entries)
        if "${" in text:
            raise UnsupportedFilter(f"metric {resource}: unresolved interpolation in {text!r}")
        descriptor = _one(body["metric_descriptor"])
        labels = {
            _one(label)["key"]: _one(label)["value_type"] for label in descriptor.get("labels", [])
        }
        extractors = {
            key: extracted_path(value) for key, value in body.get("label_extractors", {}).items()
        }
        value_extractor = body.get("value_extractor")
        metrics[resource] = LogMetric(
            resource=resource,
            name=with_prefix(body["name"]),
            filter=text,
            clauses=parse_filter(text),
            value_type=descriptor["value_type"],
            labels=labels,
            label_extractors=extractors,
            value_extractor=extracted_path(value_extractor) if value_extractor else None,
            raw=body,
        )
    return metrics


def entry_of(line: str, service: str = SERVICE) -> dict[str, Any]:
    """The log entry Cloud Run makes of one JSON line our code wrote on stdout."""
    payload = json.loads(line)
    severity = payload.pop("severity", "DEFAULT")
    labels = payload.pop(LABELS_FIELD, {})
    return {
        "severity": severity,
        "labels": labels,
        "jsonPayload": payload,
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": service}},
    }
