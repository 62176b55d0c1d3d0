"""The stockout benchmark's arithmetic: per policy, from what the emulator and the ledger hold.

Pure functions over plain records (``JobRecord``, ``TriggerOutcome``) that ``bench.capacity``
reads at the end of each policy's week, so the figures can be tested with tables and rebuilt from
the raw JSON. Times are simulated seconds from the start of the trace.

The JSON keys are a contract (issue 14): ``policies.{naive,static,learned}.{success_rate,
time_to_running_p50_s, time_to_running_p95_s, duplicate_gpu_hours, redone_gpu_hours, alerts}``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

POLICIES = ("naive", "static", "learned")
CONTRACT_KEYS = (
    "success_rate",
    "time_to_running_p50_s",
    "time_to_running_p95_s",
    "duplicate_gpu_hours",
    "redone_gpu_hours",
    "alerts",
)
NOT_MEASURED = "not measured"
SUCCEEDED = "JOB_STATE_SUCCEEDED"

# Targets (issue 14); the table says met or MISSED against each, never hides a miss.
LEARNED_SUCCESS_MIN = 0.99
LEARNED_P50_VS_STATIC_MAX = 0.7  # at least 30% below static


@dataclass(frozen=True)
class JobRecord:
    """One job the emulator holds at the end, with its times in trace seconds."""

    name: str
    owner: str  # the run id (ours) or the trigger index (naive); "" for another system's job
    state: str
    created_s: float
    started_s: float | None
    ended_s: float | None
    gpus: int = 1


@dataclass(frozen=True)
class TriggerOutcome:
    """What became of one trigger: when its first job started RUNNING, and whether it ended in
    a successful job."""

    index: int
    at_s: float
    first_running_s: float | None
    succeeded: bool


def percentile(samples: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile (the smallest sample with ``fraction`` of them at or below);
    None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def gpu_hours(job: JobRecord, end_s: float) -> float:
    """GPU-hours the job held RUNNING up to its end (or ``end_s`` if it has not ended)."""
    if job.started_s is None:
        return 0.0
    ended = job.ended_s if job.ended_s is not None else end_s
    return max(0.0, ended - job.started_s) * job.gpus / 3600.0


def first_running(jobs: Sequence[JobRecord]) -> float | None:
    """When the first of ``jobs`` started RUNNING; None if none did."""
    starts = [job.started_s for job in jobs if job.started_s is not None]
    return min(starts) if starts else None


def duplicate_gpu_hours(jobs: Sequence[JobRecord], owned: Collection[str], end_s: float) -> float:
    """GPU-hours of the jobs no trigger or attempt owns (a second job for one attempt, an
    orphan): every job whose name is not in ``owned``."""
    return sum(gpu_hours(job, end_s) for job in jobs if job.name not in owned)


def lost_gpu_hours(jobs: Sequence[JobRecord], owned: Collection[str], end_s: float) -> float:
    """GPU-hours of owned jobs that ran and ended without success (a Spot preemption, a
    failure): the work a resubmission starts again unless it resumes."""
    return sum(
        gpu_hours(job, end_s)
        for job in jobs
        if job.name in owned and job.ended_s is not None and job.state != SUCCEEDED
    )


def redone(directories: Sequence[Mapping[str, Any]]) -> tuple[float, float, int]:
    """From the emulator's progress report (``GET /emulator/v1/progress``, one entry per output
    directory): GPU-hours redone in all; the target's bound, one checkpoint interval per
    resubmission that ran (every job of a directory after its first, times its GPUs); and how
    many such resubmissions there were."""
    total = bound = 0.0
    resubmissions = 0
    for directory in directories:
        total += float(directory.get("redone_gpu_hours", 0.0))
        interval = float(directory.get("checkpoint_every_seconds") or 0.0)
        for job in list(directory.get("jobs", []))[1:]:
            resubmissions += 1
            bound += interval * int(job.get("gpus", 1)) / 3600.0
    return total, bound, resubmissions


def _finite(value: float | None) -> float | None:
    return None if value is None or value == math.inf else value


def first_job_per_owner(jobs: Sequence[JobRecord]) -> set[str]:
    """The naive policy's owned jobs: the first job created for each trigger (a second
    delivery of the same event makes a second job, which nothing owns)."""
    first: dict[str, JobRecord] = {}
    for job in sorted(jobs, key=lambda j: (j.created_s, j.name)):
        first.setdefault(job.owner, job)
    return {job.name for job in first.values()}


def summarize(
    outcomes: Sequence[TriggerOutcome],
    jobs: Sequence[JobRecord],
    owned: Collection[str],
    end_s: float,
    alerts: int,
    redone_gpu_hours: float | None,
) -> dict[str, Any]:
    """One policy's figures: the contract keys, then the detail behind them."""
    # Over every trigger: one that never reached RUNNING waits forever, so a percentile that
    # falls among those is None ("never"), not the percentile of the lucky ones.
    waits = [
        math.inf if o.first_running_s is None else o.first_running_s - o.at_s for o in outcomes
    ]
    succeeded = sum(1 for o in outcomes if o.succeeded)
    summary: dict[str, Any] = {
        "success_rate": succeeded / len(outcomes) if outcomes else 0.0,
        "time_to_running_p50_s": _finite(percentile(waits, 0.5)),
        "time_to_running_p95_s": _finite(percentile(waits, 0.95)),
        "duplicate_gpu_hours": round(float(duplicate_gpu_hours(jobs, owned, end_s)), 3),
        "redone_gpu_hours": 0.0 if redone_gpu_hours is None else round(redone_gpu_hours, 3),
        "alerts": alerts,
        "triggers": len(outcomes),
        "triggers_succeeded": succeeded,
        "triggers_started": sum(1 for wait in waits if wait != math.inf),
        "jobs": len(jobs),
        "jobs_not_owned": sum(1 for job in jobs if job.name not in owned),
        "gpu_hours": round(sum(gpu_hours(job, end_s) for job in jobs), 3),
        "lost_gpu_hours": round(lost_gpu_hours(jobs, owned, end_s), 3),
    }
    if redone_gpu_hours is None:
        summary["redone_gpu_hours_note"] = NOT_MEASURED
    return summary


def verdicts(policies: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each target of issue 14 against the figures: "met", "MISSED" or "not run"."""
    found: dict[str, str] = {}
    learned = policies.get("learned")
    static = policies.get("static")
    naive = policies.get("naive")
    if learned is not None:
        rate = learned["success_rate"]
        far_lower = naive is None or naive["success_rate"] <= rate - 0.2
        found["learned success_rate >= 0.99, naive far lower"] = _met(
            rate >= LEARNED_SUCCESS_MIN and far_lower
        )
        if static is not None:
            ours, theirs = learned["time_to_running_p50_s"], static["time_to_running_p50_s"]
            # None is "never": learned never starting misses; static never starting, learned
            # starting, is met.
            found["learned p50 at least 30% below static"] = _met(
                ours is not None and (theirs is None or ours <= LEARNED_P50_VS_STATIC_MAX * theirs)
            )
    if learned is not None and learned.get("redone_gpu_hours_bound") is not None:
        found["learned redone at most one checkpoint interval per resubmission"] = _met(
            learned["redone_gpu_hours"] <= learned["redone_gpu_hours_bound"] + 1e-9
        )
    ours_duplicates = [
        policies[name]["duplicate_gpu_hours"] for name in ("static", "learned") if name in policies
    ]
    if ours_duplicates:
        found["duplicate_gpu_hours = 0 for ours"] = _met(all(d == 0 for d in ours_duplicates))
    return found


def _met(condition: bool) -> str:
    return "met" if condition else "MISSED"


def render_table(policies: Mapping[str, Mapping[str, Any]]) -> str:
    """The printed table: one column per policy, one row per contract key, then the targets."""
    names = [name for name in POLICIES if name in policies]
    rows: list[list[str]] = [["figure", *names]]
    for key in CONTRACT_KEYS:
        row = [key]
        for name in names:
            figures = policies[name]
            value = figures.get(key)
            text = _shown(value)
            if key == "redone_gpu_hours" and figures.get("redone_gpu_hours_note"):
                text = f"{text} ({figures['redone_gpu_hours_note']})"
            row.append(text)
        rows.append(row)
    for key in ("triggers_started", "jobs", "gpu_hours", "lost_gpu_hours"):
        rows.append([key, *(_shown(policies[name].get(key)) for name in names)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    targets = verdicts(policies)
    if targets:
        lines.append("")
        lines += [f"target: {what}: {verdict}" for what, verdict in targets.items()]
    return "\n".join(line.rstrip() for line in lines)


def _shown(value: object) -> str:
    if value is None:
        return "never"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.0f}"
    return str(value)
