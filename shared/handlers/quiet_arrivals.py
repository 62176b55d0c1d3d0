"""Dispatch's side of a ``completion: quiet`` route: each object opens or joins its dataset.

A quiet dataset's objects carry no marker, so no object starts a job: the first one opens the
run of the dataset's version 1, WAITING_DATA, create-if-absent, and the reconciler
(``shared.handlers.quiet_datasets``) lists the directory until it has been quiet for
``quiet_for`` and starts the run. Where each later object goes is ``shared.policy.arrivals``'
rule; what it costs is the point of this module, since an upload is up to 100,000 objects and
Firestore sustains about one write per second per document:

- an object costs **no ledger write**, except the one that opens a version (version 1's create;
  version N+1's create plus ``latest_version`` on version 1, one atomic batch:
  ``Ledger.open_dataset_version``);
- it costs **no ledger read** when this instance's memory (``ArrivalMemory``) can place it: an
  object written before the horizon of a version the instance saw waiting, or one placed by a
  started version's cutoff; else one read of version 1 (whose ``latest_version`` names the
  newest), and one of the newest when that is not version 1.

Concurrent and repeated deliveries open each version once: version 1 by create-if-absent, the
next ones by the batch's two preconditions; a delivery that loses reads again and joins what the
winner opened. Every answer acknowledges the event (``DispatchOutcome.WAITING_DATA``,
``DUPLICATE`` for an object of a version already started or closed, ``IGNORED`` for a late
object under ``after_start: ignore``); only transient failures raise.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING

from shared.decode import routing
from shared.logs import log
from shared.model.data_waits import QuietWait
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.triggers import ObjectFinalized
from shared.policy.arrivals import (
    Arrival,
    ArrivalMemory,
    answer_from_memory,
    learnt,
    place,
)

if TYPE_CHECKING:
    from shared.adapters.ledger import Run, RunSnapshot
    from shared.handlers.services import Services

logger = logging.getLogger(__name__)

MAX_LOOKS = 5
"""Reads of the dataset one delivery makes while other deliveries keep opening versions (or the
reconciler keeps writing version 1) under it, before it gives up and lets the event come again."""

MEMORY = ArrivalMemory()
"""This instance's memory of the datasets it has seen (``shared.policy.arrivals``)."""


def arrive(
    services: Services, trigger: ObjectFinalized, match: routing.RouteMatch
) -> DispatchResult:
    """Place one delivered object of a quiet route (``match``: its dataset's version 1)."""
    dataset = match.dataset
    assert dataset is not None  # dispatch calls this for quiet routes only
    rule = dataset.rule
    # Cloud Storage's own time of the write (the clock the reconciler's listings and cutoffs
    # use), else the event's; an event with neither is placed as if written now, the latest it
    # can have been, and teaches the memory nothing (a horizon from "now" could overreach).
    object_time = trigger.updated or trigger.event_time
    written = object_time or services.now()
    key = _memory_key(dataset) if object_time is not None else None
    known = MEMORY.get(key) if key is not None else None
    if known is not None:
        answer = answer_from_memory(known, written, rule)
        if answer is not None:
            return _result(answer, known.version, known.run_id, dataset, labels=None)
    for _ in range(MAX_LOOKS):
        result = _look(services, trigger, match, written, key)
        if result is not None:
            return result
    from shared.adapters.ledger import LedgerConflict

    raise LedgerConflict(
        f"dataset {dataset.uri} kept changing under {MAX_LOOKS} looks while placing object "
        f"{trigger.name}; the event is delivered again"
    )


def forget() -> None:
    """Empty this instance's memory (tests that reuse a dataset across ledgers)."""
    MEMORY.forget()


def _look(
    services: Services,
    trigger: ObjectFinalized,
    first_match: routing.RouteMatch,
    written: datetime,
    key: Hashable | None,
) -> DispatchResult | None:
    """One read of the dataset and what it decides; None: it changed under us, look again."""
    from shared.adapters.ledger import LedgerConflict

    dataset = first_match.dataset
    assert dataset is not None
    rule = dataset.rule
    ledger = services.ledger
    first = ledger.get_run(first_match.run_id)
    if first is None:
        first, created = ledger.open_run(_waiting_run(services, trigger, first_match, 1))
        if created:
            return _opened(first, 1, written, key, first_match)
    version = _latest_version(first)
    newest = first
    if version > 1:
        newest_match = routing.dataset_version_match(dataset, version, services.config)
        found = ledger.get_run(newest_match.run_id)
        if found is None:  # the batch writes both or neither: only a deletion gets here
            raise LedgerConflict(
                f"dataset {dataset.uri}: version 1 names version {version} as the newest, "
                f"whose run {newest_match.run_id} is not in the ledger; delivered again"
            )
        newest = found
    arrival = place(newest.run, written, rule)
    remembered = learnt(newest.run, version, written, rule)
    if remembered is not None and key is not None:
        MEMORY.note(key, remembered)
    if arrival is not Arrival.OPENS_NEXT:
        labels = _labels(newest.run)
        return _result(arrival, version, newest.run.run_id, dataset, labels=labels)
    next_match = routing.dataset_version_match(dataset, version + 1, services.config)
    try:
        opened = ledger.open_dataset_version(
            first, _waiting_run(services, trigger, next_match, version + 1), version + 1
        )
    except LedgerConflict:
        return None  # another delivery opened it, or version 1 changed: read again
    return _opened(opened, version + 1, written, key, next_match)


def _latest_version(first: RunSnapshot) -> int:
    wait = first.run.data_wait
    if isinstance(wait, QuietWait) and wait.latest_version:
        return int(wait.latest_version)
    return 1


def _waiting_run(
    services: Services, trigger: ObjectFinalized, match: routing.RouteMatch, version: int
) -> Run:
    from shared.adapters.ledger import Run, RunStatus
    from shared.policy import deadlines, records

    dataset = match.dataset
    assert dataset is not None
    template = services.config.templates.get(match.template)
    # The deadline runs from the object that opened the version, as the data wait does.
    start_deadline = deadlines.start_deadline(
        deadlines.trigger_time(trigger), services.now(), template.start_by if template else None
    )
    return Run(
        run_id=match.run_id,
        run_key=match.run_key,
        route=match.route,
        template=match.template,
        trigger=records.trigger_record(trigger),  # the object that opened the version
        params=dict(match.params),
        status=RunStatus.WAITING_DATA,
        data_wait=QuietWait(
            dataset_uri=dataset.uri,
            version=version,
            since=services.now(),
            latest_version=1 if version == 1 else None,
        ),
        start_deadline=start_deadline,
    )


def _opened(
    snapshot: RunSnapshot,
    version: int,
    written: datetime,
    key: Hashable | None,
    match: routing.RouteMatch,
) -> DispatchResult:
    dataset = match.dataset
    assert dataset is not None
    remembered = learnt(snapshot.run, version, written, dataset.rule)
    if remembered is not None and key is not None:
        MEMORY.note(key, remembered)
    rule = dataset.rule
    log(
        logger,
        logging.INFO,
        "dataset version opened: waiting for it to be quiet",
        labels=_labels(snapshot.run),
        dataset_uri=dataset.uri,
        version=version,
        quiet_for=str(rule.quiet_for),
        min_objects=rule.min_objects,
    )
    return _result(Arrival.JOINS, version, snapshot.run.run_id, dataset, labels=None, opened=True)


def _result(
    arrival: Arrival,
    version: int,
    run_id: str,
    dataset: routing.QuietDataset,
    *,
    labels: dict[str, str] | None,
    opened: bool = False,
) -> DispatchResult:
    rule = dataset.rule
    name = f"version {version} of dataset {dataset.uri}"
    match arrival:
        case Arrival.JOINS:
            what = "opened" if opened else "joined"
            return DispatchResult(
                DispatchOutcome.WAITING_DATA,
                run_id,
                detail=(
                    f"{what} {name}: its run starts once no object under it has been written "
                    f"for {rule.quiet_for} and at least {rule.min_objects} exist"
                ),
            )
        case Arrival.PART_OF:
            return DispatchResult(
                DispatchOutcome.DUPLICATE,
                run_id,
                detail=f"the object was written before {name} started or ended: already in it",
            )
        case _:  # LATE_IGNORED (OPENS_NEXT never reaches here)
            detail = (
                f"the object was written after {name} started; the route's after_start is "
                "ignore, so it starts nothing (new_run would make it a new version)"
            )
            if labels is not None:  # logged on a ledger look only, not per remembered object
                log(logger, logging.INFO, "late object ignored", labels=labels, detail=detail)
            return DispatchResult(DispatchOutcome.IGNORED, run_id, detail=detail)


def _labels(run: Run) -> dict[str, str]:
    return {"run_id": run.run_id, "route": run.route, "template": run.template}


def _memory_key(dataset: routing.QuietDataset) -> Hashable:
    # The rule is part of the key: a config reloaded with another quiet_for or after_start must
    # not be answered from what the old one taught.
    return (dataset.route.name, dataset.rule, dataset.bucket, dataset.prefix)
