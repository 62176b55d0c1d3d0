"""Objects of a ``completion: quiet`` route through dispatch, on the Firestore emulator.

A quiet dataset's objects start no job in dispatch: the first opens its version's run,
WAITING_DATA, and the others cost no ledger write (and almost no read); the reconciler starts the
run once the directory is quiet (tests/integration/reconcile/test_reconcile_quiet.py). Here the
reconciler's completion is the contract's ledger write (``Ledger.data_ready`` with the cutoff),
so these tests see what dispatch does with objects written after it.

Dispatch runs in this process (``dispatch_event`` with the folder's config plus a quiet route
built in code), against a ledger collection of each test's own, so that what the tests count is
theirs alone: documents, their create and update times, and the ledger calls dispatch made
(counted by a ``Ledger`` that forwards every call to the real one).
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cloudevents.http import CloudEvent
from dispatch_test_support import CONFIG, STORAGE_FINALIZED, AlertsReader, VertexAdmin

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.ledger import Ledger, Run, RunSnapshot, RunStatus
from shared.config.loader import parse_config
from shared.config.model import AfterStart, Completion, GcsRoute, QuietRule
from shared.handlers import quiet_arrivals
from shared.handlers.dispatch import dispatch_event
from shared.handlers.services import Services
from shared.model.data_waits import QuietWait
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.runkeys import dataset_version_run_key, run_id

BUCKET = "dispatch-it-exports"
QUIET_FOR = timedelta(minutes=10)
SHARDS = 10_000
THREADS = 8


class CountingLedger(Ledger):
    """The real ledger, counting the calls dispatch makes to it."""

    def __init__(self, collection: str) -> None:
        super().__init__(clients.firestore_client(LOCAL_PROJECT), collection)
        self.collection_id = collection
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, name: str) -> None:
        with self._lock:
            self.calls[name] += 1

    def get_run(self, run_id: str) -> RunSnapshot | None:
        self._count("get_run")
        return super().get_run(run_id)

    def open_run(self, run: Run) -> tuple[RunSnapshot, bool]:
        self._count("open_run")
        return super().open_run(run)

    def open_dataset_version(self, first: RunSnapshot, run: Run, version: int) -> RunSnapshot:
        self._count("open_dataset_version")
        return super().open_dataset_version(first, run, version)


def quiet_services(ledger: Ledger, after_start: AfterStart) -> Services:
    config = parse_config(CONFIG.read_text(), str(CONFIG), CONFIG.parent)
    route = GcsRoute(
        name=f"exports-{after_start.value}",
        bucket=BUCKET,
        match="exports/**",
        template="flex-a100",
        completion=Completion.QUIET,
        params={"day": "{date}"},
        quiet=QuietRule(
            dataset="exports/{date}/", quiet_for=QUIET_FOR, min_objects=1, after_start=after_start
        ),
    )
    return Services(dataclasses.replace(config, routes=(route, *config.routes)), _ledger=ledger)


@pytest.fixture
def ledger(
    firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]
) -> Iterator[CountingLedger]:
    quiet_arrivals.forget()  # an instance's memory: each test starts as a fresh instance
    yield CountingLedger(fresh_name("quiet-runs"))
    quiet_arrivals.forget()


def shard(name: str, written: datetime, generation: int) -> CloudEvent:
    """The CloudEvent Eventarc sends for ``gs://BUCKET/name``, written at ``written``."""
    stamp = written.isoformat().replace("+00:00", "Z")
    return CloudEvent(
        {
            "type": STORAGE_FINALIZED,
            "source": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
            "subject": f"objects/{name}",
            "id": f"{generation}-1",
            "time": stamp,
        },
        {
            "kind": "storage#object",
            "bucket": BUCKET,
            "name": name,
            "generation": str(generation),
            "metageneration": "1",
            "size": "4096",
            "timeCreated": stamp,
            "updated": stamp,
        },
    )


def version_id(prefix: str, version: int) -> str:
    return run_id(dataset_version_run_key(BUCKET, prefix, version))


def documents(ledger: CountingLedger) -> list[Any]:
    client = clients.firestore_client(LOCAL_PROJECT)
    return list(client.collection(ledger.collection_id).stream())


def deliver_all(services: Services, events: list[CloudEvent]) -> list[DispatchResult]:
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(lambda event: dispatch_event(event, services), events))


def upload(
    directory: str, count: int, start: datetime, max_gap: timedelta, seed: int
) -> tuple[list[CloudEvent], datetime]:
    """Events of ``count`` shards written from ``start`` with random gaps up to ``max_gap``:
    shuffled, a tenth delivered twice; and the newest shard's time."""
    rng = random.Random(seed)
    written = start
    events = []
    for n in range(count):
        written += timedelta(seconds=rng.uniform(0, max_gap.total_seconds()))
        events.append(shard(f"{directory}part-{n:05d}.parquet", written, 1_000_000 + n))
    events += rng.sample(events, count // 10)
    rng.shuffle(events)
    return events, written


def complete(ledger: Ledger, run_id_: str, cutoff: datetime, objects: int) -> RunSnapshot:
    """What the reconciler writes when it finds the version quiet (the contract's write)."""
    snapshot = ledger.get_run(run_id_)
    assert snapshot is not None and isinstance(snapshot.run.data_wait, QuietWait)
    wait = dataclasses.replace(snapshot.run.data_wait, cutoff=cutoff, objects=objects)
    return ledger.data_ready(snapshot, wait, datetime.now(UTC))


def test_ten_thousand_shards_out_of_order_and_twice_open_one_run_with_one_write(
    ledger: CountingLedger, vertex: VertexAdmin, fresh_name: Callable[[str], str]
) -> None:
    services = quiet_services(ledger, AfterStart.IGNORE)
    directory = f"exports/{fresh_name('day')}/"
    # Gaps up to 2 s, all far shorter than quiet_for: about three hours of upload.
    start = datetime.now(UTC) - timedelta(hours=4)
    events, _ = upload(directory, SHARDS, start, timedelta(seconds=2), seed=16)

    results = deliver_all(services, events)

    the_run_id = version_id(directory, 1)
    assert Counter(r.outcome for r in results) == {DispatchOutcome.WAITING_DATA: len(events)}
    assert {r.run_id for r in results} == {the_run_id}
    assert sum("opened" in r.detail for r in results) == 1
    [document] = documents(ledger)
    assert document.id == the_run_id
    assert document.create_time == document.update_time  # created once, never written again
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.WAITING_DATA
    assert run.data_wait == QuietWait(
        dataset_uri=f"gs://{BUCKET}/{directory}",
        version=1,
        since=run.data_wait.since,
        latest_version=1,
    )
    assert run.params["dataset_uri"] == f"gs://{BUCKET}/{directory}"
    assert run.params["day"] == directory.split("/")[1]
    assert run.params["run_id"] == the_run_id
    assert vertex.created_jobs() == []
    # Ledger calls: every delivery that found nothing in the instance's memory read once; one
    # create won, the others (as many as threads raced it) found the run.
    creates = ledger.calls["open_run"]
    assert 1 <= creates <= THREADS
    assert ledger.calls["open_dataset_version"] == 0
    reads = ledger.calls["get_run"]
    print(f"\n{len(events)} deliveries of {SHARDS} shards: {reads} reads, {creates} creates")
    assert reads < len(events) // 100  # the memory answers the rest


def test_after_start_new_run_opens_one_second_version_for_late_objects(
    ledger: CountingLedger, vertex: VertexAdmin, fresh_name: Callable[[str], str]
) -> None:
    services = quiet_services(ledger, AfterStart.NEW_RUN)
    directory = f"exports/{fresh_name('day')}/"
    start = datetime.now(UTC) - timedelta(hours=2)
    events, newest = upload(directory, 300, start, timedelta(seconds=5), seed=3)
    assert {r.outcome for r in deliver_all(services, events)} == {DispatchOutcome.WAITING_DATA}
    first_id, second_id = version_id(directory, 1), version_id(directory, 2)
    complete(ledger, first_id, newest, 300)

    # Written after the reconciler's listing (newest + quiet_for): a new version, opened once
    # whatever the number of objects and deliveries racing for it.
    late_start = newest + QUIET_FOR + timedelta(minutes=1)
    late, late_newest = upload(directory + "late/", 200, late_start, timedelta(seconds=1), seed=4)
    # Written before the cutoff: part of version 1. Placed against the newest version, which
    # waits, they join it: nothing to write either way (the reconciler counts the directory).
    redelivered = events[:50]
    results = deliver_all(services, late + redelivered)

    late_results, old_results = results[: len(late)], results[len(late) :]
    assert {(r.outcome, r.run_id) for r in late_results} == {
        (DispatchOutcome.WAITING_DATA, second_id)
    }
    assert sum("opened" in r.detail for r in late_results) == 1
    assert {(r.outcome, r.run_id) for r in old_results} == {
        (DispatchOutcome.WAITING_DATA, second_id)
    }
    assert sorted(d.id for d in documents(ledger)) == sorted([first_id, second_id])
    first, second = ledger.get_run(first_id).run, ledger.get_run(second_id).run
    assert first.status is RunStatus.ACCEPTED
    assert first.data_wait.latest_version == 2
    assert (first.data_wait.cutoff, first.data_wait.objects) == (newest, 300)
    assert second.status is RunStatus.WAITING_DATA
    assert second.data_wait == QuietWait(
        dataset_uri=f"gs://{BUCKET}/{directory}",
        version=2,
        since=second.data_wait.since,
        latest_version=None,
    )
    assert second.params["run_id"] == second_id
    assert second.params["dataset_uri"] == first.params["dataset_uri"]
    assert ledger.calls["open_dataset_version"] >= 1

    # Version 2 starts in turn; an object after it opens version 3, found from version 1.
    complete(ledger, second_id, late_newest, 200)
    third_written = late_newest + QUIET_FOR + timedelta(minutes=1)
    result = dispatch_event(shard(directory + "again.parquet", third_written, 7), services)
    assert (result.outcome, result.run_id) == (
        DispatchOutcome.WAITING_DATA,
        version_id(directory, 3),
    )
    assert ledger.get_run(first_id).run.data_wait.latest_version == 3
    assert vertex.created_jobs() == []


def test_after_start_ignore_drops_late_objects_without_a_write(
    ledger: CountingLedger, fresh_name: Callable[[str], str]
) -> None:
    services = quiet_services(ledger, AfterStart.IGNORE)
    directory = f"exports/{fresh_name('day')}/"
    events, newest = upload(
        directory, 100, datetime.now(UTC) - timedelta(hours=1), timedelta(seconds=3), seed=5
    )
    deliver_all(services, events)
    first_id = version_id(directory, 1)
    started = complete(ledger, first_id, newest, 100)

    late, _ = upload(
        directory, 100, newest + QUIET_FOR + timedelta(minutes=1), timedelta(seconds=1), seed=6
    )
    results = deliver_all(services, late + events[:10])

    late_results, old_results = results[: len(late)], results[len(late) :]
    assert {(r.outcome, r.run_id) for r in late_results} == {(DispatchOutcome.IGNORED, first_id)}
    assert {(r.outcome, r.run_id) for r in old_results} == {(DispatchOutcome.DUPLICATE, first_id)}
    [document] = documents(ledger)
    assert document.update_time == started.update_time  # nothing written since it started
    assert ledger.get_run(first_id).run.data_wait.latest_version == 1


def test_a_version_that_ended_without_starting_is_closed_and_a_later_object_opens_the_next(
    ledger: CountingLedger, fresh_name: Callable[[str], str]
) -> None:
    services = quiet_services(ledger, AfterStart.IGNORE)  # closed: whatever after_start says
    directory = f"exports/{fresh_name('day')}/"
    events, _ = upload(
        directory, 20, datetime.now(UTC) - timedelta(hours=1), timedelta(seconds=3), seed=7
    )
    deliver_all(services, events)
    first_id = version_id(directory, 1)
    ledger.cancel_waiting(ledger.get_run(first_id))
    # Another instance: this one's memory would still take objects written before its horizon
    # as version 1's (the limit policy.arrivals states for a version cancelled while written).
    quiet_arrivals.forget()

    again = deliver_all(services, events[:5])  # its own objects, delivered again: nothing
    assert {(r.outcome, r.run_id) for r in again} == {(DispatchOutcome.DUPLICATE, first_id)}
    later = shard(directory + "retry-upload.parquet", datetime.now(UTC) + timedelta(minutes=1), 9)
    result = dispatch_event(later, services)
    assert (result.outcome, result.run_id) == (
        DispatchOutcome.WAITING_DATA,
        version_id(directory, 2),
    )
    first = ledger.get_run(first_id).run
    assert (first.status, first.data_wait.latest_version) == (RunStatus.CANCELLED, 2)


def test_an_object_under_no_dataset_directory_is_rejected_and_alerted_once(
    ledger: CountingLedger, alerts: AlertsReader, fresh_name: Callable[[str], str]
) -> None:
    # match takes objects right under exports/, which the dataset pattern does not cover (the
    # loader refuses that; a Config built by hand may not).
    services = quiet_services(ledger, AfterStart.IGNORE)
    name = f"exports/{fresh_name('loose')}.parquet"
    event = shard(name, datetime.now(UTC), 11)

    first, again = dispatch_event(event, services), dispatch_event(event, services)

    assert (first.outcome, again.outcome) == (DispatchOutcome.REJECTED, DispatchOutcome.REJECTED)
    assert first.run_id == again.run_id
    assert "no directory its dataset" in first.detail and name in first.detail
    assert ledger.get_run(first.run_id).run.status is RunStatus.REJECTED
    [alert] = alerts.pull()
    assert alert["body"]["run_id"] == first.run_id
