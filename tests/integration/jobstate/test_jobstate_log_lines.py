"""The log lines the dashboards count, as dispatch and the job-state function really write them.

One run on the emulators goes the whole way: its job is created, runs, fails in user code, is
retried, runs and fails again, and the run ends with an alert. Every line the code logged on the
way is turned into the entry Cloud Run would make of it; then the registry
(shared/model/loglines.py) is checked against those entries (every declared field there, with its
type), and so is every log-based metric of the Terraform module (parsed from the HCL): it counts
the lines it should, and its extractors read values of the types it declares. A second run is
followed by reconcile ticks alone: the reconciler logs its job's first RUNNING once too.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jobstate_test_support import (
    Subscription,
    VertexAdmin,
    job_request,
    job_state_hint,
    message_published,
)
from log_metrics import entry_of, has_json_type, lookup, module_metrics

from emulator_stack import LOCAL_PROJECT
from shared.adapters import clients
from shared.adapters import vertex as vertex_api
from shared.adapters.ledger import Ledger, RunStatus
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, handle_job_event
from shared.handlers.reconcile import reconcile
from shared.handlers.services import Services
from shared.logs import CloudLoggingFormatter
from shared.model import loglines
from shared.model.alerts import AlertReason
from shared.model.runkeys import request_run_key, run_id

TEMPLATE = "two-regions"
PROVISIONING = 120  # the emulator's default PENDING time on new machines, in seconds
SUCCESS_RUNTIME = 600  # the emulator's default RUNNING time
TYPE_OF_LABEL = {"STRING": str, "INT64": int}
RECORDED, DECIDED = JobStateOutcome.RECORDED, JobStateOutcome.DECIDED


@pytest.fixture
def caught(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """``caplog``, catching every INFO line (and above) of ``shared`` during the test."""
    with caplog.at_level(logging.INFO, logger="shared"):
        yield caplog


def _entries_of(caplog: pytest.LogCaptureFixture, the_run: str) -> list[dict[str, Any]]:
    """The run's lines, as the log entries Cloud Run makes of them."""
    formatter = CloudLoggingFormatter()
    found = [entry_of(formatter.format(record)) for record in caplog.records]
    return [entry for entry in found if entry["labels"].get("run_id") == the_run]


def _hint(services: Services, rng: random.Random, job_name: str) -> JobStateOutcome:
    job = vertex_api.get_custom_job(job_name)
    return handle_job_event(job_state_hint(job.name, job.state.name), services, rng).outcome


def _job_name(services: Services, the_run: str, attempt: int) -> str:
    snapshot = services.ledger.get_run(the_run)
    assert snapshot is not None
    name = snapshot.run.attempts[attempt - 1].job_name
    assert name is not None
    return name


def test_a_run_logs_every_line_the_metrics_read_with_its_fields(
    fresh_name: Callable[[str], str],
    services: Services,
    vertex: VertexAdmin,
    rng: random.Random,
    subscribe: Callable[[str], Subscription],
    caught: pytest.LogCaptureFixture,
) -> None:
    key = fresh_name("key")
    the_run = run_id(request_run_key("unused", key))
    requests = subscribe(services.config.requests_topic or "")
    vertex.add_outcome(labels={"vd-run": the_run}, result="user_error", exit_code=3)

    dispatch_event(job_request(TEMPLATE, key), services)
    for attempt in (1, 2):
        vertex.advance(PROVISIONING + 30)  # running
        assert _hint(services, rng, _job_name(services, the_run, attempt)) is RECORDED
        vertex.advance(SUCCESS_RUNTIME + 60)  # failed in user code
        assert _hint(services, rng, _job_name(services, the_run, attempt)) is DECIDED
        for body, attributes in requests.pull():  # the retry, through dispatch
            if the_run.encode() in body:
                topic = services.config.requests_topic or ""
                dispatch_event(message_published(body, attributes, topic), services)
    snapshot = services.ledger.get_run(the_run)
    assert snapshot is not None and snapshot.run.status is RunStatus.FAILED

    logged = _entries_of(caught, the_run)

    # The registry against the lines as logged: every declared field, with its type.
    def lines_of(line: loglines.LogLine) -> list[dict[str, Any]]:
        if line.message is not None:
            return [e for e in logged if e["jsonPayload"]["message"] == line.message]
        assert line.key is not None
        return [e for e in logged if lookup(e["jsonPayload"], line.key)[1]]

    counts = {}
    for line in (loglines.JOB_CREATED, loglines.JOB_RUNNING, loglines.JOB_DECIDED, loglines.ALERT):
        found = lines_of(line)
        counts[line.name] = len(found)
        for entry in found:
            for name, kind in line.fields.items():
                value, present = lookup(entry["jsonPayload"], name)
                assert present, f"{line.name}: no {name} in {entry}"
                assert has_json_type(value, kind), (line.name, name, value)
            assert line.labels <= set(entry["labels"]), (line.name, entry["labels"])
    assert counts == {
        "runs started": 2,  # one job per attempt
        "time to RUNNING": 2,  # once per attempt, though each job was read RUNNING once only
        "runs ended by outcome": 2,
        "alerts by reason": 1,
    }
    [alert] = lines_of(loglines.ALERT)
    assert alert["jsonPayload"]["alert"]["schema"] == loglines.KEY_VALUES["alert.schema"]

    # Each Terraform metric against the same entries: what it counts and what it extracts.
    counted: dict[str, list[dict[str, Any]]] = {}
    for resource, metric in module_metrics().items():
        counted[resource] = [entry for entry in logged if metric.matches(entry)]
        for entry in counted[resource]:
            for label, value in metric.labels_of(entry).items():
                assert has_json_type(value, TYPE_OF_LABEL[metric.labels[label]]), (label, value)
            if metric.value_extractor:
                assert has_json_type(metric.value_of(entry), float)

    assert [e["jsonPayload"]["attempt"] for e in counted["runs_started"]] == [1]
    assert module_metrics()["runs_started"].labels_of(counted["runs_started"][0]) == {
        "template": TEMPLATE,
        "placement_kind": "flex_start",
    }
    ended = [module_metrics()["runs_ended"].labels_of(e) for e in counted["runs_ended"]]
    assert ended == [
        {"outcome": "user_code", "run_status": "WAITING_RETRY", "template": TEMPLATE},
        {"outcome": "user_code", "run_status": "FAILED", "template": TEMPLATE},
    ]
    waits = [module_metrics()["time_to_running"].value_of(e) for e in counted["time_to_running"]]
    assert len(waits) == 2
    assert all(0 < wait <= PROVISIONING + 30 for wait in waits), waits
    reasons = [module_metrics()["alerts"].labels_of(e)["reason"] for e in counted["alerts"]]
    assert reasons == [AlertReason.RETRIES_EXHAUSTED.value]
    assert counted["function_errors"] == counted["alerts"]  # the alert is this run's one ERROR
    assert counted["hints_dropped"] == []  # every hint named our job and a new state


def test_the_reconciler_logs_a_jobs_first_running_once(
    fresh_name: Callable[[str], str],
    services: Services,
    vertex: VertexAdmin,
    caught: pytest.LogCaptureFixture,
) -> None:
    """The reconciler records states through the same code as on_job_event: one "job running"
    line for the attempt, however many ticks list the job RUNNING."""
    # A ledger collection of its own: the ticks see this test's run only.
    ledger = Ledger(clients.firestore_client(LOCAL_PROJECT), fresh_name("runs"))
    isolated = Services(services.config, _ledger=ledger)
    key = fresh_name("key")
    the_run = run_id(request_run_key("unused", key))
    dispatch_event(job_request(TEMPLATE, key), isolated)
    vertex.advance(PROVISIONING + 30)

    for _ in range(3):
        reconcile(isolated, isolated.now())

    snapshot = ledger.get_run(the_run)
    assert snapshot is not None and snapshot.run.status is RunStatus.RUNNING
    running = [
        entry
        for entry in _entries_of(caught, the_run)
        if entry["jsonPayload"]["message"] == loglines.JOB_RUNNING_MESSAGE
    ]
    assert len(running) == 1
    metric = module_metrics()["time_to_running"]
    assert metric.matches(running[0])
    assert 0 < metric.value_of(running[0]) <= PROVISIONING + 30
    assert metric.labels_of(running[0]) == {"placement_kind": "flex_start", "region": "us-central1"}
