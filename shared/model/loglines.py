"""The log lines Cloud Monitoring counts: each one's message, fields and labels, in one place.

The Terraform module (``deploy/terraform/modules/vertex-dispatch/dashboards.tf``) turns these
lines into log-based metrics and charts them on a dashboard. A metric reads an entry's
``jsonPayload`` fields (the keyword fields of ``shared.logs.log``) and its labels (the ``labels=``
mapping, which Cloud Logging makes entry labels); if the code stopped writing one, the chart would
flatline without an error anywhere. So the code that writes these lines takes their messages from
here, and tests hold three things equal: every field or label a metric's filter or extractor reads
is declared here (``tests/deploy/test_terraform_dashboards.py``, from the HCL), every log call
that writes one of these lines passes the declared fields, and the lines as really logged carry
them with the declared types (``tests/integration/jobstate/test_jobstate_log_lines.py``). A rename
then breaks a test, not a dashboard.

Types are the JSON types a field is written as (``float`` accepts an ``int``: JSON has one number
type); a dotted name is a key inside a field that is a JSON object (``alert.schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.model.alerts import SCHEMA as ALERT_SCHEMA


@dataclass(frozen=True)
class LogLine:
    """One kind of log line a metric counts or measures."""

    name: str  # what the line records, for tests and docs
    # The exact message (``jsonPayload.message``); None for a line known by its ``key`` field.
    message: str | None
    fields: Mapping[str, type]  # jsonPayload fields (dotted: inside an object) -> JSON type
    labels: frozenset[str] = field(default_factory=frozenset)  # entry labels it always carries
    # The field a line without a fixed message is selected by (``jsonPayload.KEY:*`` or a value).
    key: str | None = None


RUN_LABELS = frozenset({"run_id", "route", "template"})
"""The labels of every line about one run (dispatch's and the job-state function's)."""

JOB_CREATED_MESSAGE = "job created"
JOB_CREATED = LogLine(
    name="runs started",
    message=JOB_CREATED_MESSAGE,
    fields={"job": str, "attempt": int, "placement": str, "placement_kind": str, "region": str},
    labels=RUN_LABELS,
)
"""Dispatch created an attempt's job (``handlers/submission.py``): attempt 1 starts a run."""

JOB_RUNNING_MESSAGE = "job running"
JOB_RUNNING = LogLine(
    name="time to RUNNING",
    message=JOB_RUNNING_MESSAGE,
    fields={"job": str, "time_to_running_s": float, "placement_kind": str, "region": str},
    labels=RUN_LABELS,
)
"""An attempt's job was first recorded RUNNING (``handlers/jobstate.py``): how long it waited
from its creation to its start, as Vertex AI records them, on which kind of placement, where."""

JOB_DECIDED_MESSAGE = "job decided"
JOB_DECIDED = LogLine(
    name="runs ended by outcome",
    message=JOB_DECIDED_MESSAGE,
    fields={"job": str, "outcome": str, "run_status": str, "explanation": str},
    labels=RUN_LABELS,
)
"""The end of a run's last job was decided and recorded (``handlers/jobstate.py``): ``outcome``
as the decision record stores it (succeeded, or the failure class), ``run_status`` what the run
became (WAITING_RETRY when it is retried, else its final status)."""

ALERT = LogLine(
    name="alerts by reason",
    message=None,
    fields={"alert.schema": str, "alert.reason": str, "alert.run_id": str},
    labels=frozenset({"run_id", "run_key", "reason", "template"}),
    key="alert.schema",
)
"""The ERROR or CRITICAL line every alert is (``adapters/alerts.py``); its message is the alert's
text, so it is known by its body's schema, ``alert.schema`` = ``ALERT_SCHEMA``."""

HINT_DROPPED = LogLine(
    name="hints dropped",
    message=None,
    fields={"hint_dropped": str},
    key="hint_dropped",
)
"""A job-state hint dropped without a Vertex AI read; ``hint_dropped`` is the reason token
(not_ours, no_state_change, already_ended, ...)."""

LINES = (JOB_CREATED, JOB_RUNNING, JOB_DECIDED, ALERT, HINT_DROPPED)

KEY_VALUES: Mapping[str, str] = {"alert.schema": ALERT_SCHEMA}
"""The value a metric filter matches a line's key field on, when it matches one (else ``:*``)."""
