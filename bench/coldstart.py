"""Cold starts: each sample is a fresh Python process that imports an entry module and handles
one event (``bench.coldstart_child``); this module runs the table of cases and collects samples.

Repetitions are interleaved (every case once, then again) so that a slow moment of the machine
spreads over all cases instead of skewing one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.coldstart_child import RESULT_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT_SECONDS = 60


class Scenario:
    """What the event does; issue 7's (1a), (1b), (1c)."""

    UNMATCHED = "unmatched"  # (a) an object event that matches no route
    SUBMIT = "submit"  # (b) a marker that submits a FLEX_START job
    JOB_STATE = "job_state"  # (c) a job-state hint


class Subject:
    FLOOR = "floor"
    OURS = "vertex-dispatch"
    BASELINE = "baseline"


@dataclass(frozen=True)
class ColdCase:
    subject: str
    scenario: str
    entry: str  # module:function
    event_kind: str  # what bench.coldstart_child builds: shard, marker or job_state


FLOOR_MODULE = "bench.floor_function"
OURS_MODULE = "functions.main"  # deployed as the source root's main.py
BASELINE_MODULE = "bench.baseline_seed_function"

COLD_CASES: tuple[ColdCase, ...] = (
    ColdCase(Subject.FLOOR, Scenario.UNMATCHED, f"{FLOOR_MODULE}:on_event", "shard"),
    ColdCase(Subject.OURS, Scenario.UNMATCHED, f"{OURS_MODULE}:on_object_finalized", "shard"),
    ColdCase(
        Subject.BASELINE, Scenario.UNMATCHED, f"{BASELINE_MODULE}:on_object_finalized", "shard"
    ),
    ColdCase(Subject.OURS, Scenario.SUBMIT, f"{OURS_MODULE}:on_object_finalized", "marker"),
    ColdCase(Subject.BASELINE, Scenario.SUBMIT, f"{BASELINE_MODULE}:on_object_finalized", "marker"),
    ColdCase(Subject.OURS, Scenario.JOB_STATE, f"{OURS_MODULE}:on_job_event", "job_state"),
    ColdCase(Subject.BASELINE, Scenario.JOB_STATE, f"{BASELINE_MODULE}:on_job_event", "job_state"),
)
"""The floor is measured once, on the unmatched event: it handles every event the same way."""


class ColdStartFailed(RuntimeError):
    """A cold-start child exited with an error or printed no result."""


def run_child(case: ColdCase, event_arg: str, env: Mapping[str, str]) -> dict[str, object]:
    """One fresh process for ``case``; its result line, parsed."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.coldstart_child", case.entry, case.event_kind, event_arg],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_SECONDS,
        check=False,
    )
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line.removeprefix(RESULT_PREFIX))
    raise ColdStartFailed(
        f"cold start of {case.subject}/{case.scenario} ({case.entry}) exited "
        f"{completed.returncode} without a result; its stderr ends:\n{completed.stderr[-2000:]}"
    )


def measure(
    cases: Sequence[ColdCase],
    repeat: int,
    env: Mapping[str, str],
    event_arg: Callable[[ColdCase, int], str],
) -> dict[tuple[str, str], list[dict[str, object]]]:
    """``repeat`` samples of every case, interleaved; ``event_arg`` gives each its event."""
    samples: dict[tuple[str, str], list[dict[str, object]]] = {
        (case.subject, case.scenario): [] for case in cases
    }
    for repetition in range(repeat):
        for case in cases:
            result = run_child(case, event_arg(case, repetition), env)
            samples[(case.subject, case.scenario)].append(result)
    return samples


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a child: ours plus ``extra``, and the repository on the import path."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env
