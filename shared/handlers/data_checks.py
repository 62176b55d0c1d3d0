"""The reconciler's checks of runs WAITING_DATA: is their data complete yet, or overdue?

Each tick checks the runs waiting for data among its page of active runs, a few at a time (each
check lists Cloud Storage), each by its kind: a quiet dataset (``quiet_datasets``), a manifest's
missing files (``manifest_waits``); how a wait ends is ``data_waits``'. A check raises nothing: a
failure is counted and logged, and the next tick checks again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters.ledger import LedgerConflict, RunSnapshot, RunStatus
from shared.handlers import manifest_waits, quiet_datasets
from shared.handlers.data_waits import DataCheck
from shared.logs import log
from shared.model.data_waits import QuietWait
from shared.model.errors import DispatchError

if TYPE_CHECKING:
    from shared.handlers.services import Services

CHECK_WORKERS = 8
"""Waiting runs a tick checks at once: each check is mostly waiting for Cloud Storage."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DataWaitReport:
    """What a tick's checks of waiting runs found, for the tick's report line."""

    checked: int = 0
    results: dict[str, int] = field(default_factory=dict)  # per DataCheck value
    errors: tuple[str, ...] = ()


def check_waiting_data(
    services: Services, snapshots: Sequence[RunSnapshot], now: datetime
) -> DataWaitReport:
    """Check every run of ``snapshots`` that waits for data; see the module docstring."""
    waiting = [s for s in snapshots if s.run.status is RunStatus.WAITING_DATA and s.run.data_wait]
    if not waiting:
        return DataWaitReport()
    with ThreadPoolExecutor(CHECK_WORKERS, thread_name_prefix="reconcile-data") as pool:
        outcomes = list(pool.map(lambda snapshot: _check(services, snapshot, now), waiting))
    results: dict[str, int] = {}
    errors: list[str] = []
    for outcome in outcomes:
        if isinstance(outcome, DataCheck):
            results[outcome.value] = results.get(outcome.value, 0) + 1
        else:
            errors.append(outcome)
    return DataWaitReport(checked=len(waiting), results=results, errors=tuple(errors))


def _check(services: Services, snapshot: RunSnapshot, now: datetime) -> DataCheck | str:
    from google.auth.exceptions import GoogleAuthError

    run = snapshot.run
    try:
        if isinstance(run.data_wait, QuietWait):
            return quiet_datasets.check_dataset(services, snapshot, now)
        return manifest_waits.check_manifest(services, snapshot, now)
    except LedgerConflict:
        # Another tick (or an operator) moved the run since this tick read it: the next tick
        # reads it as it is.
        log(logger, logging.INFO, "waiting run moved meanwhile", labels={"run_id": run.run_id})
        return DataCheck.NOT_CHECKED
    except (DispatchError, GoogleAuthError) as error:
        # GoogleAuthError: the function's token could not be refreshed (the metadata server
        # unreachable for a moment): this run is checked again next tick, the others go on.
        what = f"checking the data run {run.run_id} waits for: {error}"
        log(logger, logging.WARNING, "data check failed", labels={"run_id": run.run_id}, error=what)
        return what
