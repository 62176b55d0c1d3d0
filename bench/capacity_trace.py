"""The stockout benchmark's trace: when triggers land and when GPUs come and go, from one seed.

Pure: plain data in, plain data out, no emulator and no clock (``python -m bench capacity`` plays
the trace; tests/bench/test_capacity_trace.py checks it with tables). The same seed gives the
same trace, so the three policies play exactly the same week.

What it models (docs/performance.md, "The stockout benchmark"):

- ``triggers`` datasets landing at random times over ``days`` (uniform), each delivered once,
  or twice with probability ``duplicate_share`` (Eventarc delivers at least once);
- the primary region's A100s: 0 most of the time, ``primary_gpus`` during in-stock windows that
  cover about ``primary_in_stock_share`` of the time;
- the second region's A100s: a level from ``second_levels`` that changes every few hours;
- the persistent resource: another system's job fills it during busy windows covering about
  ``pool_busy_share`` of the time;
- Spot: during preempting windows (about ``spot_preempting_share`` of the time) a Spot job that
  starts RUNNING is preempted ``preempt_after_s`` later (the emulator's ``spot.preempt_after``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

DAY_S = 86_400.0
HOUR_S = 3_600.0
PROJECT = "local-project"
PROJECT_NUMBER = "123456789012"
PRIMARY_REGION = "us-central1"
SECOND_REGION = "us-east4"
ACCELERATOR = "NVIDIA_TESLA_A100"
MACHINE_TYPE = "a2-highgpu-1g"
POOL_ID = "a100-pool"
POOL_NAME = f"projects/{PROJECT}/locations/{PRIMARY_REGION}/persistentResources/{POOL_ID}"
POOL_REPLICAS = 2
BLOCKER_PREFIX = "capacity-blocker-"  # display names of the other system's jobs on the pool


@dataclass(frozen=True)
class TraceSettings:
    """What the trace is generated from; every figure the benchmark reports depends on these."""

    seed: int = 14
    triggers: int = 210
    days: float = 7.0
    drain_s: float = 18 * HOUR_S  # after the last trigger: time for the last runs to end
    duplicate_share: float = 0.1
    training_s: float = 2 * HOUR_S  # how long each training job runs once RUNNING
    checkpoint_every_s: float = 30 * 60.0  # with the emulator's progress model (resume)
    primary_gpus: int = 8
    primary_in_stock_share: float = 0.15
    primary_cycle_s: float = 10 * HOUR_S  # mean length of one out-of-stock + in-stock cycle
    second_levels: tuple[int, ...] = (3, 4, 6, 8)
    second_change_s: tuple[float, float] = (4 * HOUR_S, 12 * HOUR_S)
    pool_busy_share: float = 0.5
    pool_cycle_s: float = 8 * HOUR_S
    spot_preempting_share: float = 0.4
    spot_cycle_s: float = 6 * HOUR_S
    preempt_after_s: float = 45 * 60.0

    def __post_init__(self) -> None:
        if self.triggers < 1 or self.days <= 0:
            raise ValueError(
                f"a trace needs at least one trigger over a positive number of days, got "
                f"--triggers {self.triggers} --days {self.days}"
            )
        for name in (
            "duplicate_share",
            "primary_in_stock_share",
            "pool_busy_share",
            "spot_preempting_share",
        ):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {share}")

    @property
    def horizon_s(self) -> float:
        """Simulated seconds the benchmark plays: the trigger days and the drain after them."""
        return self.days * DAY_S + self.drain_s


@dataclass(frozen=True)
class Trigger:
    """One dataset landing: ``at_s`` seconds into the trace, delivered ``deliveries`` times."""

    index: int
    at_s: float
    deliveries: int

    @property
    def object_name(self) -> str:
        return f"capacity/{self.index:04d}/_SUCCESS"


@dataclass(frozen=True)
class Window:
    """``[start_s, end_s)`` seconds into the trace."""

    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class CapacityStep:
    """From ``at_s`` on, ``region`` has ``total`` GPUs of ``accelerator`` (held ones included)."""

    at_s: float
    region: str
    total: int
    accelerator: str = ACCELERATOR


@dataclass(frozen=True)
class Trace:
    settings: TraceSettings
    triggers: tuple[Trigger, ...]
    capacity: tuple[CapacityStep, ...]  # sorted by time; the first of each region is at 0
    pool_busy: tuple[Window, ...]
    spot_preempting: tuple[Window, ...]
    notes: dict[str, float] = field(default_factory=dict)


def generate(settings: TraceSettings) -> Trace:
    """The trace ``settings`` describe; the same settings always give the same trace."""
    horizon = settings.horizon_s
    trigger_rng = random.Random(f"{settings.seed}:triggers")
    times = sorted(trigger_rng.uniform(0, settings.days * DAY_S) for _ in range(settings.triggers))
    triggers = tuple(
        Trigger(index, round(at, 1), 2 if trigger_rng.random() < settings.duplicate_share else 1)
        for index, at in enumerate(times)
    )
    in_stock = windows(
        random.Random(f"{settings.seed}:primary"),
        settings.primary_in_stock_share,
        settings.primary_cycle_s,
        horizon,
    )
    capacity = [CapacityStep(0.0, PRIMARY_REGION, 0)]
    for window in in_stock:
        capacity.append(CapacityStep(window.start_s, PRIMARY_REGION, settings.primary_gpus))
        capacity.append(CapacityStep(window.end_s, PRIMARY_REGION, 0))
    capacity += levels(random.Random(f"{settings.seed}:second"), settings, horizon)
    pool_busy = windows(
        random.Random(f"{settings.seed}:pool"),
        settings.pool_busy_share,
        settings.pool_cycle_s,
        horizon,
    )
    spot = windows(
        random.Random(f"{settings.seed}:spot"),
        settings.spot_preempting_share,
        settings.spot_cycle_s,
        horizon,
    )
    return Trace(
        settings=settings,
        triggers=triggers,
        capacity=tuple(sorted(capacity, key=lambda step: (step.at_s, step.region))),
        pool_busy=pool_busy,
        spot_preempting=spot,
        notes={
            "primary_in_stock_share": covered_share(in_stock, horizon),
            "pool_busy_share": covered_share(pool_busy, horizon),
            "spot_preempting_share": covered_share(spot, horizon),
            "duplicate_deliveries": float(sum(t.deliveries - 1 for t in triggers)),
        },
    )


def windows(
    rng: random.Random, share: float, cycle_s: float, horizon_s: float
) -> tuple[Window, ...]:
    """Alternating off/on stretches (exponential lengths, means ``(1 - share) * cycle_s`` and
    ``share * cycle_s``) up to ``horizon_s``: the "on" ones, rounded to whole minutes so the
    emulator's timeline and the harness's steps line up."""
    if share <= 0.0:
        return ()
    if share >= 1.0:
        return (Window(0.0, horizon_s),)
    found: list[Window] = []
    at = 0.0
    on = rng.random() < share  # the first stretch: on with the share's probability
    while at < horizon_s:
        mean = share * cycle_s if on else (1 - share) * cycle_s
        end = min(horizon_s, at + max(60.0, _minute(rng.expovariate(1 / mean))))
        if on:
            found.append(Window(at, end))
        at, on = end, not on
    return tuple(found)


def levels(rng: random.Random, settings: TraceSettings, horizon_s: float) -> list[CapacityStep]:
    """The second region's GPU total: a level from ``second_levels``, changed every few hours."""
    steps = []
    at = 0.0
    low, high = settings.second_change_s
    while at < horizon_s:
        steps.append(CapacityStep(at, SECOND_REGION, rng.choice(settings.second_levels)))
        at += _minute(rng.uniform(low, high))
    return steps


def covered_share(found: tuple[Window, ...], horizon_s: float) -> float:
    """The share of ``[0, horizon_s)`` the windows cover (they never overlap)."""
    return sum(min(w.end_s, horizon_s) - w.start_s for w in found) / horizon_s


def in_window(found: tuple[Window, ...], at_s: float) -> bool:
    return any(w.start_s <= at_s < w.end_s for w in found)


def _minute(seconds: float) -> float:
    return float(round(seconds / 60.0) * 60)


def emulator_config(trace: Trace, progress: bool = True) -> dict[str, Any]:
    """The Vertex AI emulator's config for the trace (docs/vertex-ai-emulator.md): the capacity
    timeline, the persistent resource, how long jobs run. The pool's busy windows and Spot's
    preempting windows are played by the harness (a blocker job, ``PUT spot``), not here: the
    emulator's timeline moves GPU totals only. With ``progress``, a job with an output directory
    trains for ``training_s`` of work in all, checkpointing every ``checkpoint_every_s`` (the
    emulator's progress model: what a resumed resubmission redoes)."""
    settings = trace.settings
    first: dict[str, int] = {}
    timeline = []
    for step in trace.capacity:
        if step.at_s == 0.0 and step.region not in first:
            first[step.region] = step.total
            continue
        timeline.append(
            {
                "at": f"{int(step.at_s)}s",
                "region": step.region,
                "accelerator": step.accelerator,
                "set": step.total,
            }
        )
    machine = {
        "machineType": MACHINE_TYPE,
        "acceleratorType": ACCELERATOR,
        "acceleratorCount": 1,
    }
    return {
        "project_numbers": {PROJECT: PROJECT_NUMBER},
        "capacity": {region: {ACCELERATOR: total} for region, total in first.items()},
        "capacity_timeline": timeline,
        "persistent_resources": [
            {
                "name": POOL_NAME,
                "displayName": "capacity bench A100 pool",
                "state": "RUNNING",
                "resourcePools": [
                    {
                        "id": "a100",
                        "machineSpec": machine,
                        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                        "replicaCount": str(POOL_REPLICAS),
                    }
                ],
            }
        ],
        "timings": {"provisioning": "2m"},
        "default_outcome": {
            "result": "succeeded",
            "duration": f"{int(settings.training_s)}s",
            **(
                {
                    "work": f"{int(settings.training_s)}s",
                    "checkpoint_every": f"{int(settings.checkpoint_every_s)}s",
                }
                if progress
                else {}
            ),
        },
        "outcome_rules": [
            {
                "display_name": f"^{blocker_name(index)}$",
                "result": "succeeded",
                "duration": f"{int(window.length_s)}s",
            }
            for index, window in enumerate(trace.pool_busy)
        ],
        "job_logs": {"trainer_lines_per_second": 0},
    }


def blocker_name(index: int) -> str:
    return f"{BLOCKER_PREFIX}{index:04d}"
