"""Cold starts as deployed: each sample is a fresh Python process that imports ``main`` from a
source root and handles one event (``bench/coldstart_child.py``); this module builds the source
roots, runs the table of cases and collects samples.

Every subject runs from a source root laid out the way Cloud Functions runs a function: its
``main.py`` at the root, with unchecked-hash bytecode beside it (``deploy/bundle.py``'s). For
vertex-dispatch the root is the bundle itself, built by ``deploy/bundle.build_bundle`` as
``deploy/deploy.sh`` builds it (``main.py``, ``shared/``, their ``.pyc``, and the config,
``bench/dispatch-config.yaml``, shipped as ``config/config.json``), and its children read that
config by the relative path the Terraform module sets (``VERTEX_DISPATCH_CONFIG``, from the root,
their working directory); for the floor and the baseline the root is their one module copied to
``main.py`` and compiled the same way. So no subject compiles its own code on a cold start, as none
does on Cloud Functions, and none runs from the repository or the editable install.

Repetitions are interleaved (every case once, then again) so that a slow moment of the machine
spreads over all cases instead of skewing one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.coldstart_child import RESULT_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO_ROOT / "bench"
CHILD_SCRIPT = BENCH_DIR / "coldstart_child.py"
BUNDLE_SCRIPT = REPO_ROOT / "deploy" / "bundle.py"
DISPATCH_CONFIG = BENCH_DIR / "dispatch-config.yaml"
CONFIG_VARIABLE = "VERTEX_DISPATCH_CONFIG"
CHILD_TIMEOUT_SECONDS = 60


class Scenario:
    """What the event does: an unmatched object, a submitting marker, a job-state hint."""

    UNMATCHED = "unmatched"  # an object event that matches no route
    SUBMIT = "submit"  # a marker that submits a FLEX_START job
    SUBMIT_SWEEP = "submit_sweep"  # a marker that submits a FLEX_START hyperparameter tuning job
    JOB_STATE = "job_state"  # a job-state hint


class Subject:
    FLOOR = "floor"
    OURS = "vertex-dispatch"
    BASELINE = "baseline"


@dataclass(frozen=True)
class ColdCase:
    subject: str
    scenario: str
    function: str  # the entry point in the subject's main.py
    event_kind: str  # what bench.events builds: shard, marker, sweep_marker or job_state


COLD_CASES: tuple[ColdCase, ...] = (
    ColdCase(Subject.FLOOR, Scenario.UNMATCHED, "on_event", "shard"),
    ColdCase(Subject.OURS, Scenario.UNMATCHED, "on_object_finalized", "shard"),
    ColdCase(Subject.BASELINE, Scenario.UNMATCHED, "on_object_finalized", "shard"),
    ColdCase(Subject.OURS, Scenario.SUBMIT, "on_object_finalized", "marker"),
    ColdCase(Subject.BASELINE, Scenario.SUBMIT, "on_object_finalized", "marker"),
    ColdCase(Subject.OURS, Scenario.SUBMIT_SWEEP, "on_object_finalized", "sweep_marker"),
    ColdCase(Subject.BASELINE, Scenario.SUBMIT_SWEEP, "on_sweep_finalized", "sweep_marker"),
    ColdCase(Subject.OURS, Scenario.JOB_STATE, "on_job_event", "job_state"),
    ColdCase(Subject.BASELINE, Scenario.JOB_STATE, "on_job_event", "job_state"),
)
"""The floor is measured once, on the unmatched event: it handles every event the same way."""

SINGLE_MODULE_SUBJECTS = {
    Subject.FLOOR: BENCH_DIR / "floor_function.py",
    Subject.BASELINE: BENCH_DIR / "baseline_seed_function.py",
}
"""The subjects that are one module, deployed as the source root's main.py."""

BUNDLE_LIBRARY = "shared"
"""The package vertex-dispatch's child must import from the bundle (checked in the child)."""


class ColdStartFailed(RuntimeError):
    """A cold-start child exited with an error or printed no result."""


@dataclass(frozen=True)
class SourceRoot:
    """Where one subject's cold starts import ``main`` from, and the bytecode shipped there."""

    subject: str
    directory: Path
    libraries: tuple[str, ...]  # packages the child checks it imported from ``directory``
    pyc_files: int
    bytecode_skipped: str | None  # why no .pyc was written (another Python than the runtime's)
    env: Mapping[str, str] = field(default_factory=dict)  # the child's environment, over the run's

    def summary(self) -> dict[str, Any]:
        return {
            "pyc_files": self.pyc_files,
            "bytecode_skipped": self.bytecode_skipped,
            "env": dict(self.env),
        }


def bundle_module() -> ModuleType:
    """``deploy/bundle.py``, a script rather than a package, loaded as a module."""
    name = "vertex_dispatch_deploy_bundle"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BUNDLE_SCRIPT)
    if spec is None or spec.loader is None:
        raise ColdStartFailed(f"cannot load {BUNDLE_SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look the module up while being built
    spec.loader.exec_module(module)
    return module


def build_source_roots(
    directory: Path, subjects: Iterable[str], *, config: Path = DISPATCH_CONFIG
) -> dict[str, SourceRoot]:
    """One source root per subject under ``directory``: the bundle for vertex-dispatch (built by
    ``deploy/bundle.py`` with ``config``, bytecode included, read from the bundle as deployed),
    ``main.py`` plus its bytecode for the others."""
    bundle = bundle_module()
    roots: dict[str, SourceRoot] = {}
    for subject in dict.fromkeys(subjects):
        root = directory / subject
        libraries: tuple[str, ...] = ()
        env: dict[str, str] = {}
        if subject == Subject.OURS:
            built = bundle.build_bundle(root, config=config)
            compiled, libraries = built.bytecode, (BUNDLE_LIBRARY,)
            assert built.config is not None  # built with a config
            env[CONFIG_VARIABLE] = built.config.path  # relative: read from the root, as deployed
        else:
            root.mkdir(parents=True)
            shutil.copyfile(SINGLE_MODULE_SUBJECTS[subject], root / "main.py")
            compiled = bundle.compile_bytecode(root)
        roots[subject] = SourceRoot(
            subject, root, libraries, len(compiled.files), compiled.skipped, env
        )
    return roots


def event_json(kind: str, arg: str, message_id: str = "") -> str:
    """The event a child handles, as ``[attributes, data]`` JSON (the child builds the
    CloudEvent from it without importing ``bench``)."""
    from bench import events

    if kind == "shard":
        event = events.shard(1, int(arg))
    elif kind == "marker":
        event = events.marker(int(arg))
    elif kind == "sweep_marker":
        event = events.marker(int(arg), prefix=events.SWEEP_PREFIX)
    elif kind == "job_state":
        event = events.job_state(arg, message_id=message_id or arg)
    else:
        raise ValueError(
            f"event kind must be shard, marker, sweep_marker or job_state; got {kind!r}"
        )
    return json.dumps([dict(event.get_attributes()), event.data])


def cold_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a cold-start child: nothing on ``PYTHONPATH`` (only the source root, which the
    child puts first, as the runtime does), no bytecode cache prefix (the shipped ``__pycache__``
    is the one read), and nothing written back, so every sample is as cold as the first."""
    cold = {
        key: value
        for key, value in env.items()
        if key not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONSAFEPATH")
    }
    cold["PYTHONDONTWRITEBYTECODE"] = "1"
    return cold


def child_command(root: SourceRoot, function: str, event: str) -> list[str]:
    """The child's command line: ``-P`` so that neither the working directory nor the script's
    folder (the repository) is on the import path."""
    libraries = [arg for library in root.libraries for arg in ("--library", library)]
    return [
        sys.executable,
        "-P",
        str(CHILD_SCRIPT),
        str(root.directory),
        function,
        event,
        *libraries,
    ]


def run_child(
    case: ColdCase, root: SourceRoot, event: str, env: Mapping[str, str]
) -> dict[str, object]:
    """One fresh process for ``case``, run from its source root; its result line, parsed."""
    completed = subprocess.run(
        child_command(root, case.function, event),
        cwd=root.directory,
        env=cold_environment({**env, **root.env}),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_SECONDS,
        check=False,
    )
    if completed.returncode == 0:
        for line in reversed(completed.stdout.splitlines()):
            if line.startswith(RESULT_PREFIX):
                return json.loads(line.removeprefix(RESULT_PREFIX))
    raise ColdStartFailed(
        f"cold start of {case.subject}/{case.scenario} (main:{case.function} in "
        f"{root.directory}) exited {completed.returncode} without a result; its stderr ends:\n"
        f"{completed.stderr[-2000:]}"
    )


def measure(
    cases: Sequence[ColdCase],
    repeat: int,
    env: Mapping[str, str],
    event: Callable[[ColdCase, int], str],
    roots: Mapping[str, SourceRoot],
    *,
    count_vertex_calls: bool = False,
) -> dict[tuple[str, str], list[dict[str, object]]]:
    """``repeat`` samples of every case, interleaved; ``event`` gives each its event's JSON.

    With ``count_vertex_calls`` (the Vertex AI emulator running), each sample also records the
    API calls its child made, from the emulator's request log (emptied before the child starts,
    read after it exited: nothing in the child changes)."""
    from bench import vertex_log

    samples: dict[tuple[str, str], list[dict[str, object]]] = {
        (case.subject, case.scenario): [] for case in cases
    }
    for repetition in range(repeat):
        for case in cases:
            if count_vertex_calls:
                vertex_log.clear_requests()
            result = run_child(case, roots[case.subject], event(case, repetition), env)
            if count_vertex_calls:
                result["vertex_calls"] = dict(vertex_log.request_counts())
            samples[(case.subject, case.scenario)].append(result)
    return samples


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a workload child: ours plus ``extra``, and the repository on the
    import path (cold-start children drop it again: see :func:`cold_environment`)."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env
