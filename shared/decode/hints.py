"""Job-state hints: the messages that tell the job-state function "look at job X".

Two shapes arrive on the job-events topic, both as Pub/Sub messagePublished CloudEvents:

- **our job-state message**, published by the reconciler: attribute
  ``vertex_dispatch_kind=job_state``, body ``{"job_name": "projects/N/locations/R/customJobs/ID",
  "observed_state": "JOB_STATE_FAILED"}``; the name may be of any kind of job a template makes
  (``customJobs``, ``hyperparameterTuningJobs``, ``trainingPipelines``: ``JobHint.kind``);
- **a Cloud Logging ``LogEntry``**, routed by a log sink whose filter is ``SINK_FILTER``: the
  body is the entry's JSON. The ``ml_job`` monitored resource names the job by ``labels.job_id``
  and ``labels.project_id``, and the task that wrote the line by ``labels.task_name``:
  ``service`` for the lines Vertex AI itself writes about the job, ``workerpool0-0`` (etc.) for
  the trainer's own output. It has no region label, so the region comes from
  ``labels.location``/``labels.region`` when present, else from the entry's
  ``compute.googleapis.com/zone`` label, else it is left open (the ledger's job name has it).
  Nor does it say the job's kind: the ledger's attempt that records the id has the full name.

The sink takes only ``service`` lines: a trainer may log thousands of lines, and each routed line
is one invocation of the job-state function. What a service line can mean for the job's state is
``LineMeaning`` (``line_meaning``): the texts of a successful job's lifecycle are known (seen in
``gcloud ai custom-jobs stream-logs`` output, ``KNOWN_SERVICE_LINES``); the texts of a failed or
cancelled end are not published, so a line of severity ERROR or higher, or one starting "Job "
that is not a known live line, counts as a possible end.

Neither hint is trusted beyond naming a job (docs/architecture.md, "Events are hints, state is
read"): the job is read from Vertex AI, and its labels, not the hint, say which run and attempt it
is. So ``observed_state`` and a line's meaning only let the job-state function skip a read that
cannot change anything (``shared.policy.hint_screen``), and a hint that cannot be decoded is
malformed (``MalformedEvent``): the job-state function logs it and acknowledges it, since
redelivering cannot fix it and the reconciler catches the state anyway. Nothing here imports a
Google Cloud client.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.decode.events import KIND_ATTRIBUTE, MAX_BODY_BYTES, PUBSUB_PUBLISHED
from shared.model.errors import MalformedEvent
from shared.model.job_kinds import JobKind, kind_of_collection

if TYPE_CHECKING:
    from cloudevents.abstract import CloudEvent

JOB_STATE_KIND = "job_state"
"""The ``vertex_dispatch_kind`` attribute value of our job-state messages."""
ML_JOB_RESOURCE = "ml_job"
SERVICE_TASK = "service"
"""``resource.labels.task_name`` of the lines Vertex AI itself writes about a job."""
SINK_FILTER = f'resource.type="{ML_JOB_RESOURCE}" AND resource.labels.task_name="{SERVICE_TASK}"'
"""The log sink's filter (deploy/terraform monitoring.tf, the local log-sink stand-in): the one
place it is written; tests/deploy/test_terraform_job_log_sink.py holds Terraform to it."""
ZONE_LABEL = "compute.googleapis.com/zone"

_COLLECTIONS = tuple(kind.collection for kind in JobKind)
_JOB_NAME = re.compile(
    r"projects/(?P<project>[a-z0-9-]{1,30})/locations/(?P<region>[a-z][a-z0-9-]{1,62})"
    rf"/(?P<collection>{'|'.join(_COLLECTIONS)})/(?P<job_id>[0-9]{{1,30}})"
)
_JOB_ID = re.compile(r"[0-9]{1,30}")
_PROJECT = re.compile(r"[a-z0-9-]{1,30}")
_REGION = re.compile(r"[a-z][a-z0-9]*-[a-z]+[0-9]+")
_ZONE = re.compile(r"(?P<region>[a-z][a-z0-9]*-[a-z]+[0-9]+)-[a-z]")
_STATE = re.compile(r"JOB_STATE_[A-Z_]{1,40}")
_SHOWN_VALUE_CHARS = 80


class HintSource(enum.StrEnum):
    """Where a hint came from."""

    JOB_STATE = "job_state"  # our job-state message (the reconciler)
    LOG_ENTRY = "log_entry"  # a Cloud Logging entry for resource.type ml_job (a log sink)


class LineMeaning(enum.StrEnum):
    """What a service log line says about its job's state, as far as its text tells."""

    NOTHING = "nothing"  # a step of provisioning or tear-down, or no text: no state to read
    RUNNING = "running"  # "Job is running.": the job runs
    ENDED = "ended"  # "Job completed successfully."
    POSSIBLE_END = "possible_end"  # ERROR or worse, or an unknown "Job ..." line: maybe the end


KNOWN_SERVICE_LINES: dict[str, LineMeaning] = {
    # A successful CustomJob's service lines, in order (gcloud ai custom-jobs stream-logs).
    "Waiting for job to be provisioned.": LineMeaning.NOTHING,
    "Vertex AI is provisioning job running framework. First time usage might take couple of "
    "minutes, and subsequent runs can be much faster.": LineMeaning.NOTHING,
    "Vertex AI is setting up this job.": LineMeaning.NOTHING,
    "Waiting for training program to start.": LineMeaning.NOTHING,
    "Job is preparing.": LineMeaning.NOTHING,
    "Job is running.": LineMeaning.RUNNING,
    "Tearing down training program.": LineMeaning.NOTHING,
    "Finished tearing down training program.": LineMeaning.NOTHING,
    "Job completed successfully.": LineMeaning.ENDED,
}
# Cloud Logging's LogSeverity, by name; ERROR and worse may report a failed end.
_SEVERITY_RANKS = {
    "DEFAULT": 0,
    "DEBUG": 100,
    "INFO": 200,
    "NOTICE": 300,
    "WARNING": 400,
    "ERROR": 500,
    "CRITICAL": 600,
    "ALERT": 700,
    "EMERGENCY": 800,
}
_ERROR_RANK = _SEVERITY_RANKS["ERROR"]
_END_PREFIX = "Job "


def line_meaning(text: str | None, severity: str | None) -> LineMeaning:
    """What a service line of ``text`` at ``severity`` (a LogSeverity name) says of the job."""
    known = KNOWN_SERVICE_LINES.get((text or "").strip())
    if _severity_rank(severity) >= _ERROR_RANK:
        return known if known is LineMeaning.ENDED else LineMeaning.POSSIBLE_END
    if known is not None:
        return known
    if (text or "").lstrip().startswith(_END_PREFIX):
        return LineMeaning.POSSIBLE_END
    return LineMeaning.NOTHING


def _severity_rank(severity: str | None) -> int:
    """A LogSeverity name's number (a sink may also write the number itself); 0 if unknown."""
    name = (severity or "").strip().upper()
    return int(name) if name.isascii() and name.isdigit() else _SEVERITY_RANKS.get(name, 0)


@dataclass(frozen=True)
class JobHint:
    """ "Look at job ``job_id`` of ``project``": all a hint is trusted to say."""

    project: str  # project id or number, as the hint wrote it
    job_id: str
    region: str | None  # None: the hint does not say; look in every region the config uses
    source: HintSource
    observed_state: str | None = None  # what the sender saw; informative only
    # A log entry's: the task that wrote it, what its line says (service lines) and its severity.
    task_name: str | None = None
    meaning: LineMeaning | None = None
    severity: str | None = None
    # The kind of job a job-state message names; None for a log entry, which names only an id.
    kind: JobKind | None = None

    @property
    def is_service_line(self) -> bool:
        """Whether this is a log entry Vertex AI wrote about the job (not the trainer's)."""
        return self.source is HintSource.LOG_ENTRY and self.task_name == SERVICE_TASK


def decode_hint(cloud_event: CloudEvent) -> JobHint:
    """The job ``cloud_event`` points at; ``MalformedEvent`` when it names none."""
    if cloud_event.get("type") != PUBSUB_PUBLISHED:
        raise MalformedEvent(
            f"CloudEvent type {_shown(cloud_event.get('type'))} is not accepted by on_job_event: "
            f"it takes only {PUBSUB_PUBLISHED} from the job-events topic; point its trigger there"
        )
    message = _message(cloud_event)
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, Mapping):
        raise MalformedEvent("job-events message attributes must be an object of strings")
    body = _json_body(message.get("data"))
    if attributes.get(KIND_ATTRIBUTE) == JOB_STATE_KIND:
        return _job_state_hint(body)
    if "resource" in body and "logName" in body:
        return _log_entry_hint(body)
    raise MalformedEvent(
        f"job-events message is neither a job-state message (attribute {KIND_ATTRIBUTE}="
        f"{JOB_STATE_KIND}) nor a Cloud Logging entry (keys resource and logName); got "
        f"attributes {_shown(dict(attributes))} and body keys {_shown(sorted(body))}"
    )


def job_state_message(job_name: str, observed_state: str) -> tuple[bytes, dict[str, str]]:
    """The body and attributes of our job-state message for ``job_name`` (any sender's hint)."""
    body = {"job_name": job_name, "observed_state": observed_state}
    return json.dumps(body).encode(), {KIND_ATTRIBUTE: JOB_STATE_KIND}


def _job_state_hint(body: Mapping[str, Any]) -> JobHint:
    job_name = body.get("job_name")
    found = _JOB_NAME.fullmatch(job_name) if isinstance(job_name, str) else None
    if found is None:
        raise MalformedEvent(
            "job-state message body.job_name must be a job's name, "
            "projects/PROJECT/locations/REGION/COLLECTION/ID with COLLECTION one of "
            f"{', '.join(_COLLECTIONS)} (ID digits); got {_shown(job_name)}"
        )
    observed = body.get("observed_state")
    if observed is not None and not (isinstance(observed, str) and _STATE.fullmatch(observed)):
        raise MalformedEvent(
            "job-state message body.observed_state must be a JobState name such as "
            f"JOB_STATE_FAILED, or absent; got {_shown(observed)}"
        )
    return JobHint(
        project=found["project"],
        job_id=found["job_id"],
        region=found["region"],
        source=HintSource.JOB_STATE,
        observed_state=observed,
        kind=kind_of_collection(found["collection"]),
    )


def _log_entry_hint(entry: Mapping[str, Any]) -> JobHint:
    resource = entry.get("resource")
    if not isinstance(resource, Mapping) or resource.get("type") != ML_JOB_RESOURCE:
        kind = resource.get("type") if isinstance(resource, Mapping) else resource
        raise MalformedEvent(
            f"log entry resource.type is {_shown(kind)}, not {ML_JOB_RESOURCE!r}: filter the log "
            f'sink on resource.type="{ML_JOB_RESOURCE}" so only Vertex AI job logs reach it'
        )
    labels = resource.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    job_id = labels.get("job_id")
    project = labels.get("project_id")
    if not (isinstance(job_id, str) and _JOB_ID.fullmatch(job_id)):
        raise MalformedEvent(
            "log entry resource.labels.job_id must be the CustomJob's numeric id; got "
            f"{_shown(job_id)}: route entries of resource.type ml_job unchanged"
        )
    if not (isinstance(project, str) and _PROJECT.fullmatch(project)):
        raise MalformedEvent(
            f"log entry resource.labels.project_id must be a project id; got {_shown(project)}"
        )
    task_name = labels.get("task_name")
    task_name = task_name if isinstance(task_name, str) else None
    severity = entry.get("severity")
    severity = str(severity) if isinstance(severity, str | int) else None
    return JobHint(
        project=project,
        job_id=job_id,
        region=_log_entry_region(labels, entry.get("labels")),
        source=HintSource.LOG_ENTRY,
        task_name=task_name,
        meaning=line_meaning(_line_text(entry), severity) if task_name == SERVICE_TASK else None,
        severity=severity,
    )


def _line_text(entry: Mapping[str, Any]) -> str | None:
    """The entry's line: its textPayload, else its jsonPayload.message."""
    text = entry.get("textPayload")
    if isinstance(text, str):
        return text
    payload = entry.get("jsonPayload")
    message = payload.get("message") if isinstance(payload, Mapping) else None
    return message if isinstance(message, str) else None


def _log_entry_region(resource_labels: Mapping[str, Any], entry_labels: object) -> str | None:
    for key in ("location", "region"):
        value = resource_labels.get(key)
        if isinstance(value, str) and _REGION.fullmatch(value):
            return value
    zone = entry_labels.get(ZONE_LABEL) if isinstance(entry_labels, Mapping) else None
    found = _ZONE.fullmatch(zone) if isinstance(zone, str) else None
    return found["region"] if found else None


def _message(cloud_event: CloudEvent) -> Mapping[str, Any]:
    data = cloud_event.get_data()
    if isinstance(data, bytes | str):
        data = _json_object(data.encode() if isinstance(data, str) else data, "event data")
    message = data.get("message") if isinstance(data, Mapping) else None
    if not isinstance(message, Mapping):
        raise MalformedEvent(
            "Pub/Sub event data.message is missing or not an object; deliver the job-events "
            "topic's messages through Eventarc or a push subscription unchanged"
        )
    return message


def _json_body(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str) or not raw:
        raise MalformedEvent(
            "job-events message has no data: a hint is a JSON body (a job-state message or a "
            "log entry); publish one"
        )
    if len(raw) > 4 * -(-MAX_BODY_BYTES // 3):
        raise MalformedEvent(f"job-events message body is over {MAX_BODY_BYTES} bytes")
    try:
        decoded = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedEvent(
            "job-events message data is not standard base64; publish through a Pub/Sub client"
        ) from None
    return _json_object(decoded, "job-events message body")


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise MalformedEvent(f"{what} is not UTF-8 JSON ({error}); send a JSON object") from None
    if not isinstance(parsed, dict):
        raise MalformedEvent(f"{what} must be a JSON object; got {_shown(parsed)}")
    return parsed


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_VALUE_CHARS else text[:_SHOWN_VALUE_CHARS] + "..."
