"""Recovery: a create that failed or lost its answer, and retry messages for a run's next attempt.

A transient failure answers 500 so the platform delivers again; the redelivery must end with
exactly one job, created anew when the first create never happened, reattached by label when it
did. A retry message starts its attempt once; one for a run the ledger does not know is rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dispatch_test_support import (
    AlertsReader,
    FunctionUrls,
    VertexAdmin,
    age_intent,
    deliver_binary,
    deliver_push,
    job_request,
    json_message,
    message_published,
)

from shared.adapters.ledger import INTENT_STATE, AttemptOutcome, Ledger, RetryPlan, RunStatus
from shared.model.alerts import AlertReason
from shared.model.runkeys import request_run_key, run_id
from shared.policy.timing import INTENT_LEASE

DATASET = "gs://dispatch-it-datasets/datasets/recovery/"


@pytest.mark.parametrize(
    ("fault", "create_statuses"),
    [
        pytest.param(
            {"code": "UNAVAILABLE", "when": "before"},
            ["UNAVAILABLE", "OK"],
            id="unavailable before creating: the redelivery creates",
        ),
        pytest.param(
            {"code": "DEADLINE_EXCEEDED", "when": "after"},
            ["DEADLINE_EXCEEDED"],
            id="created but the answer lost: the redelivery reattaches",
        ),
    ],
)
def test_a_failed_create_is_delivered_again_and_ends_with_one_job(
    fault: dict[str, Any],
    create_statuses: list[str],
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.add_fault(method="CreateCustomJob", count=1, **fault)
    request = job_request(fresh_name("request"), "flex-a100", {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(request.message_id, None))

    assert deliver_push(functions.request, request) == 500
    assert deliver_push(functions.request, request) == 200
    assert deliver_push(functions.request, request) == 200

    assert [call["status"] for call in vertex.create_calls(the_run_id)] == create_statuses
    [job] = vertex.jobs(the_run_id)
    run = ledger.get_run(the_run_id).run
    assert [(a.number, a.job_name) for a in run.attempts] == [(1, job["name"])]
    assert run.status is RunStatus.SUBMITTED
    assert alerts.pull() == []


def test_a_create_that_timed_out_is_taken_over_only_after_the_intent_lease(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    # DEADLINE_EXCEEDED with nothing made: to dispatch, as to a real client, the job may exist
    # and not be listed yet, so an early takeover could make a second one.
    vertex.add_fault(method="CreateCustomJob", count=1, code="DEADLINE_EXCEEDED", when="before")
    request = job_request(fresh_name("request"), "flex-a100", {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(request.message_id, None))

    assert deliver_push(functions.request, request) == 500
    assert deliver_push(functions.request, request) == 500  # inside the lease: wait
    assert [c["status"] for c in vertex.create_calls(the_run_id)] == ["DEADLINE_EXCEEDED"]
    last = ledger.get_run(the_run_id).run.last_attempt
    assert last is not None and last.state == INTENT_STATE and last.job_name is None

    age_intent(the_run_id, INTENT_LEASE + timedelta(seconds=1))
    assert deliver_push(functions.request, request) == 200

    assert [c["status"] for c in vertex.create_calls(the_run_id)] == ["DEADLINE_EXCEEDED", "OK"]
    assert len(vertex.jobs(the_run_id)) == 1


def _retry(message_id: str, the_run_id: str, attempt: int) -> Any:
    return json_message(
        message_id,
        {
            "run_id": the_run_id,
            "attempt": attempt,
            "placement_index": 0,
            "reason": "capacity: FLEX_START wait expired",
        },
        vertex_dispatch_kind="retry",
    )


def _decide_a_retry(ledger: Ledger, the_run_id: str, next_attempt: int) -> None:
    """Record what the job-state function writes when the last attempt's job failed for lack of
    capacity: the attempt decided, the run waiting for ``next_attempt``."""
    current = ledger.get_run(the_run_id)
    assert current is not None and current.run.last_attempt is not None
    last = current.run.last_attempt
    assert last.job_name is not None
    ledger.record_decision(
        current,
        AttemptOutcome(
            attempt=last.number,
            job_name=last.job_name,
            state="JOB_STATE_FAILED",
            error={"code": 8, "message": "no capacity", "class": "capacity"},
            decision={"action": "retry", "reason": "capacity"},
            status=RunStatus.WAITING_RETRY,
            next_retry=RetryPlan(datetime.now(UTC), next_attempt, 0, "capacity"),
        ),
    )


def test_a_retry_message_starts_the_next_attempt_once(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    request = job_request(fresh_name("request"), "flex-a100", {"dataset_uri": DATASET})
    assert deliver_push(functions.request, request) == 200
    the_run_id = run_id(request_run_key(request.message_id, None))
    _decide_a_retry(ledger, the_run_id, next_attempt=2)

    # The job-state function may publish the same retry twice; each may be delivered twice.
    first, second = (_retry(fresh_name("retry"), the_run_id, attempt=2) for _ in range(2))
    assert deliver_push(functions.request, first) == 200
    assert deliver_binary(functions.request, message_published(first)) == 200
    assert deliver_push(functions.request, second) == 200

    created = vertex.created_jobs(the_run_id)
    assert [job["labels"]["vd-attempt"] for job in created] == ["1", "2"]
    assert (
        f"--data={DATASET}" in created[1]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    )
    jobs_by_attempt = {job["labels"]["vd-attempt"]: job["name"] for job in vertex.jobs(the_run_id)}
    run = ledger.get_run(the_run_id).run
    assert [(a.number, a.job_name) for a in run.attempts] == [
        (1, jobs_by_attempt["1"]),
        (2, jobs_by_attempt["2"]),
    ]
    assert alerts.pull() == []


def test_a_retry_for_the_next_attempt_while_a_job_runs_makes_no_second_job(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    # Anyone who may publish on the requests topic can send this; so can a stale decision.
    request = job_request(fresh_name("request"), "flex-a100", {"dataset_uri": DATASET})
    assert deliver_push(functions.request, request) == 200
    the_run_id = run_id(request_run_key(request.message_id, None))

    for attempt in (2, 3):
        assert (
            deliver_push(functions.request, _retry(fresh_name("retry"), the_run_id, attempt)) == 200
        )

    assert [job["labels"]["vd-attempt"] for job in vertex.created_jobs(the_run_id)] == ["1"]
    run = ledger.get_run(the_run_id).run
    assert [a.number for a in run.attempts] == [1] and run.status is RunStatus.SUBMITTED
    assert alerts.pull() == []


def test_a_retry_for_a_run_the_ledger_does_not_know_is_rejected_and_alerted_once(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    unknown_run_id = run_id(fresh_name("never-opened"))
    retry = _retry(fresh_name("retry"), unknown_run_id, attempt=2)

    assert deliver_push(functions.request, retry) == 200
    assert deliver_push(functions.request, retry) == 200

    assert vertex.create_calls() == []
    assert ledger.get_run(unknown_run_id) is None
    [alert] = alerts.pull()
    assert alert["body"]["reason"] == AlertReason.INVALID_REQUEST
    assert unknown_run_id in alert["body"]["message"]
    assert ledger.get_run(alert["body"]["run_id"]).run.status is RunStatus.REJECTED


@pytest.mark.parametrize(
    ("fault", "reason", "status"),
    [
        pytest.param(
            {
                "code": "RESOURCE_EXHAUSTED",
                "message": "Quota exceeded for aiplatform.googleapis.com/"
                "custom_model_training_preemptible_nvidia_a100_gpus",
            },
            AlertReason.QUOTA,
            RunStatus.FAILED,
            id="a quota ceiling",
        ),
        pytest.param(
            {"code": "INVALID_ARGUMENT", "message": "List of found errors: 1.Field: job_spec"},
            AlertReason.INVALID_SPEC,
            RunStatus.REJECTED,
            id="a spec the service refuses",
        ),
        pytest.param(
            {"code": "PERMISSION_DENIED", "message": "aiplatform.customJobs.create denied"},
            AlertReason.PERMISSION,
            RunStatus.FAILED,
            id="a missing role",
        ),
    ],
)
def test_a_create_the_service_refuses_ends_the_run_and_alerts_once(
    fault: dict[str, Any],
    reason: AlertReason,
    status: RunStatus,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.add_fault(method="CreateCustomJob", count=1, **fault)
    request = job_request(fresh_name("request"), "flex-a100", {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(request.message_id, None))

    assert deliver_push(functions.request, request) == 200
    assert deliver_push(functions.request, request) == 200  # the run is over: nothing more

    assert [call["status"] for call in vertex.create_calls(the_run_id)] == [fault["code"]]
    assert vertex.jobs(the_run_id) == []
    run = ledger.get_run(the_run_id).run
    assert run.status is status
    assert [(a.number, a.job_name) for a in run.attempts] == [(1, None)]
    [alert] = alerts.pull()
    assert (alert["body"]["run_id"], alert["body"]["reason"]) == (the_run_id, reason)
    assert alert["body"]["attempts"][0]["number"] == 1


def test_a_run_no_placement_can_take_waits_and_is_not_alerted_at_first(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    # No persistent resource exists: the chain's only placement cannot take the job. A human is
    # told only after no_placement_alert (test_reconcile_watchdogs drives the clock that far).
    request = job_request(fresh_name("request"), "pool-only", {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(request.message_id, None))

    assert deliver_push(functions.request, request) == 200
    assert deliver_push(functions.request, request) == 200

    assert vertex.create_calls() == []
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.WAITING_RETRY
    assert (run.next_retry.attempt, run.next_retry.placement_index) == (1, 0)
    assert run.attempts == ()
    assert run.no_placement_since is not None  # the wait is measured from here
    # Why: the run records its walk's skip (no attempt was claimed to record it on).
    [skip] = run.no_placement_skips
    assert (skip.placement, skip.skip_class) == (
        {"persistent_resource": "a100-pool"},
        "unavailable",
    )
    assert [a for a in alerts.pull() if a["body"]["run_id"] == the_run_id] == []


def test_a_permission_the_function_lacks_ends_the_run_itself_and_alerts_once(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    # Raised after the run was opened: the run ends on its own id, not as a new rejected event
    # each delivery (which the reconciler's retries would repeat every tick).
    vertex.add_fault(method="GetPersistentResource", code="PERMISSION_DENIED", count=1)
    request = job_request(fresh_name("request"), "pool-only", {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(request.message_id, None))

    assert deliver_push(functions.request, request) == 200
    assert deliver_push(functions.request, request) == 200  # the run is over: a duplicate

    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.FAILED and run.alerts == (AlertReason.PERMISSION,)
    [alert] = alerts.pull()
    assert (alert["body"]["run_id"], alert["body"]["reason"]) == (
        the_run_id,
        AlertReason.PERMISSION,
    )
    assert "aiplatform.persistentResources.get" in alert["body"]["message"]
    assert vertex.create_calls(the_run_id) == []
