"""A run's deadline (``start_by``): when it is, how it cuts the waits along the chain, and when a
run has missed it (docs/architecture.md, "Deadlines").

Pure functions of the deadline, the run and ``now`` (the caller's clock), tested as tables:

- ``start_deadline``: the trigger's time (the event's when it has one, else when the run was
  opened) plus ``start_by``: the template's, or the request's shorter one
  (``decode.routing`` refuses a longer one).
- ``cut_placement``: a FLEX_START placement whose max wait would outlast the deadline waits only
  until the deadline (a ``max_wait: 0``, waiting forever, too); the attempt's placement record
  keeps the cut wait (``records.DEADLINE_MAX_WAIT_KEY``), which ``policy.max_wait`` reads, so the
  job-state function and the queue watchdog hold the job to it.
- ``deadline_queue_limit``: a job on a placement without a max wait of its own (a persistent
  resource, a reservation, on demand, Spot; FLEX_START waiting forever) may stay queued only until
  the deadline; the queue watchdog cancels it there (``policy.watchdogs.queue_limit``).
- ``too_late``: a run whose deadline is less than ``DEADLINE_MIN_USEFUL_WAIT`` away (or past)
  has missed it: no walk, retry or fallback is started; the run ends FAILED with one
  ``deadline_missed`` alert whose message ``tried_lines`` fills with every placement tried.

The deadline is about starting: once a job of the run has run (``binds``), it no longer applies,
and a job RUNNING is never cancelled for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from shared.config.model import FlexStartPlacement, Placement
from shared.model.jobstates import JobStateName
from shared.model.runs import Attempt, Run
from shared.model.triggers import JobRequest, ObjectFinalized, ScheduleTick, Trigger
from shared.policy.run_history import outcome_class, started
from shared.policy.timing import DEADLINE_MIN_USEFUL_WAIT


def trigger_time(trigger: Trigger) -> datetime | None:
    """When the trigger happened by its own event: the object event's time, the request's
    publish time, the schedule's tick time; None when it carries none."""
    if isinstance(trigger, ObjectFinalized):
        return trigger.event_time
    if isinstance(trigger, JobRequest):
        return trigger.publish_time
    if isinstance(trigger, ScheduleTick):
        return trigger.tick_time
    return None


def start_deadline(
    triggered_at: datetime | None, opened_at: datetime, start_by: timedelta | None
) -> datetime | None:
    """The run's deadline: ``start_by`` after its trigger (``opened_at``, when the run is
    opened, for a trigger without a time of its own); None without ``start_by``."""
    if start_by is None:
        return None
    return (triggered_at or opened_at) + start_by


RAN_CLASSES = frozenset({"user_code"})
"""Failure classes only a job that ran can end with: the training code itself failed."""


def binds(run: Run, ended_class: str | None = None) -> bool:
    """Whether ``run``'s deadline still applies: it has one, none of its jobs has started (the
    deadline is about starting; a retry of a job that ran is not bound by it), and no operator
    has retried it (``vertex-dispatch retry`` of a run past its deadline means: start anyway).
    ``ended_class``: the failure class of the last job's end being decided now (a job whose
    start the history may not show yet, if no reading saw it RUNNING)."""
    return (
        run.start_deadline is not None
        and run.operator_grant is None
        and ended_class not in RAN_CLASSES
        and not any(_ran(a) for a in run.attempts)
    )


def deadline_of(run: Run, ended_class: str | None = None) -> datetime | None:
    """``run``'s deadline while it binds (``binds``), else None."""
    return run.start_deadline if binds(run, ended_class) else None


def _ran(attempt: Attempt) -> bool:
    return (
        started(attempt)
        or attempt.state == JobStateName.RUNNING
        or outcome_class(attempt) in RAN_CLASSES
    )


def too_late(deadline: datetime | None, at: datetime) -> bool:
    """Whether a start tried at ``at`` can no longer make ``deadline``: less than
    ``DEADLINE_MIN_USEFUL_WAIT`` is left (or the deadline passed)."""
    return deadline is not None and deadline - at < DEADLINE_MIN_USEFUL_WAIT


def cut_wait(max_wait: timedelta, deadline: datetime | None, now: datetime) -> timedelta | None:
    """The wait a FLEX_START job created at ``now`` gets: ``max_wait`` (0: forever), cut to end
    at ``deadline`` (whole seconds, rounded down: Vertex AI takes seconds); None when the
    deadline leaves ``max_wait`` as it is."""
    if deadline is None:
        return None
    left = timedelta(seconds=int((deadline - now).total_seconds()))
    if left <= timedelta(0):
        left = timedelta(seconds=1)  # too_late says so first; never "0s", which waits forever
    if max_wait > timedelta(0) and max_wait <= left:
        return None
    return left


def cut_placement(placement: Placement, deadline: datetime | None, now: datetime) -> Placement:
    """``placement`` as a job created at ``now`` is to use it: a FLEX_START max wait cut to the
    deadline (``cut_wait``); any other placement, or one the deadline does not cut, unchanged."""
    if not isinstance(placement, FlexStartPlacement):
        return placement
    cut = cut_wait(placement.max_wait, deadline, now)
    return placement if cut is None else dataclasses.replace(placement, max_wait=cut)


def deadline_queue_limit(
    limit: timedelta, deadline: datetime | None, created: datetime
) -> timedelta | None:
    """How long a job created at ``created`` on a placement without a max wait of its own may
    stay queued: the deadline, when it comes before ``limit`` runs out; None when it does not
    (the limit stands)."""
    if deadline is None or created + limit <= deadline:
        return None
    return max(deadline - created, timedelta(0))


def describe_deadline(run: Run) -> str:
    """The deadline as an alert says it: ``2026-12-06T06:00:00+00:00``."""
    return run.start_deadline.isoformat() if run.start_deadline else "none"


def tried_lines(run: Run, last_ended: str | None = None) -> list[str]:
    """One line per placement the run tried or passed over, oldest first, and why it did not
    start the job: each attempt's skips, then its own placement and how its job ended (or the
    state it was left in; ``last_ended``: how the last attempt's job ended, when that end is
    being decided now and not recorded yet). For a deadline-missed alert."""
    lines: list[str] = []
    last = run.last_attempt
    for attempt in run.attempts:
        for skip in attempt.skips:
            lines.append(
                f"attempt {attempt.number}: {describe_record(skip.placement)}: passed over "
                f"({skip.skip_class}): {skip.reason}"
            )
        if attempt.job_name is None and attempt.error is None:
            continue  # the intent of a walk that created nothing: its skips said it all
        outcome = last_ended if last_ended and attempt is last else _outcome(attempt)
        lines.append(f"attempt {attempt.number}: {describe_record(attempt.placement)}: {outcome}")
    for skip in run.no_placement_skips:
        lines.append(
            f"{describe_record(skip.placement)}: could not take the job ({skip.skip_class}): "
            f"{skip.reason}"
        )
    return lines


def _outcome(attempt: Attempt) -> str:
    error = attempt.error or {}
    what = error.get("class") or attempt.state
    message = error.get("message")
    return f"{what}: {message}" if message else str(what)


def describe_record(record: Mapping[str, Any]) -> str:
    """A recorded placement (``records.placement_record``) in one line: its kind, what the
    config set, and a wait a deadline cut."""
    for kind, fields in record.items():
        if kind == "region":
            continue
        if not isinstance(fields, Mapping):
            region = f" in {record['region']}" if record.get("region") else ""
            return f"{kind} {fields}{region}"
        shown = dict(fields)
        text = kind
        if "max_wait" in shown:
            text += f" (max wait {shown.pop('max_wait')}"
            cut = shown.pop("deadline_max_wait", None)
            text += f", cut to {cut} by the deadline)" if cut else ")"
        if shown.get("region"):
            text += f" in {shown.pop('region')}"
        if shown.get("name"):
            text += f" {shown.pop('name')}"
        return text
    return "unknown placement"


def missed_message(run: Run, template: str, why: str, last_ended: str | None = None) -> str:
    """The deadline-missed alert's message: what happened and every placement tried
    (``tried_lines``)."""
    lines = tried_lines(run, last_ended)
    tried = "\n".join(lines) if lines else "(no placement was tried)"
    return (
        f"run {run.run_id} of template {template!r} has no job running and cannot start one "
        f"before its deadline {describe_deadline(run)} (start_by): {why}. Each placement tried:"
        f"\n{tried}"
    )


def missed_what_to_do(run: Run, template: str) -> str:
    """What a human does about a missed deadline."""
    return (
        f"start the run again with `vertex-dispatch retry {run.run_id}` once capacity is back, "
        f"or give template {template!r} a longer start_by (or none), or add a placement that "
        "starts sooner (another region, on demand); the run's jobs are not started past it"
    )
