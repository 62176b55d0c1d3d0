"""Sweeps and training pipelines are created exactly once, as CustomJobs are: a trigger delivered
3 times in a row makes one job, and so does a kill of the function between the create and the
ledger update, followed by a restart and redeliveries.

The kill lands in the window as in test_faults_kill.py: the emulator creates the job and holds its
answer (``when: after``), or holds the create back and then fails it (``when: before``), and the
whole function process group is SIGKILLed meanwhile. The redelivery looks the intent's job up by
label in the collection of the attempt's kind (ListHyperparameterTuningJobs,
ListTrainingPipelines), which the intent names before any job exists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dispatch_test_support import (
    FunctionUrls,
    VertexAdmin,
    age_intent,
    deliver_push,
    job_request,
    persistent_resource,
)
from faults_test_support import (
    WAIT_SECONDS,
    FunctionServer,
    deliver_until_acknowledged,
    report,
    wait_for,
)
from kinds_test_support import NEW_KINDS, TEMPLATE_OF_KIND, KindAdmin

from emulator_stack import VertexAIEmulator
from shared.adapters.ledger import INTENT_STATE, Ledger, RunStatus
from shared.model.job_kinds import JobKind
from shared.model.runkeys import request_run_key, run_id
from shared.policy.timing import INTENT_LEASE

DATASET = "gs://dispatch-it-datasets/datasets/kinds-faults/"
HELD_ANSWER_MS = 2500


@pytest.fixture
def kinds(
    vertex: VertexAdmin, vertex_ai_emulator: VertexAIEmulator
) -> Callable[[JobKind], KindAdmin]:
    # A RUNNING pool for the pipeline's first placement (the sweep's is FLEX_START only).
    vertex.put_persistent_resource(persistent_resource(state="RUNNING", replicas=4))
    return lambda kind: KindAdmin(vertex, vertex_ai_emulator.address, kind)


@pytest.fixture
def killable_request_function(dispatch_ready: None, tmp_path: Path) -> Iterator[FunctionServer]:
    server = FunctionServer("on_request", tmp_path)
    server.start()
    yield server
    server.stop()


def _check_one_job(admin: KindAdmin, ledger: Ledger, the_run_id: str) -> dict[str, Any]:
    [job] = admin.jobs(the_run_id)
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.SUBMITTED
    [attempt] = run.attempts
    assert (attempt.number, attempt.job_name, attempt.job_kind) == (1, job["name"], admin.kind)
    return job


@pytest.mark.parametrize("kind", NEW_KINDS, ids=lambda kind: kind.value)
def test_a_trigger_delivered_3_times_makes_one_job_of_its_kind(
    kind: JobKind,
    functions: FunctionUrls,
    kinds: Callable[[JobKind], KindAdmin],
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    admin = kinds(kind)
    message = job_request(fresh_name(kind.value), TEMPLATE_OF_KIND[kind], {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(message.message_id, None))

    answers = [
        deliver_until_acknowledged(lambda: deliver_push(functions.request, message))
        for _ in range(3)
    ]

    creates = admin.create_calls(the_run_id)
    report(
        f"redelivery {kind.value} x3",
        create_calls=len(creates),
        jobs=len(admin.jobs(the_run_id)),
    )
    assert all(statuses[-1] == 200 for statuses in answers), answers
    assert len(creates) == 1
    _check_one_job(admin, ledger, the_run_id)


@pytest.mark.parametrize("kind", NEW_KINDS, ids=lambda kind: kind.value)
@pytest.mark.parametrize(
    ("fault", "job_made_before_kill"),
    [
        pytest.param(
            {"when": "after", "latency_ms": HELD_ANSWER_MS},
            True,
            id="killed after the job was made: reattached",
        ),
        pytest.param(
            {"when": "before", "latency_ms": HELD_ANSWER_MS, "code": "UNAVAILABLE"},
            False,
            id="killed before the job was made: taken over after the lease",
        ),
    ],
)
def test_a_function_killed_between_create_and_record_ends_with_one_job_of_its_kind(
    kind: JobKind,
    fault: dict[str, Any],
    job_made_before_kill: bool,
    killable_request_function: FunctionServer,
    kinds: Callable[[JobKind], KindAdmin],
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    server, admin = killable_request_function, kinds(kind)
    vertex.add_fault(method=admin.create_method, count=1, **fault)
    message = job_request(fresh_name("killed"), TEMPLATE_OF_KIND[kind], {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(message.message_id, None))

    def deliver() -> int:
        return deliver_push(server.url, message)

    seen: list[int | str] = []

    def killed_delivery() -> None:
        try:
            seen.append(deliver())
        except Exception as error:  # the connection dies with the server
            seen.append(type(error).__name__)

    delivery = threading.Thread(target=killed_delivery)
    delivery.start()

    def claimed() -> bool:
        snapshot = ledger.get_run(the_run_id)
        return snapshot is not None and bool(snapshot.run.attempts)

    wait_for(claimed, "the attempt's claim")
    if job_made_before_kill:  # else the create is held back: kill at once
        wait_for(lambda: bool(admin.jobs(the_run_id)), f"the {kind.resource}'s creation")
    server.kill()
    delivery.join(WAIT_SECONDS)
    time.sleep(HELD_ANSWER_MS / 1000 + 0.5)  # the emulator is done with the dead call
    [attempt] = ledger.get_run(the_run_id).run.attempts
    # The intent names the kind before any job exists: the takeover looks in its collection.
    assert (attempt.state, attempt.job_name, attempt.job_kind) == (INTENT_STATE, None, kind)

    server.start()
    inside_lease = deliver()
    jobs_inside_lease = len(admin.jobs(the_run_id))
    age_intent(the_run_id, INTENT_LEASE + INTENT_LEASE / 5)
    after_lease = deliver_until_acknowledged(deliver)

    report(
        f"kill mid-create {kind.value} ({'job made' if job_made_before_kill else 'no job yet'})",
        killed_delivery_saw=seen,
        redelivery_inside_lease=inside_lease,
        jobs_inside_lease=jobs_inside_lease,
        redeliveries_after_lease=after_lease,
        create_calls=len(admin.create_calls(the_run_id)),
    )
    assert seen != [200]
    if job_made_before_kill:
        assert (inside_lease, jobs_inside_lease) == (200, 1)  # found by label: reattached
        assert len(admin.create_calls(the_run_id)) == 1
    else:
        assert (inside_lease, jobs_inside_lease) == (500, 0)  # AttemptInProgress
        assert len(admin.create_calls(the_run_id)) == 2  # the failed one, then the takeover's
    assert after_lease[-1] == 200
    _check_one_job(admin, ledger, the_run_id)
