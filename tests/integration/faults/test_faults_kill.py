"""A real kill between CreateCustomJob and the ledger update, then a restart and a redelivery.

The SIGKILL of the function's whole process group lands in the window deterministically:

- job made, ledger not updated: the Vertex AI emulator creates the job, then holds its answer
  (``when: after`` with ``latency_ms``); the kill comes once the job exists, while the function
  still waits for the answer, so its ledger update never happens. The redelivery finds the job by
  its labels and reattaches it, inside the intent lease or not.
- no job made: the create is held back and then fails; the kill comes while it is held. Inside
  the intent lease the redelivery cannot tell a dead creator from a slow one, so it answers 500
  (``AttemptInProgress``) and creates nothing; once the intent is older than the lease (aged here
  in Firestore) it takes the attempt over and creates the one job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dispatch_test_support import VertexAdmin, age_intent, deliver_push, job_request
from faults_test_support import (
    WAIT_SECONDS,
    FunctionServer,
    deliver_until_acknowledged,
    report,
    wait_for,
)

from shared.adapters.ledger import INTENT_STATE, Ledger, RunStatus
from shared.model.runkeys import request_run_key, run_id
from shared.policy.timing import INTENT_LEASE

DATASET = "gs://dispatch-it-datasets/datasets/killed/"
HELD_ANSWER_MS = 2500


@pytest.fixture
def killable_request_function(dispatch_ready: None, tmp_path: Path) -> Iterator[FunctionServer]:
    server = FunctionServer("on_request", tmp_path)
    server.start()
    yield server
    server.stop()


def _deliver_and_kill(
    server: FunctionServer,
    deliver: Callable[[], int],
    claimed: Callable[[], bool],
    in_window: Callable[[], bool],
) -> list[int | str]:
    """Start a delivery; once the attempt is claimed and ``in_window`` holds, SIGKILL the server.
    What the delivery saw."""
    seen: list[int | str] = []

    def attempt() -> None:
        try:
            seen.append(deliver())
        except Exception as error:  # the connection dies with the server
            seen.append(type(error).__name__)

    delivery = threading.Thread(target=attempt)
    delivery.start()
    wait_for(claimed, "the attempt's claim")
    wait_for(in_window, "the create call")
    server.kill()
    delivery.join(WAIT_SECONDS)
    return seen


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
def test_a_function_killed_mid_create_ends_with_one_job(
    fault: dict[str, Any],
    job_made_before_kill: bool,
    killable_request_function: FunctionServer,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    server = killable_request_function
    vertex.add_fault(method="CreateCustomJob", count=1, **fault)
    request = job_request(fresh_name("killed"), "flex-a100", {"dataset_uri": DATASET})
    the_run_id = run_id(request_run_key(request.message_id, None))

    def deliver() -> int:
        return deliver_push(server.url, request)

    def claimed() -> bool:
        snapshot = ledger.get_run(the_run_id)
        return snapshot is not None and bool(snapshot.run.attempts)

    def in_window() -> bool:
        return bool(vertex.jobs(the_run_id)) if job_made_before_kill else True

    seen_by_killed = _deliver_and_kill(server, deliver, claimed, in_window)
    time.sleep(HELD_ANSWER_MS / 1000 + 0.5)  # the emulator is done with the dead call
    [attempt] = ledger.get_run(the_run_id).run.attempts
    assert (attempt.state, attempt.job_name) == (INTENT_STATE, None)

    server.start()
    inside_lease = deliver()
    jobs_inside_lease = len(vertex.jobs(the_run_id))
    age_intent(the_run_id, INTENT_LEASE + INTENT_LEASE / 5)
    after_lease = deliver_until_acknowledged(deliver)

    jobs = vertex.jobs(the_run_id)
    run = ledger.get_run(the_run_id).run
    report(
        f"kill mid-create ({'job made' if job_made_before_kill else 'no job yet'})",
        killed_delivery_saw=seen_by_killed,
        redelivery_inside_lease=inside_lease,
        jobs_inside_lease=jobs_inside_lease,
        redeliveries_after_lease=after_lease,
        create_calls=len(vertex.create_calls(the_run_id)),
        jobs=len(jobs),
    )
    assert seen_by_killed != [200]
    if job_made_before_kill:
        assert (inside_lease, jobs_inside_lease) == (200, 1)  # found by label: reattached
    else:
        assert (inside_lease, jobs_inside_lease) == (500, 0)  # AttemptInProgress
    assert after_lease[-1] == 200
    assert len(jobs) == 1
    assert run.status is RunStatus.SUBMITTED
    assert [(a.number, a.job_name) for a in run.attempts] == [(1, jobs[0]["name"])]
