"""When a marker-less dataset is complete, and what that lets a shard's event skip.

A dataset (``completion: quiet``) is complete when no object under it has been written for
``quiet_for`` and at least ``min_objects`` exist. One fact follows, and both sides lean on it:
**a dataset whose newest object was written at T cannot be complete before T + quiet_for.**

- The reconciler lists a waiting dataset's directory only once that time has passed
  (``worth_listing``): a directory still being written costs no listing per tick.
- Dispatch reads the ledger for the first shard of a dataset it sees, and then skips the read for
  every later shard written before ``horizon`` (``arrival_is_covered``): whichever way the
  reconciler decides, such a shard is in the version it decides on. The proof: the reconciler
  completes a version at time L only if its listing at L, which holds every object written
  before L, shows the newest one at least ``quiet_for`` before L. A shard written at t < H, where
  H is the horizon, was either written before L (then it is in the listing, so in the version),
  or after L, which needs L <= t < H, impossible since nothing known to this instance lets the
  dataset be complete before H. ``HORIZON_MARGIN`` covers the clocks of Cloud Storage and the
  functions not agreeing to the second.
- A listing that found a dataset short of ``min_objects`` holds every object written before it:
  only an object written after it can complete the dataset, and that one must then stay the
  newest for ``quiet_for``. So the next listing worth making is ``quiet_for`` after the listing
  (``quiet_from``), not every tick while the directory stays short.
- Short of ``min_objects`` with nothing written for the config's ``data_timeout`` (counted from
  when the wait began if nothing was written at all), a version is overdue (``data_overdue``).
  One that has its objects but never goes quiet (written to for ever) is not: it is still
  arriving.

Pure: times in, decisions out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from shared.config.model import QuietRule
from shared.decode.datasets import is_folder_object
from shared.decode.routing import glob_regex


class ListedObject(Protocol):
    """An object as a listing of the dataset's directory shows it (``storage.StoredObject``)."""

    @property
    def name(self) -> str: ...
    @property
    def updated(self) -> datetime: ...


@dataclass(frozen=True)
class Tally:
    """A version's objects in one listing: how many, and when the newest was written."""

    objects: int
    newest: datetime | None


def counts(found: ListedObject, match: str) -> bool:
    """Whether a listed object is one of its dataset's: the route's ``match`` matches it and it
    is no folder placeholder (which dispatch ignores too, ``decode.datasets``)."""
    return not is_folder_object(found.name) and glob_regex(match).fullmatch(found.name) is not None


def tally(listed: Iterable[ListedObject], match: str, after: datetime | None = None) -> Tally:
    """What a version is judged on, from a listing of its dataset's directory: the objects of
    the dataset (``counts``: a ``_SUCCESS.crc``, a temporary file or a folder placeholder is
    not), written after ``after`` (the cutoff of the last earlier version that started: its
    objects are not this version's), counted, and the newest one's time."""
    objects = 0
    newest: datetime | None = None
    for found in listed:
        if not counts(found, match) or (after is not None and found.updated <= after):
            continue
        objects += 1
        if newest is None or found.updated > newest:
            newest = found.updated
    return Tally(objects, newest)


HORIZON_MARGIN = timedelta(seconds=15)
"""How much earlier than ``newest + quiet_for`` a shard must be written for dispatch to skip its
read: clocks of Cloud Storage and of the functions may differ by this much."""


def earliest_completion(newest_object: datetime, rule: QuietRule) -> datetime:
    """The first moment a dataset whose newest object was written at ``newest_object`` may be
    complete."""
    return newest_object + rule.quiet_for


def is_complete(
    objects: int, newest_object: datetime | None, now: datetime, rule: QuietRule
) -> bool:
    """Whether a dataset of ``objects`` objects, the newest written at ``newest_object``, is
    complete at ``now``."""
    if newest_object is None or objects < rule.min_objects:
        return False
    return now >= earliest_completion(newest_object, rule)


def worth_listing(newest_seen: datetime | None, now: datetime, rule: QuietRule) -> bool:
    """Whether listing the dataset at ``now`` can find it complete, given the newest object an
    earlier listing saw (None: never listed)."""
    return newest_seen is None or now >= earliest_completion(newest_seen, rule)


def quiet_from(
    objects: int, newest_object: datetime | None, listed_at: datetime, rule: QuietRule
) -> datetime:
    """After a listing at ``listed_at`` found a dataset incomplete (``objects`` objects, the
    newest written at ``newest_object``): the time ``quiet_for`` must pass from before a later
    listing can find it complete (give it to ``worth_listing`` as ``newest_seen``).

    With ``min_objects`` met it is the newest object's time. Short of it, only an object written
    after the listing can complete the dataset, so it is the listing's time (less
    ``HORIZON_MARGIN``: Cloud Storage's clock may be behind ours), or the newest object's time if
    that is later."""
    if newest_object is not None and objects >= rule.min_objects:
        return newest_object
    floor = listed_at - HORIZON_MARGIN
    return floor if newest_object is None else max(floor, newest_object)


def overdue_at(
    objects: int,
    newest_object: datetime | None,
    since: datetime,
    data_timeout: timedelta,
    rule: QuietRule,
) -> datetime | None:
    """When a version that has ``objects`` objects, the newest written at ``newest_object``, and
    has waited since ``since``, is overdue if nothing more is written; None while it has its
    ``min_objects`` (it is then only waiting to go quiet)."""
    if newest_object is not None and objects >= rule.min_objects:
        return None
    last_written = since if newest_object is None else max(since, newest_object)
    return last_written + data_timeout


def data_overdue(
    objects: int,
    newest_object: datetime | None,
    since: datetime,
    now: datetime,
    data_timeout: timedelta,
    rule: QuietRule,
) -> bool:
    """Whether the version has waited too long for its ``min_objects``: nothing written for
    ``data_timeout`` (since the wait began, when nothing was written at all)."""
    deadline = overdue_at(objects, newest_object, since, data_timeout, rule)
    return deadline is not None and now >= deadline


def horizon(written: datetime, rule: QuietRule) -> datetime:
    """After an object written at ``written`` was seen under a waiting dataset: shards written
    before this time belong to the version that is waiting now."""
    return written + rule.quiet_for - HORIZON_MARGIN


def arrival_is_covered(written: datetime | None, known_horizon: datetime | None) -> bool:
    """Whether a shard written at ``written`` is surely in the waiting version whose horizon is
    ``known_horizon`` (so dispatch need not read the ledger for it)."""
    return written is not None and known_horizon is not None and written < known_horizon
