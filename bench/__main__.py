"""``python -m bench``: run every measurement, print one table, write the raw JSON.

Builds the function's bundle once (``deploy/bundle.py``, bytecode and config included, as
``deploy/deploy.sh`` builds it) and runs every cold start from it, as deployed (see
``bench.coldstart``); the workloads, which run from the repository, read the same config from
``bench/dispatch-config.yaml``. Starts its own emulators (Pub/Sub,
Firestore, Vertex AI with a frozen clock) with ``emulator_stack``, runs the cold starts and the
three workloads in fresh processes, and stops everything. ``--smoke`` runs only the cold starts
that need no emulator, once each (a few seconds), for CI. ``--only WORKLOAD`` runs one workload
(e.g. ``reconcile_round``, the reconciler's round-robin over 20,000 runs) without the cold
starts. Progress goes to stderr; the table is the only thing on stdout.

``python -m bench capacity`` is a benchmark of its own, the stockout benchmark (``bench.capacity``:
a simulated week of scarce GPUs played by three policies); ``python -m bench capacity --help``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import coldstart, report
from bench.coldstart import COLD_CASES, ColdCase, Scenario, Subject
from bench.workloads import RESULT_PREFIX as WORKLOAD_RESULT_PREFIX

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
DISPATCH_CONFIG = coldstart.DISPATCH_CONFIG  # shipped in the bundle; read as YAML by workloads
EMULATOR_CONFIG = BENCH_DIR / "vertex-emulator.yaml"
PROJECT = "local-project"
TOPICS = ("bench-alerts", "bench-requests", "vertex-dispatch-job-events")
WORKLOAD_TIMEOUT_SECONDS = 240
# Seeding 20,000 jobs and ledger runs, then ten ticks over them, on 2 cores: see performance.md.
ROUND_TIMEOUT_SECONDS = 1200
JOB_REGION = "us-central1"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["capacity"]:
        from bench import capacity

        return capacity.main(argv[1:])
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    env = coldstart.child_environment(
        {"VERTEX_DISPATCH_CONFIG": str(DISPATCH_CONFIG), "GOOGLE_CLOUD_PROJECT": PROJECT}
    )
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "settings": {
            "repeat": 1 if args.smoke else args.repeat,
            "shards": args.shards,
            "runs": args.runs,
            "submissions": args.submissions,
            "round_runs": args.round_runs,
            "smoke": args.smoke,
            "only": args.only,
        },
    }
    if args.only:
        return _only(args, env, results, started)
    cases = (
        [c for c in COLD_CASES if c.subject != Subject.BASELINE][:2] if args.smoke else COLD_CASES
    )
    with tempfile.TemporaryDirectory(prefix="vertex-dispatch-bench-sources-") as sources:
        roots = _source_roots(Path(sources), cases)
        results["source_roots"] = {subject: root.summary() for subject, root in roots.items()}
        if args.smoke:
            cold = coldstart.measure(cases, 1, env, _event([]), roots)
        else:
            cold = _full_run(args, env, roots, results)
    results["cold_start"] = _summarized(cold)
    return _finish(args, results, started)


def _source_roots(directory: Path, cases: Sequence[ColdCase]) -> dict[str, coldstart.SourceRoot]:
    """Each subject's source root, built once for the whole run (the bundle for ours)."""
    _progress("building the source roots (vertex-dispatch's bundle with deploy/bundle.py) ...")
    roots = coldstart.build_source_roots(directory, [case.subject for case in cases])
    for root in roots.values():
        if root.bytecode_skipped:
            _progress(f"warning: {root.subject} runs without bytecode: {root.bytecode_skipped}")
    return roots


def _full_run(
    args: argparse.Namespace,
    env: dict[str, str],
    roots: Mapping[str, coldstart.SourceRoot],
    results: dict[str, Any],
) -> dict[tuple[str, str], list[dict[str, object]]]:
    from emulator_stack import (
        FirestoreEmulator,
        VertexAIEmulator,
        scoped_environ,
        start_emulators,
        start_vertex_ai_emulator,
    )

    # The unmatched event needs no emulator: measured first, on a machine not also running them.
    unmatched = [c for c in COLD_CASES if c.scenario == Scenario.UNMATCHED]
    _progress(f"cold starts, unmatched event: {len(unmatched)} cases x {args.repeat} ...")
    cold = coldstart.measure(unmatched, args.repeat, env, _event([]), roots)
    log_dir = Path(tempfile.mkdtemp(prefix="vertex-dispatch-bench-"))
    _progress(f"starting the emulators (logs in {log_dir}) ...")
    frozen_vertex = functools.partial(
        start_vertex_ai_emulator, config=EMULATOR_CONFIG, time_scale=0
    )
    with (
        start_emulators(
            ["pubsub", "firestore", "vertex-ai"], log_dir, launchers={"vertex-ai": frozen_vertex}
        ) as stack,
        scoped_environ(stack.env),
    ):
        from bench import vertex_log

        env.update(stack.env)
        _create_topics(stack.env["PUBSUB_EMULATOR_HOST"])
        firestore = stack.get("firestore", FirestoreEmulator)
        vertex = stack.get("vertex-ai", VertexAIEmulator)

        submitting = (Scenario.SUBMIT, Scenario.SUBMIT_SWEEP)
        submit = [c for c in COLD_CASES if c.scenario in submitting]
        _progress(f"cold starts, submitting markers: {len(submit)} cases x {args.repeat} ...")
        cold |= coldstart.measure(
            submit, args.repeat, env, _event([]), roots, count_vertex_calls=True
        )
        jobs = vertex_log.jobs_with_label(JOB_REGION, "vd-run")
        state_cases = [c for c in COLD_CASES if c.scenario == Scenario.JOB_STATE]
        _progress(f"cold starts, job-state event: {len(state_cases)} cases x {args.repeat} ...")
        cold |= coldstart.measure(state_cases, args.repeat, env, _event(jobs), roots)

        for name in WORKLOAD_NAMES:
            firestore.reset(PROJECT)
            vertex.reset()
            size = _size(args, name)
            _progress(f"workload {name} ({size}) ...")
            results[name] = run_workload(name, size, env)
    return cold


WORKLOAD_NAMES = ("warm", "burst", "quiet_burst", "reconcile", "reconcile_round")


def _size(args: argparse.Namespace, name: str) -> int:
    return {
        "warm": args.submissions,
        "burst": args.shards,
        "quiet_burst": args.shards,
        "reconcile": args.runs,
        "reconcile_round": args.round_runs,
    }[name]


def _only(
    args: argparse.Namespace, env: dict[str, str], results: dict[str, Any], started: float
) -> int:
    """One workload on fresh emulators, no cold start: its rows of the table, and the JSON."""
    from emulator_stack import scoped_environ, start_emulators, start_vertex_ai_emulator

    log_dir = Path(tempfile.mkdtemp(prefix="vertex-dispatch-bench-"))
    _progress(f"starting the emulators (logs in {log_dir}) ...")
    frozen_vertex = functools.partial(
        start_vertex_ai_emulator, config=EMULATOR_CONFIG, time_scale=0
    )
    with (
        start_emulators(
            ["pubsub", "firestore", "vertex-ai"], log_dir, launchers={"vertex-ai": frozen_vertex}
        ) as stack,
        scoped_environ(stack.env),
    ):
        env.update(stack.env)
        _create_topics(stack.env["PUBSUB_EMULATOR_HOST"])
        size = _size(args, args.only)
        _progress(f"workload {args.only} ({size}) ...")
        results[args.only] = run_workload(args.only, size, env)
    return _finish(args, results, started)


def _finish(args: argparse.Namespace, results: dict[str, Any], started: float) -> int:
    results["wall_seconds"] = time.perf_counter() - started
    rows = report.all_rows(results)
    results["table"] = [asdict(row) for row in rows]
    print(report.render_table(rows))
    json_path = args.json or RESULTS_DIR / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    _progress(f"raw numbers: {json_path}; {results['wall_seconds']:.0f} s in all")
    return 0


def _event(job_names: list[str]) -> Callable[[ColdCase, int], str]:
    """Each case's event as JSON: a fresh marker generation per sample (so each submits a new
    run), a fresh message id per job-state hint."""
    base_generation = time.time_ns() // 1000

    def event(case: ColdCase, repetition: int) -> str:
        if case.event_kind == "job_state":
            if not job_names:
                raise coldstart.ColdStartFailed(
                    "no job of vertex-dispatch was found for the job-state cold starts: the "
                    "submitting-marker cold starts should have created them; see the emulator logs"
                )
            job_name = job_names[repetition % len(job_names)]
            return coldstart.event_json(case.event_kind, job_name, str(time.time_ns()))
        generation = base_generation + repetition * len(COLD_CASES) + COLD_CASES.index(case)
        return coldstart.event_json(case.event_kind, str(generation))

    return event


def run_workload(name: str, size: int, env: Mapping[str, str]) -> dict[str, Any]:
    """Run ``bench.workloads NAME SIZE`` in a fresh process; its result line, parsed."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.workloads", name, str(size)],
        cwd=coldstart.REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=ROUND_TIMEOUT_SECONDS if name == "reconcile_round" else WORKLOAD_TIMEOUT_SECONDS,
        check=False,
    )
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(WORKLOAD_RESULT_PREFIX):
            return json.loads(line.removeprefix(WORKLOAD_RESULT_PREFIX))
    raise RuntimeError(
        f"workload {name} exited {completed.returncode} without a result; its stderr ends:\n"
        f"{completed.stderr[-3000:]}"
    )


def _summarized(
    cold: Mapping[tuple[str, str], list[dict[str, object]]],
) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for (subject, scenario), samples in cold.items():
        summary.setdefault(subject, {})[scenario] = {
            **report.summarize_cold(samples),
            "raw": samples,
        }
    return summary


def _create_topics(pubsub_host: str) -> None:
    """The topics the config names, over the emulator's REST API (no client import here)."""
    for topic in TOPICS:
        url = f"http://{pubsub_host}/v1/projects/{PROJECT}/topics/{topic}"
        urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=10).close()


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_kib = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        memory_kib = int(meminfo.read_text().split()[1])
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        epilog="subcommand: `python -m bench capacity [--help]`, the stockout benchmark",
    )
    parser.add_argument("--repeat", type=int, default=7, help="cold starts per case (default 7)")
    parser.add_argument(
        "--shards", type=int, default=10_000, help="burst: shard events (default 10000)"
    )
    parser.add_argument("--runs", type=int, default=2000, help="reconcile: active runs (2000)")
    parser.add_argument(
        "--round-runs",
        type=int,
        default=20_000,
        help="reconcile round: active runs in 3 regions (20000)",
    )
    parser.add_argument(
        "--only",
        choices=WORKLOAD_NAMES,
        help="run only this workload (no cold start), e.g. reconcile_round",
    )
    parser.add_argument(
        "--submissions", type=int, default=50, help="warm path: FLEX_START submissions (50)"
    )
    parser.add_argument(
        "--json", type=Path, help="where to write the raw numbers (default bench/results/)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="only the cold starts that need no emulator, once each (CI)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
