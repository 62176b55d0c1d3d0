"""Job-state hints decoded: our job-state message and Cloud Logging entries of ml_job jobs."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cloudevents.http import CloudEvent

from shared.decode.hints import (
    SERVICE_TASK,
    HintSource,
    JobHint,
    LineMeaning,
    decode_hint,
    job_state_message,
    line_meaning,
)
from shared.model.errors import MalformedEvent
from shared.model.job_kinds import JobKind

JOB_NAME = "projects/123456789012/locations/us-central1/customJobs/1000000000000000001"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"

# A Vertex AI service log entry as a log sink publishes it (resource.type ml_job).
SERVICE_LOG_ENTRY: dict[str, Any] = {
    "insertId": "1a2b3c4d5e",
    "logName": "projects/acme-ml/logs/ml.googleapis.com%2F1000000000000000001",
    "resource": {
        "type": "ml_job",
        "labels": {
            "job_id": "1000000000000000001",
            "project_id": "acme-ml",
            "task_name": "service",
        },
    },
    "severity": "INFO",
    "textPayload": "Job failed.",
    "timestamp": "2026-12-01T04:10:00.123456Z",
    "receiveTimestamp": "2026-12-01T04:10:01.000000Z",
}
WORKER_LOG_ENTRY: dict[str, Any] = {
    **SERVICE_LOG_ENTRY,
    "logName": "projects/acme-ml/logs/workerpool0-0",
    "resource": {
        "type": "ml_job",
        "labels": {
            "job_id": "1000000000000000001",
            "project_id": "acme-ml",
            "task_name": "workerpool0-0",
        },
    },
    "labels": {"compute.googleapis.com/zone": "us-east4-b", "ml.googleapis.com/trial_id": ""},
    "jsonPayload": {"message": "epoch 3/90", "levelname": "INFO"},
}


def published(body: bytes, **attributes: str) -> CloudEvent:
    return CloudEvent(
        {
            "type": PUBSUB_PUBLISHED,
            "source": "//pubsub.googleapis.com/projects/acme-ml/topics/vertex-dispatch-job-events",
            "id": "4242",
        },
        {
            "message": {
                "data": base64.b64encode(body).decode(),
                "attributes": attributes,
                "messageId": "4242",
                "publishTime": "2026-12-01T04:10:02Z",
            },
            "subscription": "projects/acme-ml/subscriptions/eventarc-job-events",
        },
    )


def job_state(body: dict[str, Any]) -> CloudEvent:
    return published(json.dumps(body).encode(), vertex_dispatch_kind="job_state")


def log_entry(entry: dict[str, Any]) -> CloudEvent:
    return published(
        json.dumps(entry).encode(), **{"logging.googleapis.com/timestamp": entry["timestamp"]}
    )


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(
            job_state({"job_name": JOB_NAME, "observed_state": "JOB_STATE_FAILED"}),
            JobHint(
                "123456789012",
                "1000000000000000001",
                "us-central1",
                HintSource.JOB_STATE,
                "JOB_STATE_FAILED",
                kind=JobKind.CUSTOM_JOB,
            ),
            id="our job-state message",
        ),
        pytest.param(
            job_state({"job_name": JOB_NAME}),
            JobHint(
                "123456789012",
                "1000000000000000001",
                "us-central1",
                HintSource.JOB_STATE,
                kind=JobKind.CUSTOM_JOB,
            ),
            id="observed_state is optional",
        ),
        pytest.param(
            log_entry(SERVICE_LOG_ENTRY),
            JobHint(
                "acme-ml",
                "1000000000000000001",
                None,
                HintSource.LOG_ENTRY,
                task_name="service",
                meaning=LineMeaning.POSSIBLE_END,
                severity="INFO",
            ),
            id="a service log entry names no region",
        ),
        pytest.param(
            log_entry(WORKER_LOG_ENTRY),
            JobHint(
                "acme-ml",
                "1000000000000000001",
                "us-east4",
                HintSource.LOG_ENTRY,
                task_name="workerpool0-0",
                severity="INFO",
            ),
            id="a worker log entry's zone gives the region",
        ),
    ],
)
def test_a_hint_names_a_job(event: CloudEvent, expected: JobHint) -> None:
    assert decode_hint(event) == expected


def test_our_message_round_trips() -> None:
    body, attributes = job_state_message(JOB_NAME, "JOB_STATE_RUNNING")
    hint = decode_hint(published(body, **attributes))
    assert (hint.project, hint.region, hint.kind, hint.job_id) == (
        "123456789012",
        "us-central1",
        JobKind.CUSTOM_JOB,
        JOB_NAME.rsplit("/", 1)[1],
    )
    assert hint.observed_state == "JOB_STATE_RUNNING"


@pytest.mark.parametrize("kind", list(JobKind))
def test_our_message_may_name_any_kind_of_job(kind: JobKind) -> None:
    name = f"projects/123456789012/locations/us-east4/{kind.collection}/1000000000000000007"
    body, attributes = job_state_message(name, "JOB_STATE_SUCCEEDED")

    hint = decode_hint(published(body, **attributes))

    assert (hint.kind, hint.job_id, hint.region) == (kind, "1000000000000000007", "us-east4")
    assert hint.project == "123456789012"


def test_a_log_entry_says_no_kind() -> None:
    hint = decode_hint(log_entry(SERVICE_LOG_ENTRY))

    assert (hint.kind, hint.job_id) == (None, "1000000000000000001")


def other_resource_entry() -> dict[str, Any]:
    return {**SERVICE_LOG_ENTRY, "resource": {"type": "gce_instance", "labels": {}}}


def entry_without_job_id() -> dict[str, Any]:
    resource = {"type": "ml_job", "labels": {"project_id": "acme-ml", "task_name": "service"}}
    return {**SERVICE_LOG_ENTRY, "resource": resource}


@pytest.mark.parametrize(
    ("event", "names"),
    [
        pytest.param(
            job_state({"job_name": "customJobs/1"}), "body.job_name", id="a job name cut short"
        ),
        pytest.param(
            job_state({"job_name": JOB_NAME.replace("customJobs", "batchPredictionJobs")}),
            "hyperparameterTuningJobs, trainingPipelines",
            id="a job of a kind no template makes",
        ),
        pytest.param(
            job_state({"job_name": JOB_NAME, "observed_state": "failed"}),
            "body.observed_state",
            id="a state that is not a JobState name",
        ),
        pytest.param(log_entry(other_resource_entry()), "resource.type", id="not an ml_job entry"),
        pytest.param(
            log_entry(entry_without_job_id()), "resource.labels.job_id", id="no job_id label"
        ),
        pytest.param(published(b"{not json"), "not UTF-8 JSON", id="a body that is not JSON"),
        pytest.param(
            published(b'{"template": "x"}', kind="train"),
            "neither a job-state message",
            id="a job request sent to the wrong topic",
        ),
        pytest.param(
            CloudEvent(
                {"type": "google.cloud.storage.object.v1.finalized", "source": "//x", "id": "1"},
                {"bucket": "b", "name": "n"},
            ),
            "is not accepted by on_job_event",
            id="a storage event",
        ),
    ],
)
def test_a_hint_that_names_no_job_is_malformed(event: CloudEvent, names: str) -> None:
    with pytest.raises(MalformedEvent, match=names.replace(".", r"\.")):
        decode_hint(event)


PROVISIONING = (
    "Vertex AI is provisioning job running framework. First time usage might take couple of "
    "minutes, and subsequent runs can be much faster."
)


@pytest.mark.parametrize(
    ("text", "severity", "meaning"),
    [
        # A successful job's service lines, in the order Vertex AI writes them.
        ("Waiting for job to be provisioned.", "INFO", LineMeaning.NOTHING),
        (PROVISIONING, "INFO", LineMeaning.NOTHING),
        ("Vertex AI is setting up this job.", "INFO", LineMeaning.NOTHING),
        ("Waiting for training program to start.", "INFO", LineMeaning.NOTHING),
        ("Job is preparing.", "INFO", LineMeaning.NOTHING),
        ("Job is running.", "INFO", LineMeaning.RUNNING),
        ("Tearing down training program.", "INFO", LineMeaning.NOTHING),
        ("Finished tearing down training program.", "INFO", LineMeaning.NOTHING),
        ("Job completed successfully.", "INFO", LineMeaning.ENDED),
        # What is not known is a possible end, never nothing.
        ("Job failed.", "INFO", LineMeaning.POSSIBLE_END),
        ("Job was cancelled.", None, LineMeaning.POSSIBLE_END),
        (
            "The replica workerpool0-0 exited with a non-zero status of 1.",
            "ERROR",
            LineMeaning.POSSIBLE_END,
        ),
        ("Job is running.", "ERROR", LineMeaning.POSSIBLE_END),
        ("Waiting for job to be provisioned.", "CRITICAL", LineMeaning.POSSIBLE_END),
        ("Job completed successfully.", "ERROR", LineMeaning.ENDED),
        ("anything at all", "500", LineMeaning.POSSIBLE_END),
        ("anything at all", "WARNING", LineMeaning.NOTHING),
        ("  Job is running.\n", "info", LineMeaning.RUNNING),
        (None, "INFO", LineMeaning.NOTHING),
        ("", None, LineMeaning.NOTHING),
        ("Jobs are great", "INFO", LineMeaning.NOTHING),
    ],
)
def test_what_a_service_line_says(
    text: str | None, severity: str | None, meaning: LineMeaning
) -> None:
    assert line_meaning(text, severity) is meaning


def service_entry(**payload: Any) -> dict[str, Any]:
    entry = {k: v for k, v in SERVICE_LOG_ENTRY.items() if k != "textPayload"}
    return {**entry, **payload}


@pytest.mark.parametrize(
    ("entry", "task_name", "meaning"),
    [
        pytest.param(
            service_entry(textPayload="Job is running."),
            SERVICE_TASK,
            LineMeaning.RUNNING,
            id="textPayload",
        ),
        pytest.param(
            service_entry(jsonPayload={"message": "Job completed successfully."}),
            SERVICE_TASK,
            LineMeaning.ENDED,
            id="jsonPayload.message",
        ),
        pytest.param(
            service_entry(jsonPayload={"levelname": "INFO"}),
            SERVICE_TASK,
            LineMeaning.NOTHING,
            id="no text",
        ),
        pytest.param(
            service_entry(textPayload="Job is running.", severity="ERROR"),
            SERVICE_TASK,
            LineMeaning.POSSIBLE_END,
            id="severity read",
        ),
        pytest.param(
            {**WORKER_LOG_ENTRY, "jsonPayload": {"message": "Job completed successfully."}},
            "workerpool0-0",
            None,
            id="a trainer line means nothing, whatever it says",
        ),
    ],
)
def test_a_log_entry_hint_carries_its_task_and_meaning(
    entry: dict[str, Any], task_name: str, meaning: LineMeaning | None
) -> None:
    hint = decode_hint(log_entry(entry))
    assert (hint.task_name, hint.meaning) == (task_name, meaning)
    assert hint.is_service_line is (task_name == SERVICE_TASK)
