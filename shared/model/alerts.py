"""What an alert to a human says: its reason, its severity, and the JSON body it is sent as.

Plain data, so that the policy can decide which alert a run owes without importing the adapter
that sends it (``shared.adapters.alerts``: the log line, the alerts topic, the webhook). The
message on the alerts topic (data: UTF-8 JSON; attributes: ``schema``, ``alert_id``, ``reason``,
``severity``, ``run_id``, ``template`` for subscription filters) is ``Alert.to_json``, documented
in ``shared.adapters.alerts``.

Alerts are delivered at least once (docs/messages.md, "Alerts"): ``alert_id`` names the alert,
not the message, so that a receiver drops a second copy of the same alert by it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA = "vertex-dispatch.alert.v1"
"""Still v1 with ``alert_id``: a field was added, none changed meaning or went away."""
RUN_LEVEL_ATTEMPT = 0
"""The attempt number of an alert about the run as a whole (no attempt is involved: an event
refused before any attempt, a retry that cannot be published, a template gone)."""


def alert_id(run_id: str, attempt: int, claim: str) -> str:
    """The id of the alert claimed as ``claim`` about attempt ``attempt`` of run ``run_id``.

    ``claim`` is the key the alert is claimed under in the run's ledger record: its reason, or
    ``reason@scope`` for a reason alerted more than once per run (a day of a wait:
    ``policy.watchdogs.alert_claim``), so that each of those is an alert of its own. A pure
    function of the three, so that the same alert sent twice (its publish answered too late, the
    ledger's claim given back, the event delivered again) carries the same id, while two
    different alerts never share one: ``run_id`` is ``r-`` + hex and an attempt a number, neither
    containing ``/``, so the first two ``/`` always part the three. Readable on purpose: it is
    searched for in logs and chat rooms.
    """
    return f"{run_id}/{attempt}/{claim}"


class Severity(enum.StrEnum):
    """How urgent: ERROR needs a look today, CRITICAL needs someone now."""

    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class AlertReason(enum.StrEnum):
    """The reasons dispatch and the job-state function alert for."""

    INVALID_REQUEST = "invalid_request"  # the event or request cannot be decoded or is refused
    INVALID_SPEC = "invalid_spec"  # the rendered job breaks a Vertex AI rule or a guard
    NO_PLACEMENT = "no_placement"  # no placement of the chain can take the job
    QUOTA = "quota"  # a quota refused the job; someone must raise it
    PERMISSION = "permission"  # the function's identity lacks a role
    RETRIES_EXHAUSTED = "retries_exhausted"  # the retry policy gave up
    DUPLICATE_JOB = "duplicate_job"  # two jobs found for one attempt: one must be cancelled
    TEMPLATE_GONE = "template_gone"  # a job of a run whose template left the config failed
    DATA_TIMEOUT = "data_timeout"  # the run's data was not complete within data_timeout
    ROUTE_GONE = "route_gone"  # a run waiting for a quiet dataset whose route left the config
    DEADLINE_MISSED = "deadline_missed"  # the run could not have a job running by its start_by


@dataclass(frozen=True)
class Alert:
    """One alert about one run, ready to be read by a human."""

    run_id: str
    run_key: str
    template: str | None
    trigger: str  # one line saying what started the run
    reason: str  # an AlertReason value (or another lowercase token)
    message: str
    what_to_do: str
    attempts: tuple[Mapping[str, Any], ...] = ()
    severity: Severity = Severity.ERROR
    attempt: int = RUN_LEVEL_ATTEMPT  # the attempt the alert is about; 0: the run as a whole
    claim: str | None = None  # the ledger key it is claimed under, when not the reason itself

    @property
    def alert_id(self) -> str:
        """The alert's stable id: the same for every copy of this alert (``alert_id``)."""
        return alert_id(self.run_id, self.attempt, self.claim or str(self.reason))

    def to_json(self) -> dict[str, Any]:
        """The alert as the JSON body published on the alerts topic."""
        return {
            "schema": SCHEMA,
            "alert_id": self.alert_id,
            "run_id": self.run_id,
            "run_key": self.run_key,
            "template": self.template,
            "trigger": self.trigger,
            "reason": str(self.reason),
            "severity": self.severity.value,
            "message": self.message,
            "what_to_do": self.what_to_do,
            "attempts": [dict(attempt) for attempt in self.attempts],
        }

    def attributes(self) -> dict[str, str]:
        """The Pub/Sub attributes, for subscriptions that filter on them."""
        return {
            "schema": SCHEMA,
            "alert_id": self.alert_id,
            "reason": str(self.reason),
            "severity": self.severity.value,
            "run_id": self.run_id,
            "template": self.template or "",
        }
