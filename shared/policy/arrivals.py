"""Where an object of a quiet dataset goes: into the waiting version, nowhere, or a new version.

Dispatch's side of ``completion: quiet`` (``shared.handlers.quiet_arrivals``). The first object
of a dataset opens version 1's run (WAITING_DATA); every later object is placed against the
dataset's newest version (``place``):

- that version waits (WAITING_DATA): the object **joins** it, at no ledger write: the reconciler
  lists the directory, so no per-object count is kept;
- it started (its ``cutoff``, the newest object's time when the reconciler found it quiet, is
  set): an object written at or before the cutoff is **part of** it (a redelivery, or an event
  later than its listing); a later one is **late**: ``after_start: ignore`` drops it,
  ``new_run`` **opens the next version**;
- it ended without starting (data_timeout, cancelled: terminal, no cutoff) it is closed: an
  object written after it ended opens the next version whatever ``after_start`` says; one
  written before is one of its own, delivered again.

``ArrivalMemory`` is each instance's bounded memory of the datasets it has seen, so that most
objects need no ledger read at all (``answer_from_memory``): an object written before the
horizon of a version this instance saw waiting is in that version (``policy.quiet`` has the
proof), and one of a started version is placed by its cutoff alone, except a late one under
``new_run``, which must read who opened the next version.

The horizon holds against the reconciler (which starts a version only once its directory has
been quiet) and against ``data_timeout`` (which ends one only after nothing was written for
``data_timeout``, longer than ``quiet_for``), but not against an operator's ``cancel``: an
instance that saw the version waiting still takes objects written before its horizon, at most
``quiet_for`` after the newest it saw, as the cancelled version's; the first object after that
(or any object on another instance) opens the next version.

An object is placed against the newest version only: one written before an earlier version's
cutoff but delivered (again) while a later version waits joins the waiting one, which writes
nothing either (the reconciler counts the directory's objects, not the events).

An object whose event carries no time is placed as if written at the moment it is handled: the
latest it can have been written.

Pure: runs and times in, decisions out (the memory holds a lock, no I/O).
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime

from shared.config.model import AfterStart, QuietRule
from shared.model.data_waits import QuietWait
from shared.model.runs import Run, RunStatus
from shared.policy.quiet import arrival_is_covered, horizon


class Arrival(enum.StrEnum):
    """Where one object of a quiet dataset goes."""

    JOINS = "joins"  # the newest version waits: the object is in it, nothing to write
    PART_OF = "part_of"  # written at or before the newest version's start (or end): nothing
    LATE_IGNORED = "late_ignored"  # written after the version started, after_start: ignore
    OPENS_NEXT = "opens_next"  # after_start: new_run, or the version closed: open version N+1


def place(run: Run, written: datetime, rule: QuietRule) -> Arrival:
    """Where an object written at ``written`` goes, given its dataset's newest version ``run``
    (see the module docstring)."""
    wait = run.data_wait
    cutoff = wait.cutoff if isinstance(wait, QuietWait) else None
    if run.status is RunStatus.WAITING_DATA and cutoff is None:
        return Arrival.JOINS
    if cutoff is not None:
        if written <= cutoff:
            return Arrival.PART_OF
        if rule.after_start is AfterStart.NEW_RUN:
            return Arrival.OPENS_NEXT
        return Arrival.LATE_IGNORED
    if run.status.is_terminal():
        # Ended without starting: closed. Its last write is when it ended.
        ended = run.updated_at
        if ended is not None and written <= ended:
            return Arrival.PART_OF
        return Arrival.OPENS_NEXT
    # Past WAITING_DATA without a cutoff (not something the reconciler writes): the run went
    # on with the data it had, and no rule says an object belongs to a next version.
    return Arrival.PART_OF


@dataclass(frozen=True)
class Known:
    """What this instance learnt of a dataset's newest version from its last ledger look."""

    version: int
    run_id: str
    horizon: datetime | None = None  # waiting: objects written before it are in this version
    cutoff: datetime | None = None  # started: objects written until then are in this version


def answer_from_memory(known: Known, written: datetime, rule: QuietRule) -> Arrival | None:
    """Where an object goes when ``known`` alone can tell (no ledger read), else None."""
    if known.horizon is not None:
        return Arrival.JOINS if arrival_is_covered(written, known.horizon) else None
    if known.cutoff is not None:
        if written <= known.cutoff:
            return Arrival.PART_OF
        # Under ignore a started version is the last one: nothing opens another. Under new_run
        # another instance may have opened it: the ledger says.
        return Arrival.LATE_IGNORED if rule.after_start is AfterStart.IGNORE else None
    return None


def learnt(run: Run, version: int, written: datetime, rule: QuietRule) -> Known | None:
    """What to remember after the ledger showed ``run`` as the newest version and an object
    written at ``written`` was placed against it; None: nothing worth remembering."""
    wait = run.data_wait
    if not isinstance(wait, QuietWait):
        return None
    if run.status is RunStatus.WAITING_DATA and wait.cutoff is None:
        # Seen waiting after an object written at ``written``: it cannot be complete before
        # written + quiet_for, so the object and any written before the horizon are in it.
        return Known(version, run.run_id, horizon=horizon(written, rule))
    if wait.cutoff is not None:
        return Known(version, run.run_id, cutoff=wait.cutoff)
    return None


def merged(old: Known | None, new: Known) -> Known:
    """What to remember of a dataset after learning ``new`` where ``old`` was known: looks of
    concurrent events finish in any order, so a newer version wins over an older one, a started
    version's cutoff (final) over a look that saw it still waiting, and of two looks at the same
    waiting version the later horizon."""
    if old is None or new.version > old.version:
        return new
    if old.version > new.version or old.cutoff is not None:
        return old
    if new.cutoff is not None or old.horizon is None:
        return new
    if new.horizon is None or old.horizon >= new.horizon:
        return old
    return new


MEMORY_DATASETS = 4096
"""Datasets an instance remembers (least recently used forgotten first): a few hundred bytes
each, and far more than are ever uploaded at once to one instance."""


class ArrivalMemory:
    """A bounded, thread-safe memory of ``Known`` per dataset (LRU); see the module docstring."""

    def __init__(self, capacity: int = MEMORY_DATASETS) -> None:
        self._capacity = capacity
        self._known: OrderedDict[Hashable, Known] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Known | None:
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
            return known

    def note(self, key: Hashable, known: Known) -> None:
        with self._lock:
            self._known[key] = merged(self._known.get(key), known)
            self._known.move_to_end(key)
            while len(self._known) > self._capacity:
                self._known.popitem(last=False)

    def forget(self) -> None:
        with self._lock:
            self._known.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._known)
