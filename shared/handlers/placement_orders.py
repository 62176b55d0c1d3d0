"""Choosing a run's learned placement order at its first walk (docs/architecture.md, "Learned
placement order"; the rules are ``policy.placement_order``'s).

The history is the template's recent runs (``Ledger.recent_runs``), read at most once per
``PLACEMENT_HISTORY_READ_EVERY`` per template by this instance (``policy.timing``): a busy
instance does not query the ledger per submission. A failed read is logged and the run walks
the chain as written: the order only ranks placements, and a submission never waits on it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping
from datetime import datetime, timedelta

from google.api_core import exceptions as api_exceptions

from shared.adapters.ledger import Ledger
from shared.config.model import Config, Template
from shared.logs import log
from shared.model.errors import DispatchError
from shared.model.runs import Run
from shared.policy.placement_order import LearnedOrder, learn_order, written_order
from shared.policy.records import describe_placement
from shared.policy.timing import PLACEMENT_HISTORY_READ_EVERY

logger = logging.getLogger(__name__)

HISTORY_RUNS = 200  # the newest runs of a template read: a week of several runs an hour

# Per ledger (one per instance) and template: when its recent runs were read, and the runs
# (None: the read failed, and is not tried again before the interval is over either).
_History = dict[str, tuple[datetime, tuple[Run, ...] | None]]
_read: weakref.WeakKeyDictionary[Ledger, _History] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # functions-framework serves requests on threads


def recent_runs(
    ledger: Ledger, template: str, now: datetime, *, labels: Mapping[str, str] | None = None
) -> tuple[Run, ...] | None:
    """``template``'s newest runs, as read by this instance less than
    ``PLACEMENT_HISTORY_READ_EVERY`` ago, else read now; None when they could not be read
    (logged; a failed read is not tried again within the interval either: a ledger without the
    query's index must not cost every submission a failing query)."""
    with _lock:
        cached = _read.get(ledger, {}).get(template)
    if cached is not None and timedelta(0) <= now - cached[0] < PLACEMENT_HISTORY_READ_EVERY:
        return cached[1]
    runs: tuple[Run, ...] | None
    try:
        runs = tuple(snapshot.run for snapshot in ledger.recent_runs(template, limit=HISTORY_RUNS))
    except (DispatchError, api_exceptions.GoogleAPICallError) as error:
        # FailedPrecondition (the composite index missing) reaches here untranslated.
        runs = None
        log(
            logger,
            logging.WARNING,
            "placement history unreadable; learned orders walk the chain as written",
            labels=labels or {},
            template=template,
            error=str(error),
            retry_after_s=PLACEMENT_HISTORY_READ_EVERY.total_seconds(),
        )
    with _lock:
        _read.setdefault(ledger, {})[template] = (now, runs)
    return runs


def choose_order(
    ledger: Ledger,
    config: Config,
    template: Template,
    run: Run,
    *,
    now: datetime,
    labels: Mapping[str, str],
) -> LearnedOrder:
    """The order run ``run`` of ``template`` (``placement_order: learned``) walks its chain in,
    logged with why; the chain as written when the history cannot be read."""
    history = recent_runs(ledger, template.name, now, labels=labels)
    if history is None:
        chosen = written_order(template, "as written: the placement history could not be read")
    else:
        chosen = learn_order(template, config.region, history, run_id=run.run_id, now=now)
    log(
        logger,
        logging.INFO,
        "learned placement order chosen",
        labels=labels,
        placement_order=list(chosen.order),
        explored=chosen.explored,
        reasons=[
            f"{describe_placement(template.placements[index])}: {chosen.reasons[index]}"
            for index in chosen.order
        ],
        history_runs=None if history is None else len(history),
    )
    return chosen
