"""Messages on the requests topic through on_request: job requests and schedule ticks.

Each message arrives as Eventarc's messagePublished CloudEvent or as a plain Pub/Sub push body
(functions-framework converts it); both must end the same way. Invalid requests are acknowledged,
recorded as REJECTED and alerted once, however often they are delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from dispatch_test_support import (
    POOL_ID,
    AlertsReader,
    FunctionUrls,
    PubSubMessage,
    VertexAdmin,
    deliver_binary,
    deliver_push,
    deliver_structured,
    job_request,
    json_message,
    message_published,
    persistent_resource,
)

from shared.adapters.ledger import Ledger, RunStatus
from shared.model.alerts import SCHEMA, AlertReason
from shared.model.runkeys import request_run_key, run_id, schedule_run_key

DATASET = "gs://dispatch-it-datasets/datasets/requested/"


@pytest.mark.parametrize(
    ("case", "body", "attributes", "names"),
    [
        pytest.param(
            "unknown param",
            b'{"template": "flex-a100", "params": {"epochs": "90"}}',
            {"kind": "train"},
            "body.params.epochs",
            id="a param the template does not declare",
        ),
        pytest.param(
            "unknown template",
            b'{"template": "no-such-template"}',
            {"kind": "train"},
            "body.template",
            id="a template the config does not have",
        ),
        pytest.param(
            "malformed body",
            b'{"template": "flex-a100", ',
            {"kind": "train"},
            "job request body",
            id="a body that is not JSON",
        ),
        pytest.param(
            "unknown kind",
            b"{}",
            {"kind": "train", "vertex_dispatch_kind": "cancel"},
            "vertex_dispatch_kind",
            id="a message kind dispatch does not know",
        ),
    ],
)
def test_an_invalid_request_is_rejected_and_alerted_once(
    case: str,
    body: bytes,
    attributes: dict[str, str],
    names: str,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    message = PubSubMessage(fresh_name("invalid"), body, attributes)

    # Delivered twice, once each way the platform can: still one alert.
    assert deliver_push(functions.request, message) == 200
    assert deliver_binary(functions.request, message_published(message)) == 200

    assert vertex.create_calls() == []
    [alert] = alerts.pull()
    assert alert["attributes"]["reason"] == AlertReason.INVALID_REQUEST
    assert alert["body"]["schema"] == SCHEMA
    assert alert["body"]["reason"] == AlertReason.INVALID_REQUEST
    assert names in alert["body"]["message"], case
    assert alert["body"]["what_to_do"]
    run = ledger.get_run(alert["body"]["run_id"]).run
    assert run.status is RunStatus.REJECTED
    assert message.message_id in run.run_key
    assert run.attempts == ()
    assert run.alerts == (AlertReason.INVALID_REQUEST,)


def test_requests_sharing_an_idempotency_key_make_one_job(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    key = fresh_name("retrain-2026-12-01")
    first, second = (
        job_request(
            fresh_name("message"), "flex-a100", {"dataset_uri": DATASET}, idempotency_key=key
        )
        for _ in range(2)
    )

    assert deliver_push(functions.request, first) == 200
    assert deliver_structured(functions.request, message_published(second)) == 200

    the_run_id = run_id(request_run_key(first.message_id, key))
    [created] = vertex.created_jobs()
    assert created["labels"]["vd-run"] == the_run_id
    assert f"--data={DATASET}" in created["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.SUBMITTED
    assert run.trigger["message_id"] == first.message_id  # the second found the run
    assert alerts.pull() == []


def test_a_schedule_tick_starts_its_template_once(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    tick_time = datetime.now(UTC).replace(microsecond=0)
    tick = json_message(
        fresh_name("tick"),
        {"schedule": "nightly-retrain", "time": tick_time.isoformat()},
        vertex_dispatch_kind="schedule",
    )

    assert deliver_push(functions.request, tick) == 200
    assert deliver_push(functions.request, tick) == 200  # Cloud Scheduler's retry

    the_run_id = run_id(schedule_run_key("nightly-retrain", tick_time))
    [created] = vertex.created_jobs()
    assert created["labels"]["vd-run"] == the_run_id
    assert created["labels"]["vd-template"] == "flex-a100"
    assert created["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"
    args = created["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert "--data=gs://dispatch-it-datasets/datasets/latest/" in args
    run = ledger.get_run(the_run_id).run
    assert (run.route, run.template, run.status) == ("nightly", "flex-a100", RunStatus.SUBMITTED)
    assert alerts.pull() == []


@pytest.mark.parametrize(
    ("state", "jobs_before", "expected_placement"),
    [
        pytest.param("RUNNING", 0, {"persistent_resource": POOL_ID}, id="a pool with room"),
        pytest.param("RUNNING", 1, {"flex_start": {"max_wait": "7200s"}}, id="a full pool"),
        pytest.param("STOPPING", 0, {"flex_start": {"max_wait": "7200s"}}, id="a stopping pool"),
    ],
)
def test_a_persistent_resource_that_cannot_take_the_job_falls_through_to_flex_start(
    state: str,
    jobs_before: int,
    expected_placement: dict[str, object],
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.put_persistent_resource(persistent_resource(state=state, replicas=1))
    for _ in range(jobs_before):  # each takes the pool's one replica
        filler = job_request(fresh_name("filler"), "pool-then-flex", {"dataset_uri": DATASET})
        assert deliver_push(functions.request, filler) == 200
    request = job_request(fresh_name("request"), "pool-then-flex", {"dataset_uri": DATASET})

    assert deliver_push(functions.request, request) == 200

    the_run_id = run_id(request_run_key(request.message_id, None))
    [created] = vertex.created_jobs(the_run_id)
    if "persistent_resource" in expected_placement:
        assert created["jobSpec"]["persistentResourceId"] == POOL_ID
        assert "strategy" not in created["jobSpec"].get("scheduling", {})
    else:
        assert "persistentResourceId" not in created["jobSpec"]
        assert created["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"
        assert created["jobSpec"]["scheduling"]["maxWaitDuration"] == "7200s"
    [attempt] = ledger.get_run(the_run_id).run.attempts
    assert attempt.placement == expected_placement
    assert attempt.job_name == vertex.jobs(the_run_id)[0]["name"]
    assert alerts.pull() == []
