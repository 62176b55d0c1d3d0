"""What ``vertex-dispatch status`` says about a run WAITING_DATA: the data it waits for, and when
it will have it.

- A quiet dataset (``QuietWait``): the ledger keeps no per-shard count on purpose (a shard's
  event writes nothing, ``shared.policy.quiet``), so the CLI lists the dataset's directory in
  Cloud Storage itself, LIVE, and counts with the reconciler's own function
  (``quiet_datasets.count_version``: the objects the route's ``match`` matches, written after
  an earlier version's cutoff, and the newest one's write time). It then says when the dataset
  will be complete by the one rule (``policy.quiet``): at ``newest + quiet_for`` if nothing more is
  written, or that it needs N more objects (``min_objects``), and when it gives up
  (``policy.quiet.overdue_at``, the reconciler's own deadline: ``data_timeout`` after the later of
  its newest object and the start of its wait).
- A manifest (``ManifestWait``): what the reconciler's last check recorded (files missing of
  total, the first few of them), and when it gives up (``data_timeout`` after the wait began).

When Cloud Storage cannot be read (no grant, no credentials for it, the bucket gone), the run is
shown from the ledger alone and the line says why it was not counted: ``status`` never fails for
that. A listing costs one call per 1,000 objects (``storage.LIST_PAGE_SIZE``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from shared.config.model import GcsRoute, QuietRule
from shared.model.data_waits import ManifestWait, QuietWait
from shared.model.runs import RunStatus
from shared.policy import quiet
from shared.policy.quiet import Tally

if TYPE_CHECKING:
    from shared.adapters.ledger import Ledger, Run
    from shared.config.model import Config

MISSING_SHOWN: Final = 3
"""A waiting manifest's missing files the table names; ``--json`` has all the ledger keeps."""
LISTING_WORKERS: Final = 4
"""Datasets listed at once: each listing mostly waits for Cloud Storage."""


@dataclass(frozen=True)
class WaitView:
    """What ``status`` shows about one run's data wait: lines under its row, and a JSON map."""

    lines: tuple[str, ...]
    document: Mapping[str, Any]


def quiet_rule_of(config: Config, route_name: str) -> tuple[GcsRoute | None, str | None]:
    """The quiet route ``route_name`` of ``config``; else None and why it cannot be counted."""
    route = next((r for r in config.routes if r.name == route_name), None)
    if route is None:
        return None, f"route {route_name!r} is not in config {config.source}"
    if not isinstance(route, GcsRoute) or route.quiet is None:
        return None, f"route {route_name!r} of config {config.source} is not a quiet gcs route"
    return route, None


def read_listings(config: Config, ledger: Ledger, runs: Sequence[Run]) -> dict[str, Tally | str]:
    """For each run WAITING_DATA on a quiet dataset: its listing now, or why none was made."""
    waiting = [
        run for run in runs if run.status is RunStatus.WAITING_DATA and _quiet_wait(run) is not None
    ]
    if not waiting:
        return {}
    workers = min(LISTING_WORKERS, len(waiting))
    with ThreadPoolExecutor(workers, thread_name_prefix="status-listing") as pool:
        found = list(pool.map(lambda run: _listing(config, ledger, run), waiting))
    return {run.run_id: listing for run, listing in zip(waiting, found, strict=True)}


def _listing(config: Config, ledger: Ledger, run: Run) -> Tally | str:
    from google.auth.exceptions import GoogleAuthError

    from shared.handlers import quiet_datasets
    from shared.handlers.services import Services
    from shared.model.errors import DispatchError

    wait = _quiet_wait(run)
    assert wait is not None  # read_listings chose it
    route, why_not = quiet_rule_of(config, run.route)
    if route is None:
        return why_not or "no quiet route"
    try:
        # The reconciler's own count (a version's objects are those after the earlier
        # version's cutoff), so that status says what the next tick will decide on.
        bucket, prefix = quiet_datasets.dataset_location(wait.dataset_uri)
        services = Services(config, _ledger=ledger)
        return quiet_datasets.count_version(services, run.run_id, route, wait, bucket, prefix)
    except (DispatchError, GoogleAuthError, ValueError) as error:
        return f"Cloud Storage not read: {' '.join(str(error).split())}"


def _quiet_wait(run: Run) -> QuietWait | None:
    return run.data_wait if isinstance(run.data_wait, QuietWait) else None


def wait_view(
    run: Run,
    rule: QuietRule | None,
    listing: Tally | str | None,
    now: datetime,
    data_timeout: timedelta,
) -> WaitView | None:
    """What ``status`` says about ``run``'s data wait at ``now``; None when it waits for none.

    ``rule`` is its route's quiet rule (None when the config has no such quiet route);
    ``listing`` the live count of a quiet dataset, or why it could not be made (a string).
    """
    if run.status is not RunStatus.WAITING_DATA or run.data_wait is None:
        return None
    if isinstance(run.data_wait, ManifestWait):
        return _manifest_view(run.data_wait, now, data_timeout)
    return _quiet_view(run.data_wait, rule, listing, now, data_timeout)


def _quiet_view(
    wait: QuietWait,
    rule: QuietRule | None,
    listing: Tally | str | None,
    now: datetime,
    data_timeout: timedelta,
) -> WaitView:
    head = f"dataset {wait.dataset_uri} (version {wait.version}), waiting since {_at(wait.since)}"
    document: dict[str, Any] = {
        "kind": "quiet",
        "dataset_uri": wait.dataset_uri,
        "version": wait.version,
        "since": _at(wait.since),
        "listed": isinstance(listing, Tally),
    }
    if rule is not None:
        document["quiet_for_seconds"] = int(rule.quiet_for.total_seconds())
        document["min_objects"] = rule.min_objects
    if not isinstance(listing, Tally):
        why = listing or "not listed"
        document["not_listed_because"] = why
        return WaitView((head, f"objects not counted ({why}): the ledger keeps no count"), document)
    assert rule is not None  # a listing is made only for a quiet route
    newest = listing.newest
    document["objects"] = listing.objects
    document["newest_object"] = _at(newest) if newest else None
    seen = f"{listing.objects} object{'s' if listing.objects != 1 else ''}" + (
        f", newest written {_at(newest)}" if newest else ""
    )
    overdue = quiet.overdue_at(listing.objects, newest, wait.since, data_timeout, rule)
    if overdue is not None:  # short of min_objects: the reconciler's own deadline
        gives_up = overdue
        more = rule.min_objects - listing.objects
        document["needs_objects"] = more
        document["gives_up_at"] = _at(gives_up)
        when = (
            f"needs {more} more object{'s' if more != 1 else ''} (min_objects "
            f"{rule.min_objects}); gives up {_at(gives_up)} ({_until(gives_up, now)}) if none "
            "is written"
        )
    else:
        assert newest is not None  # min_objects >= 1
        complete_at = quiet.earliest_completion(newest, rule)
        document["complete_at"] = _at(complete_at)
        if quiet.is_complete(listing.objects, newest, now, rule):
            when = f"quiet since {_at(complete_at)}: complete; the reconciler's next tick starts it"
        else:
            when = (
                f"complete at {_at(complete_at)} ({_until(complete_at, now)}) if nothing more "
                f"is written (quiet_for {_span(rule.quiet_for)})"
            )
    return WaitView((head, f"{seen}; {when}"), document)


def _manifest_view(wait: ManifestWait, now: datetime, data_timeout: timedelta) -> WaitView:
    gives_up = wait.since + data_timeout
    checked = f"checked {_at(wait.checked_at)}" if wait.checked_at else "not checked yet"
    lines = [
        f"manifest {wait.manifest_uri}, waiting since {_at(wait.since)}: {wait.missing_count} of "
        f"{wait.files} file{'s' if wait.files != 1 else ''} missing ({checked}); gives up "
        f"{_at(gives_up)} ({_until(gives_up, now)})",
        *(f"missing {uri}" for uri in wait.missing[:MISSING_SHOWN]),
    ]
    unnamed = wait.missing_count - min(len(wait.missing), MISSING_SHOWN)
    if unnamed > 0:
        lines.append(
            f"... and {unnamed} more (`status --json` names the first {len(wait.missing)})"
        )
    document = {
        "kind": "manifest",
        "manifest_uri": wait.manifest_uri,
        "since": _at(wait.since),
        "files": wait.files,
        "missing_count": wait.missing_count,
        "missing": list(wait.missing),
        "checked_at": _at(wait.checked_at) if wait.checked_at else None,
        "gives_up_at": _at(gives_up),
    }
    return WaitView(tuple(lines), document)


def _at(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _until(moment: datetime, now: datetime) -> str:
    seconds = int((moment - now).total_seconds())
    return f"in {_span(timedelta(seconds=seconds))}" if seconds > 0 else "due"


def _span(length: timedelta) -> str:
    """``1h05m``, ``4m10s``, ``45s``: a duration as an operator reads it."""
    seconds = int(length.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"
