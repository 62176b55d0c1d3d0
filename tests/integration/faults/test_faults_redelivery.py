"""Every trigger delivered 3 times in a row, and 16 times at once: one job per trigger.

Through real functions-framework servers, for each kind of trigger: a dataset's marker object
(Eventarc, binary CloudEvent), a job request and a schedule tick (Pub/Sub push bodies).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from dispatch_test_support import (
    DATASETS_BUCKET,
    FunctionUrls,
    VertexAdmin,
    deliver_binary,
    deliver_push,
    job_request,
    json_message,
    object_finalized,
)
from faults_test_support import deliver_until_acknowledged, report

from shared.adapters.ledger import Ledger, RunStatus
from shared.model.runkeys import dataset_run_key, request_run_key, run_id, schedule_run_key

GENERATION = 1733100000000000
DATASET = "gs://dispatch-it-datasets/datasets/faults/"


@dataclass(frozen=True)
class Trigger:
    """One trigger: how to deliver it once, and the run id it must make."""

    deliver: Callable[[], int]
    run_id: str


def marker_trigger(functions: FunctionUrls, unique: str) -> Trigger:
    directory = f"datasets/{unique}"
    event = object_finalized(DATASETS_BUCKET, f"{directory}/_SUCCESS", GENERATION, size=0)
    key = dataset_run_key(DATASETS_BUCKET, directory, GENERATION)
    return Trigger(lambda: deliver_binary(functions.object_finalized, event), run_id(key))


def request_trigger(functions: FunctionUrls, unique: str) -> Trigger:
    message = job_request(unique, "flex-a100", {"dataset_uri": DATASET})
    key = request_run_key(message.message_id, None)
    return Trigger(lambda: deliver_push(functions.request, message), run_id(key))


def tick_trigger(functions: FunctionUrls, unique: str) -> Trigger:
    # A tick time no other test uses: the run key is the schedule and its time.
    offset = int(unique.rsplit("-", 1)[1], 16) % 10**8
    tick_time = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=offset)
    message = json_message(
        unique,
        {"schedule": "nightly-retrain", "time": tick_time.isoformat()},
        vertex_dispatch_kind="schedule",
    )
    key = schedule_run_key("nightly-retrain", tick_time)
    return Trigger(lambda: deliver_push(functions.request, message), run_id(key))


TRIGGER_KINDS = {"marker": marker_trigger, "request": request_trigger, "tick": tick_trigger}


@pytest.mark.parametrize("kind", sorted(TRIGGER_KINDS))
@pytest.mark.parametrize(
    ("deliveries", "at_once"),
    [pytest.param(3, False, id="3 in a row"), pytest.param(16, True, id="16 at once")],
)
def test_a_trigger_delivered_many_times_makes_one_job(
    kind: str,
    deliveries: int,
    at_once: bool,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    trigger = TRIGGER_KINDS[kind](functions, fresh_name(kind))

    if at_once:
        with ThreadPoolExecutor(deliveries) as pool:
            answers = list(
                pool.map(lambda _: deliver_until_acknowledged(trigger.deliver), range(deliveries))
            )
    else:
        answers = [deliver_until_acknowledged(trigger.deliver) for _ in range(deliveries)]

    jobs = vertex.jobs(trigger.run_id)
    creates = vertex.create_calls(trigger.run_id)
    retried = sum(len(statuses) - 1 for statuses in answers)
    report(
        f"redelivery {kind} x{deliveries}{' at once' if at_once else ''}",
        deliveries=deliveries,
        redeliveries_after_500=retried,
        create_calls=len(creates),
        jobs=len(jobs),
    )
    # A 500 is AttemptInProgress or a lost compare-and-set: the platform delivers again.
    assert all(statuses[-1] == 200 for statuses in answers), answers
    assert len(creates) == 1
    assert len(jobs) == 1
    run = ledger.get_run(trigger.run_id).run
    assert run.status is RunStatus.SUBMITTED
    assert [(a.number, a.job_name) for a in run.attempts] == [(1, jobs[0]["name"])]
