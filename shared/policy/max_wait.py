"""How long a FLEX_START job may wait for machines: what the job-state function reads to tell an
expired wait from other failures, and what the reconciler's watchdog holds a queued job to.

The placement the ledger recorded for the attempt (what we asked for) comes first, the listed job
second (``FLEX_START_DEFAULT_MAX_WAIT`` when it sets none, as Vertex AI applies).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from shared.aiplatform import CustomJob, Scheduling
from shared.config.durations import parse_duration
from shared.model.runs import Attempt
from shared.policy.records import DEADLINE_MAX_WAIT_KEY
from shared.policy.timing import FLEX_START_DEFAULT_MAX_WAIT

# The recorded kinds (shared.config.placements.PLACEMENT_KINDS) that have no max wait of their own:
# a persistent resource's queue, and Spot, on-demand and reservation jobs, which do not wait in
# Dynamic Workload Scheduler's queue (a job kept QUEUED is the watchdog's default limit's).
NO_WAIT_KINDS = ("persistent_resource", "spot", "on_demand", "reservation")


def flex_start_max_wait(job: CustomJob, attempt: Attempt | None = None) -> timedelta | None:
    """How long a FLEX_START job may wait for machines; None when it is not bounded.

    The placement the ledger recorded for ``attempt`` (what we asked for) comes first; the
    listed job only when the attempt has no readable placement (an older record). The job
    alone is not to be trusted for "wait forever": a zero Duration is the proto default, which
    a service may drop from its answer or fill with its own default of one day, and then the
    watchdog would cancel a job meant to wait forever after a day.
    """
    known, recorded = _recorded_max_wait(attempt)
    if known:
        return recorded
    scheduling = job.job_spec.scheduling
    if scheduling.strategy != Scheduling.Strategy.FLEX_START:
        return None  # a persistent resource's queue has no max wait of its own
    if "max_wait_duration" not in scheduling:
        return FLEX_START_DEFAULT_MAX_WAIT
    max_wait: timedelta = scheduling.max_wait_duration
    return max_wait if max_wait > timedelta(0) else None  # 0 waits forever


def _recorded_max_wait(attempt: Attempt | None) -> tuple[bool, timedelta | None]:
    """(whether the ledger says, the max wait) of ``attempt``'s recorded placement
    (``shared.policy.records.placement_record``: ``{"flex_start": {"max_wait": "7200s", ...}}``,
    ``{"persistent_resource": ...}``, ``{"spot": {...}}``, ...; a deadline's cut wait,
    ``deadline_max_wait``, before the chain's ``max_wait``); the max wait is None when it waits
    forever ("0s") or the placement is not FLEX_START."""
    placement = attempt.placement if attempt is not None else None
    if not placement:
        return False, None
    if any(kind in placement for kind in NO_WAIT_KINDS):
        return True, None
    flex = placement.get("flex_start")
    if not isinstance(flex, Mapping) or "max_wait" not in flex:
        return False, None
    # The wait the job was created with: the run's deadline may have cut the chain's.
    written = flex.get(DEADLINE_MAX_WAIT_KEY, flex["max_wait"])
    try:
        max_wait = parse_duration(written)
    except ValueError:
        return False, None
    return True, (max_wait if max_wait > timedelta(0) else None)  # 0 waits forever
