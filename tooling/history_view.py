"""``vertex-dispatch status RUN --history``: each attempt's timeline, as text and as JSON.

What a timeline shows is what the ledger records (``Attempt.events``, ``started_at``,
``ended_at``, ``machine``, ``gpus``: docs/architecture.md, "Run history"), read through
``shared.policy.run_history``, the one place that reads a history (time to start, GPU-hours,
outcome class): nothing here measures a history in its own way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from shared.model.runs import CREATE_FAILED_STATE, CREATED_EVENT, INTENT_STATE
from shared.policy import run_history
from shared.policy.records import placement_kind

if TYPE_CHECKING:
    from shared.adapters.ledger import Attempt, Run


def history_text(runs: Sequence[Run], now: datetime) -> str:
    """The timelines of ``runs``' attempts, oldest attempt first, one block per run."""
    return "\n\n".join(_run_text(run, now) for run in runs)


def history_document(attempt: Attempt, now: datetime) -> dict[str, Any]:
    """What ``status --history --json`` adds to an attempt (under ``history``): the readings of
    its recorded history; times stay in the attempt's own fields."""
    created = run_history.created_at(attempt)
    to_start = run_history.time_to_start(attempt)
    return {
        "placement_kind": placement_kind(attempt.placement),
        "created_at": created,
        "time_to_start_s": to_start.total_seconds() if to_start is not None else None,
        "gpu_hours": round(run_history.gpu_hours_spent(attempt, now), 6),
        "outcome": run_history.outcome_class(attempt),
    }


def _run_text(run: Run, now: datetime) -> str:
    count = len(run.attempts)
    head = (
        f"run {run.run_id}  {run.status.value}  template {run.template or '-'}  "
        f"{count} attempt{'s' if count != 1 else ''}"
    )
    if not run.attempts:
        return f"{head}\n  no attempt yet"
    return "\n".join([head, *(line for a in run.attempts for line in _attempt_lines(a, now))])


def _attempt_lines(attempt: Attempt, now: datetime) -> list[str]:
    gpus = f"{attempt.gpus} GPU{'s' if attempt.gpus != 1 else ''}" if attempt.gpus else "- GPUs"
    job = attempt.job_name.rsplit("/", 1)[-1] if attempt.job_name else "no job"
    lines = [
        f"attempt {attempt.number}  {placement_kind(attempt.placement)}  {attempt.region}  "
        f"{attempt.machine or '-'}  {gpus}  {attempt.job_kind.resource} {job}"
    ]
    if not attempt.events:
        lines.append(f"    {_no_history(attempt)}")
        return lines
    origin = attempt.events[0].at
    width = max(len(_state_text(event.state)) for event in attempt.events)
    for event in attempt.events:
        offset = "" if event.state == CREATED_EVENT else f"+{_duration(event.at - origin)}"
        line = f"    {_rfc3339(event.at)}  {_state_text(event.state).ljust(width)}  {offset}"
        lines.append(line.rstrip())
    lines.append(f"    {_summary(attempt, now)}")
    return lines


def _no_history(attempt: Attempt) -> str:
    if attempt.state == INTENT_STATE:
        return "claimed; no job yet"
    if attempt.state == CREATE_FAILED_STATE:
        message = (attempt.error or {}).get("message") or "no message"
        return f"create failed: {' '.join(str(message).split())[:120]}"
    return f"{_state_text(attempt.state)} (no history recorded: written before run history)"


def _summary(attempt: Attempt, now: datetime) -> str:
    to_start = run_history.time_to_start(attempt)
    parts = [f"time to start {_duration(to_start)}" if to_start is not None else "never started"]
    if attempt.started_at is not None:
        ran = (attempt.ended_at or now) - attempt.started_at
        parts.append(f"ran {_duration(ran)}" + ("" if attempt.ended_at else " so far"))
        parts.append(f"{run_history.gpu_hours_spent(attempt, now):.2f} GPU-hours")
    outcome = run_history.outcome_class(attempt)
    parts.append(f"outcome {outcome}" if outcome else "not ended")
    return " · ".join(parts)


def _state_text(state: str) -> str:
    return state.removeprefix("JOB_STATE_")


def _duration(delta: timedelta) -> str:
    """``1h02m03s``, ``4m00s``, ``12s``: whole seconds, never negative."""
    seconds = max(int(delta.total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def with_history_documents(document: Mapping[str, Any], run: Run, now: datetime) -> dict[str, Any]:
    """``document`` (a run as ``status --json`` prints it) with each attempt's readings added
    under ``history`` (``history_document``), times as RFC 3339."""
    attempts = [
        {**stored, "history": _json_times(history_document(attempt, now))}
        for stored, attempt in zip(document.get("attempts") or (), run.attempts, strict=True)
    ]
    return {**document, "attempts": attempts}


def _json_times(document: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in document.items()
    }
