"""Marker-less datasets (``completion: quiet``), the reconciler's side: is a waiting version quiet?

Dispatch opens one run per dataset version, WAITING_DATA with a ``QuietWait``, on the version's
first object, and writes nothing for the others (``shared.handlers.quiet_arrivals``). Each tick,
``check_dataset`` decides a waiting version from Cloud Storage itself, so the ledger never counts
shards (Firestore sustains about one write per second per document; an upload may be 100,000):

1. the route: the config's route named ``run.route``. Gone, or no longer ``completion: quiet``,
   nothing can say when the dataset is complete any more (a marker route would key its run
   differently): the run ends FAILED with one ``route_gone`` alert naming the route (at once:
   waiting for the route to come back would leave the run waiting unseen for ever);
2. whether a listing can find it complete now (``policy.quiet.worth_listing``), from this
   instance's memory of its last listing (``_memory``): a directory still being written, or
   short of ``min_objects``, costs no listing per tick, one per ``quiet_for`` at most;
3. the listing (``storage.list_objects`` of the dataset's directory, 1,000 objects a call): the
   objects the route's ``match`` matches, written after the cutoff of the dataset's last version
   that started (a version's objects are its own: version 1's do not count towards version 2's
   ``min_objects``), counted, and the newest one's time;
4. complete (``policy.quiet.is_complete``) → ``data_waits.data_ready`` with the wait completed:
   ``cutoff`` the newest object's time (later objects are the next version's, or ignored, by
   ``after_start``), ``objects`` the count. Short of ``min_objects`` with nothing written for the
   config's ``data_timeout`` (``policy.quiet.data_overdue``) → ``data_waits.data_timed_out``.
   Else it waits.

5. with ``after_start: new_run``, once ready, the directory is listed once more: an object
   written after the listing that decided, whose event dispatch handled before the cutoff was
   written, joined the waiting version by dispatch's rule and opened nothing, so the newest such
   object is placed again now, by dispatch's own path (``quiet_arrivals.arrive``), and opens the
   next version (``_open_next_if_late``). Any event handled after the cutoff was written places
   itself.

A version's ledger writes: one to open it (dispatch), one to make it ready (here), then the
first attempt's (claim, job) as any run's. Re-listing is safe: of two ticks (or instances) that
find it complete, one wins the compare-and-set, the other's ``LedgerConflict`` leaves it be.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters import storage
from shared.adapters.ledger import LedgerConflict, RunSnapshot, RunStatus
from shared.config.model import AfterStart, GcsRoute, QuietRule
from shared.decode import routing
from shared.decode.manifests import split_gs_uri
from shared.handlers import data_waits
from shared.handlers.data_waits import DataCheck
from shared.logs import log
from shared.model import runkeys
from shared.model.alerts import AlertReason
from shared.model.data_waits import QuietWait
from shared.model.errors import DispatchError, PermanentError
from shared.model.triggers import ObjectFinalized
from shared.policy import quiet

if TYPE_CHECKING:
    from shared.handlers.services import Services

logger = logging.getLogger(__name__)

MEMORY_RUNS = 10_000
"""Waiting versions whose last listing an instance remembers (a few hundred bytes each). One
forgotten costs one listing more, nothing else."""


@dataclass(frozen=True)
class _Listed:
    """What a version's last listing found, as far as the next tick needs it."""

    quiet_from: datetime  # policy.quiet.quiet_from: no listing finds it complete before + quiet_for
    overdue_at: datetime | None  # policy.quiet.overdue_at: None while it has its min_objects

    def worth_listing(self, now: datetime, rule: QuietRule) -> bool:
        """Whether a listing at ``now`` can find the version complete, or overdue."""
        overdue = self.overdue_at is not None and now >= self.overdue_at
        return overdue or quiet.worth_listing(self.quiet_from, now, rule)


class _Memory:
    """A bounded, thread-safe memory of the last listing of each waiting version (by run id),
    least recently used first out. The tick's checks run in threads (``data_checks``)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._listed: OrderedDict[str, _Listed] = OrderedDict()
        self._floors: OrderedDict[str, datetime | None] = OrderedDict()

    def get(self, run_id: str) -> _Listed | None:
        with self._lock:
            listed = self._listed.get(run_id)
            if listed is not None:
                self._listed.move_to_end(run_id)
            return listed

    def put(self, run_id: str, listed: _Listed) -> None:
        with self._lock:
            self._listed[run_id] = listed
            self._listed.move_to_end(run_id)
            while len(self._listed) > self._size:
                self._listed.popitem(last=False)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._listed.pop(run_id, None)
            self._floors.pop(run_id, None)

    def floor(self, run_id: str) -> tuple[bool, datetime | None]:
        """(known, floor): the earlier versions' cutoff this version's objects come after."""
        with self._lock:
            if run_id in self._floors:
                return True, self._floors[run_id]
            return False, None

    def put_floor(self, run_id: str, floor: datetime | None) -> None:
        with self._lock:
            self._floors[run_id] = floor
            while len(self._floors) > self._size:
                self._floors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._listed.clear()
            self._floors.clear()


_memory = _Memory(MEMORY_RUNS)


def check_dataset(services: Services, snapshot: RunSnapshot, now: datetime) -> DataCheck:
    """Whether the dataset version ``snapshot`` waits for is complete at ``now``; when it is,
    the run is made ready (``data_waits.data_ready``). See the module docstring."""
    run = snapshot.run
    wait = run.data_wait
    if run.status is not RunStatus.WAITING_DATA or not isinstance(wait, QuietWait):
        return DataCheck.NOT_CHECKED
    labels = {"run_id": run.run_id, "route": run.route, "template": run.template}
    route = quiet_route(services, run.route)
    if route is None or route.quiet is None:
        _route_gone(services, snapshot, wait, route)
        _memory.forget(run.run_id)
        return DataCheck.ENDED
    rule = route.quiet
    timeout = services.config.data_timeout
    remembered = _memory.get(run.run_id)
    if remembered is not None and not remembered.worth_listing(now, rule):
        return DataCheck.NOT_CHECKED
    bucket, prefix = dataset_location(wait.dataset_uri)
    try:
        tally = count_version(services, run.run_id, route, wait, bucket, prefix)
    except PermanentError as error:
        # A bucket deleted, or the grant taken away: every tick fails the same way, so the wait
        # ends when it would have, by data_timeout, saying why.
        if now < wait.since + timeout:
            raise
        _timed_out(services, snapshot, wait, now, f"its directory cannot be listed: {error}")
        return DataCheck.TIMED_OUT
    if quiet.is_complete(tally.objects, tally.newest, now, rule):
        completed = replace(wait, cutoff=tally.newest, objects=tally.objects)
        try:
            data_waits.mark_ready(services, snapshot, completed, now)
        except LedgerConflict:
            # Another tick made it ready, or an operator cancelled it: the next tick reads it.
            log(logger, logging.INFO, "quiet dataset moved meanwhile", labels=labels)
            return DataCheck.NOT_CHECKED
        finally:
            _memory.forget(run.run_id)
        log(
            logger,
            logging.INFO,
            "quiet dataset complete",
            labels=labels,
            dataset_uri=wait.dataset_uri,
            version=wait.version,
            objects=tally.objects,
            cutoff=completed.cutoff.isoformat() if completed.cutoff else None,
        )
        # Step 5 before the publish: a publish that fails is published again by the recovery,
        # but nothing would look for this version's late objects again.
        if rule.after_start is AfterStart.NEW_RUN and tally.newest is not None:
            _open_next_if_late(services, route, bucket, prefix, tally.newest, labels)
        data_waits.publish_first_attempt(services, run.run_id, now)
        return DataCheck.READY

    if quiet.data_overdue(tally.objects, tally.newest, wait.since, now, timeout, rule):
        newest = tally.newest.isoformat() if tally.newest else "none"
        _timed_out(
            services,
            snapshot,
            wait,
            now,
            f"{tally.objects} of the {rule.min_objects} objects (min_objects) it needs are under "
            f"{wait.dataset_uri} (the newest written at {newest})",
        )
        _memory.forget(run.run_id)
        return DataCheck.TIMED_OUT
    _memory.put(
        run.run_id,
        _Listed(
            quiet_from=quiet.quiet_from(tally.objects, tally.newest, now, rule),
            overdue_at=quiet.overdue_at(tally.objects, tally.newest, wait.since, timeout, rule),
        ),
    )
    return DataCheck.WAITING


def _open_next_if_late(
    services: Services,
    route: GcsRoute,
    bucket: str,
    prefix: str,
    cutoff: datetime,
    labels: dict[str, str],
) -> None:
    """Place the newest object written after ``cutoff`` as dispatch would (step 5 of the module
    docstring): it opens the next version. A failure is logged: the run is ready either way, and
    the next late object's own event opens the version."""
    from shared.handlers import quiet_arrivals

    try:
        late = [
            found
            for found in storage.list_objects(bucket, prefix)
            if found.updated > cutoff and quiet.counts(found, route.match)
        ]
        if not late:
            return
        newest = max(late, key=lambda found: found.updated)
        trigger = ObjectFinalized(
            bucket=bucket,
            name=newest.name,
            generation=newest.generation,
            metageneration=1,
            size=newest.size,
            event_id=f"reconcile-late:{bucket}/{newest.name}#{newest.generation}",
            event_time=newest.updated,
        )
        match = routing.route(trigger, services.config)
        if match is not None and match.dataset is not None:
            result = quiet_arrivals.arrive(services, trigger, match)
            log(
                logger,
                logging.INFO,
                "object written while the dataset was found quiet: placed again",
                labels=labels,
                object=newest.name,
                outcome=result.outcome.value,
                placed_in=result.run_id,
            )
    except DispatchError as error:
        log(
            logger,
            logging.WARNING,
            "objects written while the dataset was found quiet were not placed again",
            labels=labels,
            error=str(error),
        )


def quiet_route(services: Services, name: str) -> GcsRoute | None:
    """The config's route named ``name`` if it is a ``gcs`` route (quiet or no longer), else
    None."""
    for route in services.config.routes:
        if route.name == name and isinstance(route, GcsRoute):
            return route
    return None


def dataset_location(dataset_uri: str) -> tuple[str, str]:
    """``gs://BUCKET/PREFIX/`` → (bucket, prefix), the prefix ending in ``/`` (so that listing
    ``exports/d1/`` never takes in ``exports/d10/``)."""
    bucket, prefix = split_gs_uri(dataset_uri)
    return bucket, prefix if prefix.endswith("/") else f"{prefix}/"


def count_version(
    services: Services, run_id: str, route: GcsRoute, wait: QuietWait, bucket: str, prefix: str
) -> quiet.Tally:
    """List the dataset's directory: the objects of version ``wait.version`` the route's
    ``match`` matches (written after the last earlier version that started took its objects)."""
    floor = _floor(services, run_id, wait, bucket, prefix)
    return quiet.tally(storage.list_objects(bucket, prefix), route.match, after=floor)


def _floor(
    services: Services, run_id: str, wait: QuietWait, bucket: str, prefix: str
) -> datetime | None:
    """The cutoff of the newest earlier version that started (its objects are not this
    version's), or None for version 1 or when none started (a version that timed out took no
    objects: they count towards the next one). Read once per instance: a cutoff never changes."""
    if wait.version <= 1:
        return None
    known, floor = _memory.floor(run_id)
    if known:
        return floor
    for version in range(wait.version - 1, 0, -1):
        earlier = services.ledger.get_run(
            runkeys.run_id(runkeys.dataset_version_run_key(bucket, prefix, version))
        )
        earlier_wait = earlier.run.data_wait if earlier is not None else None
        if isinstance(earlier_wait, QuietWait) and earlier_wait.cutoff is not None:
            floor = earlier_wait.cutoff
            break
    _memory.put_floor(run_id, floor)
    return floor


def _timed_out(
    services: Services, snapshot: RunSnapshot, wait: QuietWait, now: datetime, missing: str
) -> None:
    data_waits.data_timed_out(
        services,
        snapshot,
        now,
        missing=missing,
        what_to_do=(
            f"upload the rest of the dataset under {wait.dataset_uri}: the next object written "
            "there opens a new version of it, which waits to be quiet again (a version that "
            "never completed is not retried: its objects belong to the next one)"
        ),
    )


def _route_gone(
    services: Services, snapshot: RunSnapshot, wait: QuietWait, route: GcsRoute | None
) -> None:
    """End a waiting version whose route left the config (or is no longer quiet): FAILED, one
    ``route_gone`` alert. Nothing could tell when its dataset is complete any more."""
    run = snapshot.run
    why = (
        "which the config no longer has"
        if route is None
        else f"which no longer has completion: quiet (it has {route.completion.value})"
    )
    data_waits.end_data_wait(
        services,
        snapshot,
        reason=AlertReason.ROUTE_GONE,
        message=(
            f"run {run.run_id} waited for the dataset {wait.dataset_uri} to be quiet under route "
            f"{run.route!r}, {why}: nothing can tell when the dataset is complete"
        ),
        what_to_do=(
            f"restore route {run.route!r} with completion: quiet, then write an object under "
            f"{wait.dataset_uri}: it opens a new version of the dataset, which waits to be quiet"
        ),
    )
