"""The reconciler starts a marker-less dataset's run once its directory is quiet (issue 16).

The Cloud Storage emulator holds the objects; their ``updated`` times are its (real) clock. Runs
are opened WAITING_DATA directly through the ledger, as dispatch opens them on a dataset's first
object. Each tick is given a ``now`` relative to the newest object's time instead of sleeping
through ``quiet_for``; the test's clock (the ledger's and dispatch's), which starts at the real
time, is moved to that ``now`` first, so it agrees with Cloud Storage's. (The Vertex AI
emulator's frozen clock cannot serve: the folder's earlier tests moved it hours ahead, and it
never goes back.) A run made ready goes on as any first attempt: its retry message is pulled
from the requests topic and delivered to dispatch, which creates its job on the Vertex AI
emulator.

The ledger counts its writes per run (``CountingLedger``: the real ledger, counting the
create and the compare-and-set updates that succeeded) for the issue's "ledger writes per dataset"
figure, printed with ``-s``.
"""

from __future__ import annotations

import http.client
import math
import random
import urllib.parse
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cloudevents.http import CloudEvent
from reconcile_test_support import World, of_run

from emulator_stack import LOCAL_PROJECT, StorageEmulator
from shared.adapters import clients, storage
from shared.adapters.ledger import Ledger, Run, RunSnapshot, RunStatus
from shared.config.model import AfterStart, Completion, GcsRoute, QuietRule
from shared.handlers import quiet_datasets
from shared.handlers.data_waits import DataCheck
from shared.handlers.dispatch import dispatch_event
from shared.handlers.reconcile import ReconcileReport, reconcile
from shared.handlers.services import Services
from shared.model import runkeys
from shared.model.alerts import AlertReason
from shared.model.data_waits import QuietWait
from shared.model.results import DispatchOutcome
from shared.model.triggers import ObjectFinalized
from shared.policy import records

SHARDS = 2_000
"""Objects of the big dataset: two listing pages. Not the issue's 10,000: the Cloud Storage
emulator writes about 50 objects a second here (2 shared cores), so 10,000 would take over three
minutes; what a listing costs grows by one call per 1,000 objects, not by a ledger write."""
QUIET_FOR = timedelta(minutes=1)  # MIN_QUIET_FOR: the shortest a route may set
DATA_TIMEOUT = timedelta(hours=1)
ROUTE = "quiet-exports"
DATE = "2026-12-01"
PREFIX = f"exports/{DATE}/"
SECOND = timedelta(seconds=1)


class CountingLedger(Ledger):
    """The real ledger, counting per run the writes that happened (a create that found the run
    already there, or an update whose precondition failed, wrote nothing)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []  # (run id, status written), in order

    def open_run(self, run: Run) -> tuple[RunSnapshot, bool]:
        snapshot, created = super().open_run(run)
        self.writes[run.run_id] += created
        return snapshot, created

    def _write_if_unchanged(self, current: RunSnapshot, changed: Run) -> RunSnapshot:
        written = super()._write_if_unchanged(current, changed)
        self.writes[current.run.run_id] += 1
        self.log.append((current.run.run_id, changed.status.value))
        return written


class HandClock:
    """The real time when made; then only ``move_to`` moves it (forward)."""

    def __init__(self) -> None:
        self._now = datetime.now(UTC)

    def now(self) -> datetime:
        return self._now

    def move_to(self, moment: datetime) -> None:
        self._now = max(self._now, moment)


@dataclass
class Quiet:
    """A world whose config has a quiet route on a bucket of its own."""

    world: World
    ledger: CountingLedger
    bucket: Any  # google.cloud.storage.Bucket
    clock: HandClock
    storage_url: str

    @property
    def services(self) -> Services:
        return self.world.services

    def with_route(self, route: GcsRoute | None) -> None:
        """The config with ``route`` as the quiet route (None: without it)."""
        config = self.services.config
        others = tuple(r for r in config.routes if r.name != ROUTE)
        routes = others if route is None else (*others, route)
        self.world.services = replace(self.services, config=replace(config, routes=routes))

    def with_rule(self, min_objects: int, after_start: AfterStart = AfterStart.IGNORE) -> None:
        """The quiet route with its own ``min_objects`` and ``after_start``."""
        self.with_route(quiet_route(self.bucket.name, min_objects, after_start))

    def upload(self, names: Sequence[str]) -> datetime:
        """Write ``names``, in order; the newest ``updated`` under the dataset then.

        Straight to the emulator's upload endpoint on one kept-alive connection: the client
        library's multipart upload, or several at once, is slower on this emulator."""
        address = urllib.parse.urlsplit(self.storage_url)
        connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
        try:
            for name in names:
                quoted = urllib.parse.quote(name, safe="")
                connection.request(
                    "POST",
                    f"/upload/storage/v1/b/{self.bucket.name}/o?uploadType=media&name={quoted}",
                    body=name.encode(),
                    headers={"Content-Type": "application/octet-stream"},
                )
                response = connection.getresponse()
                response.read()
                assert response.status == 200, f"uploading {name}: HTTP {response.status}"
        finally:
            connection.close()
        return max(found.updated for found in storage.list_objects(self.bucket.name, PREFIX))

    def open_waiting(self, version: int = 1) -> str:
        """Version ``version`` of the dataset opened WAITING_DATA, as dispatch opens it."""
        bucket = self.bucket.name
        key = runkeys.dataset_version_run_key(bucket, PREFIX, version)
        run_id = runkeys.run_id(key)
        dataset_uri = f"gs://{bucket}/{PREFIX}"
        first = ObjectFinalized(
            bucket=bucket,
            name=f"{PREFIX}part-00000.parquet",
            generation=1,
            metageneration=1,
            size=10,
            event_id=f"first-of-{run_id}",
            event_time=self.clock.now(),
        )
        self.ledger.open_run(
            Run(
                run_id=run_id,
                run_key=key,
                route=ROUTE,
                template="flex-a100",
                trigger=records.trigger_record(first),
                params={
                    "run_id": run_id,
                    "bucket": bucket,
                    "dirname": PREFIX.rstrip("/"),
                    "dataset_uri": dataset_uri,
                    "date": DATE,
                },
                status=RunStatus.WAITING_DATA,
                data_wait=QuietWait(
                    dataset_uri=dataset_uri,
                    version=version,
                    since=self.clock.now(),
                    latest_version=version if version == 1 else None,
                ),
            )
        )
        return run_id

    def tick(self, now: datetime) -> ReconcileReport:
        """A reconcile tick at ``now``, every clock of the test moved there first."""
        self.clock.move_to(now)
        return reconcile(self.services, now)

    def start_published(self, run_id: str) -> list[Any]:
        """Deliver the retries published for ``run_id`` to dispatch; their results."""
        return self.world.deliver_retries(of_run(self.world.retries.pull(), run_id))


def quiet_route(
    bucket: str, min_objects: int = 1, after_start: AfterStart = AfterStart.IGNORE
) -> GcsRoute:
    return GcsRoute(
        name=ROUTE,
        bucket=bucket,
        match="exports/*/part-*",
        template="flex-a100",
        completion=Completion.QUIET,
        quiet=QuietRule(
            dataset="exports/{date}/",
            quiet_for=QUIET_FOR,
            min_objects=min_objects,
            after_start=after_start,
        ),
    )


@pytest.fixture
def quiet(
    world: World,
    storage_emulator: StorageEmulator,
    fresh_name: Callable[[str], str],
) -> Quiet:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("quiet"))
    clock = HandClock()
    ledger = CountingLedger(
        clients.firestore_client(LOCAL_PROJECT), fresh_name("runs"), clock=clock.now
    )
    config = replace(world.services.config, data_timeout=DATA_TIMEOUT)
    services = Services(config, now=clock.now, _ledger=ledger)
    setup = Quiet(replace(world, services=services), ledger, bucket, clock, storage_emulator.url)
    setup.with_route(quiet_route(bucket.name))
    return setup


def shards(count: int, start: int = 0) -> list[str]:
    names = [f"{PREFIX}part-{n:05d}.parquet" for n in range(start, start + count)]
    return names[::-1]  # written out of order


def test_thousands_of_objects_start_exactly_one_job_once_quiet_for_passed(
    quiet: Quiet, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = quiet.open_waiting()
    newest = quiet.upload(shards(SHARDS))
    # Not the route's match: counted neither as an object nor as the newest.
    quiet.upload([f"{PREFIX}_SUCCESS.crc"])
    assert quiet.ledger.writes[run_id] == 1  # thousands of objects, no write but dispatch's open

    early = quiet.tick(newest + QUIET_FOR / 2)  # lists them all: not quiet yet
    later = quiet.tick(newest + QUIET_FOR - SECOND)  # remembers the newest: no listing
    assert early.data_waits == {DataCheck.WAITING.value: 1}
    assert later.data_waits == {DataCheck.NOT_CHECKED.value: 1}
    assert quiet.world.retries.pull() == []
    assert quiet.world.run(run_id).status is RunStatus.WAITING_DATA

    quiet_tick = quiet.tick(newest + QUIET_FOR)
    [started] = quiet.start_published(run_id)
    writes = quiet.ledger.writes[run_id]  # from the first object to the job

    assert quiet_tick.data_waits == {DataCheck.READY.value: 1}
    assert started.outcome is DispatchOutcome.SUBMITTED
    run = quiet.world.run(run_id)
    assert run.data_wait == replace(run.data_wait, cutoff=newest, objects=SHARDS)
    [create] = quiet.world.creates(run_id)
    args = create["request"]["customJob"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert args == [f"--data=gs://{quiet.bucket.name}/{PREFIX}"]
    after = quiet.tick(newest + QUIET_FOR + SECOND)
    assert after.data_waits_checked == 0  # no longer waiting for data
    assert quiet.start_published(run_id) == []
    # Open (dispatch), ready (the tick), then the first attempt's claim and job (dispatch).
    assert writes == 4, quiet.ledger.log
    listings = sum(
        report.data_waits.get(DataCheck.WAITING.value, 0)
        + report.data_waits.get(DataCheck.READY.value, 0)
        for report in (early, later, quiet_tick)
    )
    with capsys.disabled():
        print(
            f"\nquiet dataset of {SHARDS} objects: {writes} ledger writes from first object to "
            f"job; {listings} listings of {math.ceil(SHARDS / storage.LIST_PAGE_SIZE)} calls "
            "each from the first tick to the run's start"
        )


def test_a_pause_longer_than_quiet_for_short_of_min_objects_starts_nothing(
    quiet: Quiet,
) -> None:
    quiet.with_rule(min_objects=5)
    run_id = quiet.open_waiting()
    newest = quiet.upload(shards(3))

    paused = newest + 3 * QUIET_FOR
    short = quiet.tick(paused)
    between = quiet.tick(paused + QUIET_FOR / 2)  # no listing: only a newer object can help

    assert short.data_waits == {DataCheck.WAITING.value: 1}
    assert between.data_waits == {DataCheck.NOT_CHECKED.value: 1}
    assert quiet.world.retries.pull() == []
    assert quiet.world.run(run_id).status is RunStatus.WAITING_DATA

    rest = quiet.upload(shards(2, start=3))  # the upload resumes
    done = quiet.tick(max(rest, paused) + QUIET_FOR)
    [started] = quiet.start_published(run_id)

    assert done.data_waits == {DataCheck.READY.value: 1}
    assert started.outcome is DispatchOutcome.SUBMITTED
    assert quiet.world.run(run_id).data_wait.objects == 5
    assert len(quiet.world.creates(run_id)) == 1


def test_short_of_min_objects_for_data_timeout_ends_failed_with_one_alert(quiet: Quiet) -> None:
    quiet.with_rule(min_objects=5)
    run_id = quiet.open_waiting()
    newest = quiet.upload(shards(2))

    before = quiet.tick(newest + DATA_TIMEOUT - SECOND)
    overdue = quiet.tick(newest + DATA_TIMEOUT)
    again = quiet.tick(newest + DATA_TIMEOUT + QUIET_FOR)

    assert before.data_waits == {DataCheck.WAITING.value: 1}
    assert overdue.data_waits == {DataCheck.TIMED_OUT.value: 1}
    assert again.data_waits_checked == 0
    run = quiet.world.run(run_id)
    assert run.status is RunStatus.FAILED
    [alert] = of_run(quiet.world.alerts.pull(), run_id)
    assert alert.body()["reason"] == AlertReason.DATA_TIMEOUT
    assert "2 of the 5 objects (min_objects)" in alert.body()["message"]
    assert PREFIX in alert.body()["what_to_do"]
    assert quiet.world.retries.pull() == []
    assert quiet.world.creates(run_id) == []


def test_a_second_version_counts_only_the_objects_written_after_the_first_started(
    quiet: Quiet,
) -> None:
    quiet.with_rule(min_objects=3, after_start=AfterStart.NEW_RUN)
    first = quiet.open_waiting()
    newest = quiet.upload(shards(3))
    assert quiet.tick(newest + QUIET_FOR).data_waits == {DataCheck.READY.value: 1}
    cutoff = quiet.world.run(first).data_wait.cutoff
    assert cutoff == newest

    late = quiet.upload(shards(2, start=3))  # written after version 1 started
    second = quiet.open_waiting(version=2)  # as dispatch opens it for the first late object
    short = quiet.tick(late + QUIET_FOR)  # 5 objects under it, 2 of them version 2's
    last = quiet.upload(shards(1, start=5))
    done = quiet.tick(max(last, late + QUIET_FOR) + QUIET_FOR)

    assert short.data_waits == {DataCheck.WAITING.value: 1}
    assert done.data_waits == {DataCheck.READY.value: 1}
    version_2 = quiet.world.run(second).data_wait
    assert (version_2.version, version_2.objects, version_2.cutoff) == (2, 3, last)
    messages = quiet.world.retries.pull()
    assert {m.body()["run_id"] for m in messages} == {first, second}


def test_a_run_whose_route_left_the_config_ends_failed_with_one_route_gone_alert(
    quiet: Quiet,
) -> None:
    run_id = quiet.open_waiting()
    newest = quiet.upload(shards(3))
    quiet.with_route(None)

    gone = quiet.tick(newest + QUIET_FOR)
    again = quiet.tick(newest + 2 * QUIET_FOR)

    assert gone.data_waits == {DataCheck.ENDED.value: 1}
    assert again.data_waits_checked == 0
    assert quiet.world.run(run_id).status is RunStatus.FAILED
    [alert] = of_run(quiet.world.alerts.pull(), run_id)
    assert alert.body()["reason"] == AlertReason.ROUTE_GONE
    assert repr(ROUTE) in alert.body()["message"]
    assert quiet.world.retries.pull() == []


def test_an_object_written_while_the_dataset_was_found_quiet_opens_the_next_version(
    quiet: Quiet,
) -> None:
    # The race of step 5 (handlers/quiet_datasets.py): the tick's listing found version 1 quiet
    # with its newest object at `cutoff`; an object written just after that listing had its
    # event handled before the cutoff was written, so dispatch saw version 1 waiting, joined it,
    # and opened nothing. Here the listing is the upload's return and the late object's event is
    # never delivered: the tick's second listing is all that can place it.
    quiet.with_rule(min_objects=3, after_start=AfterStart.NEW_RUN)
    first = quiet.open_waiting()
    cutoff = quiet.upload(shards(3))
    late_written = quiet.upload(shards(1, start=3))
    quiet.clock.move_to(late_written + QUIET_FOR)
    snapshot = quiet.ledger.get_run(first)
    assert snapshot is not None and isinstance(snapshot.run.data_wait, QuietWait)
    completed = replace(snapshot.run.data_wait, cutoff=cutoff, objects=3)
    quiet.ledger.data_ready(snapshot, completed, quiet.clock.now())

    quiet_datasets._open_next_if_late(  # what check_dataset does right after data_ready
        quiet.services, quiet.services.config.routes[-1], quiet.bucket.name, PREFIX, cutoff, {}
    )

    second = runkeys.run_id(runkeys.dataset_version_run_key(quiet.bucket.name, PREFIX, 2))
    version_2 = quiet.world.run(second)
    assert version_2.status is RunStatus.WAITING_DATA
    assert version_2.data_wait == QuietWait(
        dataset_uri=f"gs://{quiet.bucket.name}/{PREFIX}",
        version=2,
        since=quiet.clock.now(),
    )
    assert quiet.world.run(first).data_wait.latest_version == 2
    assert version_2.trigger["name"] == f"{PREFIX}part-00003.parquet"


def finalized(bucket: str, found: storage.StoredObject) -> CloudEvent:
    """The event Eventarc sends for a listed object (int64s as strings, times RFC 3339)."""
    updated = found.updated.isoformat().replace("+00:00", "Z")
    return CloudEvent(
        {
            "type": "google.cloud.storage.object.v1.finalized",
            "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
            "subject": f"objects/{found.name}",
            "id": f"{bucket}/{found.name}/{found.generation}",
            "time": updated,
        },
        {
            "bucket": bucket,
            "name": found.name,
            "generation": str(found.generation),
            "metageneration": "1",
            "size": str(found.size),
            "updated": updated,
        },
    )


def test_shards_delivered_out_of_order_and_twice_make_one_run_once_quiet(quiet: Quiet) -> None:
    # The whole path on the emulators, dispatch included: the objects are in the Cloud
    # Storage emulator, their events go to dispatch (shuffled, a tenth of them twice, 8 at a
    # time), and the ticks decide. 300 objects: the emulator's uploads slow down as a bucket
    # grows (10,000 did not finish in 20 minutes here); dispatch alone takes 10,000 shard
    # events in test_dispatch_quiet.py, the reconciler alone 2,000 objects above.
    count = 300
    newest = quiet.upload(shards(count))
    listed = list(storage.list_objects(quiet.bucket.name, PREFIX))
    events = [finalized(quiet.bucket.name, found) for found in listed]
    rng = random.Random(16)
    deliveries = events + rng.sample(events, len(events) // 10)
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda e: dispatch_event(e, quiet.services), deliveries))

    run_id = runkeys.run_id(runkeys.dataset_version_run_key(quiet.bucket.name, PREFIX, 1))
    assert {result.outcome for result in results} == {DispatchOutcome.WAITING_DATA}
    assert {result.run_id for result in results} == {run_id}
    assert quiet.ledger.writes[run_id] == 1  # opened once; no shard wrote anything more
    assert quiet.world.run(run_id).status is RunStatus.WAITING_DATA

    early = quiet.tick(newest + QUIET_FOR - SECOND)  # the last shard is not a minute old
    assert early.data_waits == {DataCheck.WAITING.value: 1}
    assert quiet.world.retries.pull() == []

    done = quiet.tick(newest + QUIET_FOR)
    [started] = quiet.start_published(run_id)

    assert done.data_waits == {DataCheck.READY.value: 1}
    assert started.outcome is DispatchOutcome.SUBMITTED
    assert quiet.world.run(run_id).data_wait.objects == count
    assert len(quiet.world.creates(run_id)) == 1
    assert quiet.ledger.writes[run_id] == 4  # open, ready, claim, job
