"""The registry of the log lines the metrics read (shared/model/loglines.py), held to the code.

Read from the code's own log calls: every line of the registry is written, by ``log`` calls that
take the message from the registry (never a copy of its text) and pass every field it declares.
Run with real objects: the "job running" line, as the job-state function writes it, carries the
declared fields with their types, and the Terraform metric that reads it (parsed from the HCL)
counts it and extracts its value and labels. The other lines, as really logged on the emulators:
tests/integration/jobstate/test_jobstate_log_lines.py.
"""

from __future__ import annotations

import ast
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from log_metrics import entry_of, has_json_type, lookup, module_metrics

from shared.config.model import FlexStartPlacement, PersistentResourcePlacement, Placement
from shared.handlers.jobstate import log_first_running
from shared.logs import CloudLoggingFormatter
from shared.model import loglines
from shared.model.runs import Attempt, Run, RunSnapshot
from shared.policy.records import placement_kind, placement_record

SHARED = Path(__file__).resolve().parents[2] / "shared"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
JOB = "projects/p/locations/us-central1/customJobs/123"


def _log_calls() -> list[tuple[Path, ast.Call]]:
    calls = []
    for path in sorted(SHARED.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "log"
                and len(node.args) >= 3
            ):
                calls.append((path, node))
    return calls


def _message_constant(node: ast.expr) -> str | None:
    """The registry constant a message argument names (``loglines.JOB_CREATED_MESSAGE``)."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "loglines"
        and node.attr.endswith("_MESSAGE")
    ):
        return str(getattr(loglines, node.attr))
    return None


def _top_fields(line: loglines.LogLine) -> set[str]:
    return {name.split(".")[0] for name in line.fields}


MESSAGE_LINES = [line for line in loglines.LINES if line.message is not None]
KEYED_LINES = [line for line in loglines.LINES if line.message is None]


@pytest.mark.parametrize("line", MESSAGE_LINES, ids=lambda line: line.message)
def test_each_message_line_is_written_with_its_fields(line: loglines.LogLine) -> None:
    writers = [(p, c) for p, c in _log_calls() if _message_constant(c.args[2]) == line.message]
    assert writers, f"no log call writes {line.message!r} with its registry constant"
    for path, call in writers:
        keywords = {k.arg for k in call.keywords} - {"labels"}
        missing = _top_fields(line) - keywords
        assert not missing, f"{path}:{call.lineno} writes {line.message!r} without {missing}"
        assert any(k.arg == "labels" for k in call.keywords), f"{path}:{call.lineno}: no labels"


@pytest.mark.parametrize("line", KEYED_LINES, ids=lambda line: line.name)
def test_each_keyed_line_is_written(line: loglines.LogLine) -> None:
    assert line.key is not None
    top = line.key.split(".")[0]
    writers = [c for _, c in _log_calls() if any(k.arg == top for k in c.keywords)]
    assert writers, f"no log call passes the field {top!r} that {line.name!r} is known by"


def test_no_log_call_copies_a_registry_message() -> None:
    messages = {line.message for line in MESSAGE_LINES}
    copies = [
        f"{path}:{call.lineno}"
        for path, call in _log_calls()
        if isinstance(call.args[2], ast.Constant) and call.args[2].value in messages
    ]
    assert copies == []


@pytest.mark.parametrize(
    ("placement", "kind"),
    [
        (FlexStartPlacement(max_wait=timedelta(hours=1)), "flex_start"),
        (FlexStartPlacement(max_wait=timedelta(0), region="us-east4"), "flex_start"),
        (PersistentResourcePlacement("a100-pool"), "persistent_resource"),
        (PersistentResourcePlacement("a100-pool", region="europe-west4"), "persistent_resource"),
    ],
)
def test_placement_kind_of_each_placement_as_recorded(placement: Placement, kind: str) -> None:
    assert placement_kind(placement_record(placement)) == kind


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        ({"flex_start": {"max_wait": "3600s"}}, "flex_start"),
        ({"flex_start": {"max_wait": "0s", "region": "us-east4"}}, "flex_start"),
        ({"persistent_resource": "a100-pool"}, "persistent_resource"),
        ({"persistent_resource": "a100-pool", "region": "europe-west4"}, "persistent_resource"),
        ({}, "unknown"),
    ],
)
def test_placement_kind(record: dict[str, Any], kind: str) -> None:
    assert placement_kind(record) == kind


# The "job running" line, written by the job-state function's own code.


def _snapshot(state: str) -> tuple[Attempt, RunSnapshot]:
    attempt = Attempt(
        number=1,
        placement={"flex_start": {"max_wait": "3600s"}},
        region="us-central1",
        parent="projects/p/locations/us-central1",
        intent_at=NOW - timedelta(minutes=30),
        job_name=JOB,
        state=state,
    )
    run = Run(
        run_id="r-0123456789abcdef01234567",
        run_key="request:k",
        route="on-request",
        template="resnet-a100",
        trigger={},
        attempts=(attempt,),
    )
    return attempt, RunSnapshot(run, NOW)


def _lines(
    caplog: pytest.LogCaptureFixture, before: str, after: str, job: CustomJob
) -> list[dict[str, Any]]:
    attempt, _ = _snapshot(before)
    _, recorded = _snapshot(after)
    formatter = CloudLoggingFormatter()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="shared.handlers.jobstate"):
        log_first_running(attempt, recorded, job, NOW)
    return [entry_of(formatter.format(record)) for record in caplog.records]


def test_the_first_running_is_logged_with_the_fields_the_metric_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = CustomJob(
        name=JOB,
        create_time=NOW - timedelta(minutes=20),
        start_time=NOW - timedelta(minutes=5, seconds=0.25),
    )
    [entry] = _lines(caplog, "JOB_STATE_PENDING", "JOB_STATE_RUNNING", job)

    payload = entry["jsonPayload"]
    assert payload["message"] == loglines.JOB_RUNNING_MESSAGE
    for name, kind in loglines.JOB_RUNNING.fields.items():
        value, present = lookup(payload, name)
        assert present and has_json_type(value, kind), (name, value)
    assert loglines.JOB_RUNNING.labels <= set(entry["labels"])
    assert payload["time_to_running_s"] == 14 * 60 + 59.75
    assert (payload["placement_kind"], payload["region"]) == ("flex_start", "us-central1")

    metric = module_metrics()["time_to_running"]
    assert metric.matches(entry)
    assert metric.value_of(entry) == 899.75
    assert metric.labels_of(entry) == {"placement_kind": "flex_start", "region": "us-central1"}
    others = [m.name for m in module_metrics().values() if m is not metric and m.matches(entry)]
    assert others == []


def test_a_job_without_its_times_waits_from_the_intent_until_now(
    caplog: pytest.LogCaptureFixture,
) -> None:
    [entry] = _lines(caplog, "JOB_STATE_QUEUED", "JOB_STATE_RUNNING", CustomJob(name=JOB))
    assert entry["jsonPayload"]["time_to_running_s"] == 30 * 60


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("JOB_STATE_RUNNING", "JOB_STATE_RUNNING"),  # already recorded: no second line
        ("JOB_STATE_PENDING", "JOB_STATE_PENDING"),  # not running yet
        ("JOB_STATE_SUCCEEDED", "JOB_STATE_SUCCEEDED"),  # a late listing of an ended job
    ],
)
def test_no_line_unless_this_write_recorded_the_first_running(
    caplog: pytest.LogCaptureFixture, before: str, after: str
) -> None:
    assert _lines(caplog, before, after, CustomJob(name=JOB, create_time=NOW)) == []
