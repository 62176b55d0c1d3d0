"""Firestore down mid-run, then back on the same address with its data: nothing lost or doubled.

Production Firestore never loses a document, so the fault is an outage with the data kept, not a
wipe (after a wipe a redelivery would rightly create a second job): the test's own emulator is
exported, stopped, and started again on the same ``host:port`` with the export imported
(``FirestoreEmulator.stop_keeping_data`` / ``start_again``). The session's emulator, which other
tests use, is never touched; on_request gets the test's emulator through
``FIRESTORE_EMULATOR_HOST``.

One outage covers every case, in this order:

- before: triggers delivered and acknowledged with Firestore up;
- between the claim and the job record: a create whose answer the Vertex AI emulator holds
  (``when: after`` + ``latency_ms``); Firestore stops while it is held, so the function cannot
  record the job and answers 500. After the restart the redelivery finds the job by its labels
  and reattaches it;
- during: triggers delivered just after the stop. Each must answer 500 (transient: the platform
  delivers it again) once the ledger's bounded retries give up, never 200 without a job, and must
  not take the function down. Firestore stays down until every one of them has answered;
- late: triggers delivered just before the restart, which may ride the outage out inside the
  ledger's retries (200, with a job) or answer 500;
- after: the pending triggers redelivered until acknowledged, new triggers delivered, and the
  "before" triggers delivered again: acknowledged as duplicates with no new create, which only
  holds because the ledger kept its data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from dispatch_test_support import PubSubMessage, VertexAdmin, deliver_push, job_request
from faults_test_support import (
    WAIT_SECONDS,
    FunctionServer,
    deliver_until_acknowledged,
    report,
    wait_for,
)
from google.cloud import firestore

from emulator_stack import (
    LOCAL_PROJECT,
    FirestoreEmulator,
    scoped_environ,
    start_firestore_emulator,
)
from shared.adapters.ledger import CALL_TIMEOUT_SECONDS, INTENT_STATE, Ledger, RunStatus
from shared.model.runkeys import request_run_key, run_id

DATASET = "gs://dispatch-it-datasets/datasets/firestore-outage/"
BEFORE, DURING, LATE, AFTER = 7, 6, 2, 5
HELD_ANSWER_MS = 4000  # long enough to export and stop Firestore (1 s warm) while it is held
# A delivery during the outage gives up once the ledger's call does (CALL_TIMEOUT_SECONDS, plus
# the rest of the delivery); far below the 300 s function timeout, so the platform retries it.
FAIL_FAST_SECONDS = CALL_TIMEOUT_SECONDS + 10.0


@dataclass
class OwnFirestore:
    """The test's own Firestore emulator; ``emulator`` is the current handle across restarts."""

    emulator: FirestoreEmulator
    data_dir: Path

    def stop_keeping_data(self) -> Path:
        return self.emulator.stop_keeping_data(self.data_dir)

    def start_again(self, kept_data: Path) -> None:
        self.emulator = self.emulator.start_again(kept_data)


@pytest.fixture
def own_firestore(tmp_path: Path) -> Iterator[OwnFirestore]:
    own = OwnFirestore(start_firestore_emulator(tmp_path / "firestore"), tmp_path / "kept")
    # The first export of a cold emulator took 13 s on a loaded machine, later ones about 1 s:
    # warm it up so that the outage can start while a create's answer is held.
    own.emulator.export(tmp_path / "warm-up")
    yield own
    own.emulator.stop()


@pytest.fixture
def request_function(
    dispatch_ready: None, own_firestore: OwnFirestore, tmp_path: Path
) -> Iterator[FunctionServer]:
    server = FunctionServer("on_request", tmp_path / "functions", own_firestore.emulator.env)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_ledger(own_firestore: OwnFirestore) -> Ledger:
    with scoped_environ(own_firestore.emulator.env):  # the client reads the address once, here
        return Ledger(firestore.Client(project=LOCAL_PROJECT))


def _timed(deliver: Callable[[], int]) -> tuple[int, float]:
    """The status a delivery got (-1: no answer, the connection failed) and how long it took."""
    started = time.monotonic()
    try:
        status = deliver()
    except Exception:  # a dead server or a broken connection: recorded, then asserted
        status = -1
    return status, time.monotonic() - started


def test_a_firestore_outage_mid_run_loses_and_doubles_nothing(
    own_firestore: OwnFirestore,
    request_function: FunctionServer,
    own_ledger: Ledger,
    vertex: VertexAdmin,
    fresh_name: Callable[[str], str],
) -> None:
    server = request_function

    def new_requests(phase: str, count: int) -> list[PubSubMessage]:
        return [
            job_request(fresh_name(f"fs-{phase}"), "flex-a100", {"dataset_uri": DATASET})
            for _ in range(count)
        ]

    def deliverer(request: PubSubMessage) -> Callable[[], int]:
        return lambda: deliver_push(server.url, request)

    def run_of(request: PubSubMessage) -> str:
        return run_id(request_run_key(request.message_id, None))

    before, during, late, after = (
        new_requests(phase, count)
        for phase, count in (
            ("before", BEFORE),
            ("during", DURING),
            ("late", LATE),
            ("after", AFTER),
        )
    )
    [held] = new_requests("held", 1)

    # Before: Firestore up.
    before_statuses = [deliver_until_acknowledged(deliverer(request)) for request in before]

    # Between the claim and the job record: the job exists, its answer is held; stop Firestore.
    vertex.add_fault(method="CreateCustomJob", count=1, when="after", latency_ms=HELD_ANSWER_MS)
    held_seen: list[tuple[int, float]] = []
    held_delivery = threading.Thread(target=lambda: held_seen.append(_timed(deliverer(held))))
    held_delivery.start()

    def claimed() -> bool:
        snapshot = own_ledger.get_run(run_of(held))
        return snapshot is not None and bool(snapshot.run.attempts)

    wait_for(claimed, "the held trigger's claim")
    wait_for(lambda: bool(vertex.jobs(run_of(held))), "the held trigger's job")
    outage_started = time.monotonic()
    kept_data = own_firestore.stop_keeping_data()
    stop_seconds = time.monotonic() - outage_started

    # During: every delivery must give up with a 500 while Firestore is still down.
    with ThreadPoolExecutor(DURING + LATE) as pool:
        during_seen = [pool.submit(_timed, deliverer(request)) for request in during]
        for future in during_seen:
            future.result()
        held_delivery.join(WAIT_SECONDS + FAIL_FAST_SECONDS)
        # Late: delivered just before the restart; they may ride it out.
        late_seen: list[Future[tuple[int, float]]] = [
            pool.submit(_timed, deliverer(request)) for request in late
        ]
        restart_started = time.monotonic()
        own_firestore.start_again(kept_data)
        restarted = time.monotonic()
        late_results = [future.result() for future in late_seen]
    outage_seconds = restarted - outage_started
    during_results = [future.result() for future in during_seen]

    # After: redeliver what is pending, deliver new triggers, deliver the "before" ones again.
    held_after = deliver_until_acknowledged(deliverer(held))
    recovery_seconds = time.monotonic() - restarted
    pending_after = [
        deliver_until_acknowledged(deliverer(request))
        for request, (status, _) in zip(during + late, during_results + late_results, strict=True)
        if status != 200
    ]
    after_statuses = [deliver_until_acknowledged(deliverer(request)) for request in after]
    before_again = [deliverer(request)() for request in before]

    triggers = [*before, held, *during, *late, *after]
    jobs_per_trigger = {run_of(request): vertex.jobs(run_of(request)) for request in triggers}
    creates_per_trigger = [len(vertex.create_calls(run_of(request))) for request in triggers]
    runs = {the_run_id: own_ledger.get_run(the_run_id) for the_run_id in jobs_per_trigger}
    job_counts = [len(jobs) for jobs in jobs_per_trigger.values()]
    fail_seconds = [round(seconds, 1) for _, seconds in during_results]
    report(
        "firestore outage (data kept)",
        triggers=len(triggers),
        stop_seconds=round(stop_seconds, 1),
        restart_seconds=round(restarted - restart_started, 1),
        outage_seconds=round(outage_seconds, 1),
        recovery_seconds=round(recovery_seconds, 1),
        before=[statuses[-1] for statuses in before_statuses],
        held_seen=[status for status, _ in held_seen],
        held_redelivered=held_after,
        during_seen=[status for status, _ in during_results],
        during_fail_seconds=f"{min(fail_seconds)}-{max(fail_seconds)}",
        late_seen=[status for status, _ in late_results],
        redeliveries_after=sum(len(statuses) for statuses in [*pending_after, held_after]),
        before_again=before_again,
        create_calls=sum(creates_per_trigger),
        jobs=sum(job_counts),
        duplicate_jobs=sum(max(0, n - 1) for n in job_counts),
        lost_triggers=job_counts.count(0),
        ledger_runs=sum(snapshot is not None for snapshot in runs.values()),
    )

    # The outage really was in the window: the held answer came while Firestore was down (so the
    # job could not be recorded), and every "during" delivery answered while it was down.
    assert [status for status, _ in held_seen] == [500], held_seen
    assert all(status == 500 for status, _ in during_results), during_results
    assert max(seconds for _, seconds in during_results) < FAIL_FAST_SECONDS, during_results
    assert all(status in (200, 500) for status, _ in late_results), late_results
    assert server.starts == 1 and server.process is not None and server.process.is_running()
    # Every trigger acknowledged in the end, with exactly one job made by one create.
    for statuses in [*before_statuses, held_after, *pending_after, *after_statuses]:
        assert statuses[-1] == 200, statuses
        assert set(statuses) <= {200, 500}, statuses
    assert before_again == [200] * BEFORE
    assert job_counts == [1] * len(triggers)
    assert creates_per_trigger == [1] * len(triggers)  # the "before" runs survived the restart
    # The ledger records every run, each with its one job.
    for the_run_id, jobs in jobs_per_trigger.items():
        snapshot = runs[the_run_id]
        assert snapshot is not None, the_run_id
        assert snapshot.run.status is RunStatus.SUBMITTED
        assert [(a.number, a.job_name) for a in snapshot.run.attempts] == [(1, jobs[0]["name"])]
        assert snapshot.run.attempts[0].state != INTENT_STATE
