"""Structured logging in the Cloud Logging JSON format.

Cloud Run and Cloud Functions turn each JSON line on stdout/stderr into a log entry, reading
``severity``, ``message`` and ``logging.googleapis.com/labels`` specially. Every line carries the
run key (when there is one) as a label, so one trigger can be followed end to end.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from typing import Any

LABELS_FIELD = "logging.googleapis.com/labels"

_SEVERITY_BY_LEVEL = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}


class CloudLoggingFormatter(logging.Formatter):
    """Formats a record as one Cloud Logging JSON line.

    Extra structured fields travel in ``record.fields`` (a mapping) and labels in
    ``record.labels``; both are set by ``log()``.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": _SEVERITY_BY_LEVEL.get(record.levelno, "DEFAULT"),
            "message": record.getMessage(),
            "logger": record.name,
        }
        entry.update(getattr(record, "fields", {}) or {})
        labels = getattr(record, "labels", None)
        if labels:
            entry[LABELS_FIELD] = {k: str(v) for k, v in labels.items()}
        if record.exc_info:
            entry["stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure(level: int = logging.INFO, stream: Any = None) -> None:
    """Route the root logger to one JSON line per record; safe to call more than once."""
    root = logging.getLogger()
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(CloudLoggingFormatter())
    root.handlers = [handler]
    root.setLevel(level)


def log(
    logger: logging.Logger,
    level: int,
    message: str,
    *,
    labels: Mapping[str, object] | None = None,
    **fields: object,
) -> None:
    """Log one structured event: ``message`` plus JSON ``fields`` and Cloud Logging ``labels``."""
    logger.log(level, message, extra={"fields": fields, "labels": dict(labels or {})})
