"""The warm-path, burst, quiet-burst and reconcile workloads, each in a fresh process of its own.

``python -m bench.workloads NAME SIZE`` runs one workload against the emulators the environment
names (the driver, ``bench.__main__``, starts them and resets them between workloads) and prints
one line ``RESULT_PREFIX`` + JSON. A process of its own gives each workload an honest peak RSS:
what one Cloud Functions instance would hold after that many events.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from bench import events, vertex_log

RESULT_PREFIX = "BENCH-WORKLOAD-RESULT "
FIRESTORE_VARIABLE = "FIRESTORE_EMULATOR_HOST"
POOL_REQUESTS = 10  # persistent-resource submissions in the warm path
SWEEP_SUBMISSIONS = 10  # hyperparameter tuning job submissions in the warm path
SEED_THREADS = 8  # concurrent creates while seeding the reconcile workload
FIRESTORE_BATCH = 500  # Firestore's limit of writes per batch


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest sample with ``fraction`` of them at or below."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _quiet_logs() -> None:
    """Format every log line as production does, but write it nowhere: the result is stdout."""
    from shared import logs

    logs.configure(logging.INFO, open(os.devnull, "w"))  # noqa: SIM115 (lives as long as the run)


# --- warm path -------------------------------------------------------------------------------


def warm_path(submissions: int) -> dict[str, Any]:
    """Latency and remote calls of FLEX_START, persistent-resource and hyperparameter tuning
    job submissions, and of job-state events, on an instance that has already handled one event
    (clients built)."""
    from bench import callcount

    callcount.install()
    _quiet_logs()
    from shared.handlers.dispatch import dispatch_event
    from shared.handlers.jobstate import handle_job_event
    from shared.handlers.services import default_services

    services = default_services()
    firestore = os.environ[FIRESTORE_VARIABLE]
    tag = uuid.uuid4().hex[:8]
    dispatch_event(events.marker(1, prefix=f"imagenet/warmup-{tag}"), services)

    ledger_methods: Counter[str] = Counter()

    def measured(handle: Callable[[], Any]) -> tuple[Any, float, Counter[str], int]:
        vertex_log.clear_requests()
        callcount.reset()
        started = time.perf_counter()
        result = handle()
        seconds = time.perf_counter() - started
        ledger_methods.update(callcount.methods_to(firestore))
        return result, seconds, vertex_log.request_counts(), callcount.calls_to(firestore)

    flex = [
        measured(lambda i=i: dispatch_event(events.marker(i + 2, f"imagenet/w{tag}-{i}"), services))
        for i in range(submissions)
    ]
    pool = [
        measured(lambda i=i: dispatch_event(events.pool_request(f"{tag}{i:06d}"), services))
        for i in range(POOL_REQUESTS)
    ]
    sweep = [
        measured(
            lambda i=i: dispatch_event(
                events.marker(i + 2, f"{events.SWEEP_PREFIX}-w{tag}-{i}"), services
            )
        )
        for i in range(SWEEP_SUBMISSIONS)
    ]
    submission_ledger_methods = dict(ledger_methods)
    ledger_methods.clear()
    job_names = [result.job_name for result, *_ in flex]
    job_state = [
        measured(lambda name=name: handle_job_event(events.job_state(name, name[-8:]), services))
        for name in job_names
    ]
    return {
        "flex_start": _summary(flex),
        "persistent_resource": _summary(pool),
        "sweep": _summary(sweep),
        "job_state": _summary(job_state),
        "ledger_methods_all_submissions": submission_ledger_methods,
        "ledger_methods_all_job_state_events": dict(ledger_methods),
        "peak_rss_mib": peak_rss_mib(),
    }


def _summary(samples: list[tuple[Any, float, Counter[str], int]]) -> dict[str, Any]:
    seconds = [s for _, s, _, _ in samples]
    vertex_calls = [sum(counts.values()) for _, _, counts, _ in samples]
    by_method: Counter[str] = Counter()
    for _, _, counts, _ in samples:
        by_method.update(counts)
    ledger_calls = [calls for *_, calls in samples]
    return {
        "count": len(samples),
        "outcomes": dict(Counter(_outcome(result) for result, *_ in samples)),
        "p50_seconds": statistics.median(seconds),
        "p99_seconds": percentile(seconds, 0.99),
        "max_seconds": max(seconds),
        "vertex_calls_max": max(vertex_calls),
        "vertex_calls_mean": statistics.fmean(vertex_calls),
        "vertex_calls_by_method": dict(by_method),
        "ledger_round_trips_max": max(ledger_calls),
        "ledger_round_trips_mean": statistics.fmean(ledger_calls),
        "samples_seconds": seconds,
    }


def _outcome(result: Any) -> str:
    return str(result.outcome)


# --- burst -----------------------------------------------------------------------------------


def burst(shards: int) -> dict[str, Any]:
    """``shards`` unmatched shard events and one marker, each delivered twice, one instance."""
    _quiet_logs()
    from shared.handlers.dispatch import dispatch_event
    from shared.handlers.services import default_services

    services = default_services()
    generation = time.time_ns() // 1000
    outcomes: Counter[str] = Counter()
    vertex_log.clear_requests()
    unmatched_seconds = 0.0
    for index in range(shards):
        event = events.shard(index, generation + index)
        for _delivery in range(2):
            started = time.perf_counter()
            result = dispatch_event(event, services)
            unmatched_seconds += time.perf_counter() - started
            outcomes[_outcome(result)] += 1
    rss_after_shards = peak_rss_mib()
    marker_started = time.perf_counter()
    marker = events.marker(generation + shards)
    for _delivery in range(2):
        outcomes[_outcome(dispatch_event(marker, services))] += 1
    marker_seconds = time.perf_counter() - marker_started
    return {
        "shard_events": 2 * shards,
        "marker_events": 2,
        "unmatched_events_per_second": 2 * shards / unmatched_seconds,
        "unmatched_seconds": unmatched_seconds,
        "marker_seconds": marker_seconds,
        "events_per_second": (2 * shards + 2) / (unmatched_seconds + marker_seconds),
        "outcomes": dict(outcomes),
        "jobs_created": vertex_log.request_counts()["CreateCustomJob"],
        "peak_rss_after_shards_mib": rss_after_shards,
        "peak_rss_mib": peak_rss_mib(),
    }


# --- quiet burst -----------------------------------------------------------------------------

QUIET_QUIET_FOR_MINUTES = 10
QUIET_MAX_GAP_SECONDS = 1.0  # between two shards' write times: ~3 hours for 10,000 shards
QUIET_SPREAD = 60.0  # seconds: how late each delivery of a shard's event may come


def quiet_burst(shards: int) -> dict[str, Any]:
    """``shards`` shards of one ``completion: quiet`` dataset, each delivered twice and out of
    order (up to ``QUIET_SPREAD`` seconds late), to one instance, one at a time: events per
    second, and the ledger calls they cost (counted at the gRPC channel: ``Commit`` is a write,
    ``BatchGetDocuments`` a read)."""
    import dataclasses
    import random
    from datetime import UTC, timedelta

    from bench import callcount

    callcount.install()
    _quiet_logs()
    from shared.config.model import Completion, GcsRoute, QuietRule
    from shared.handlers.dispatch import dispatch_event
    from shared.handlers.services import Services, default_services
    from shared.model.runkeys import dataset_version_run_key, run_id

    base = default_services()
    template = next(iter(base.config.templates))
    route = GcsRoute(  # built in code: the bench's YAML keeps its one marker route
        name="bench-quiet",
        bucket=events.BUCKET,
        match="exports/**",
        template=template,
        completion=Completion.QUIET,
        quiet=QuietRule(
            dataset="exports/{date}/", quiet_for=timedelta(minutes=QUIET_QUIET_FOR_MINUTES)
        ),
    )
    services = Services(dataclasses.replace(base.config, routes=(route, *base.config.routes)))
    prefix = f"exports/{uuid.uuid4().hex[:12]}/"
    rng = random.Random(16)
    written = datetime.now(UTC) - timedelta(hours=4)
    arrivals = []
    for index in range(shards):
        written += timedelta(seconds=rng.uniform(0, QUIET_MAX_GAP_SECONDS))
        event = events.quiet_shard(f"{prefix}part-{index:05d}.parquet", index + 1, written)
        # Delivered as written, but each of its two deliveries up to QUIET_SPREAD seconds late:
        # out of order within that spread, as Eventarc delivers. (A full shuffle would flatter
        # the memory: one object near the end would cover nearly all the others.)
        for _delivery in range(2):
            arrivals.append((written + timedelta(seconds=rng.uniform(0, QUIET_SPREAD)), event))
    deliveries = [event for _, event in sorted(arrivals, key=lambda pair: pair[0])]
    vertex_log.clear_requests()
    firestore = os.environ[FIRESTORE_VARIABLE]
    callcount.reset()
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()
    for event in deliveries:
        outcomes[_outcome(dispatch_event(event, services))] += 1
    seconds = time.perf_counter() - started
    methods = callcount.methods_to(firestore)
    from shared.adapters import clients
    from shared.adapters.ledger import DEFAULT_COLLECTION

    the_run_id = run_id(dataset_version_run_key(events.BUCKET, prefix, 1))
    client = clients.firestore_client(base.config.project)
    document = client.collection(DEFAULT_COLLECTION).document(the_run_id).get()
    return {
        "shards": shards,
        "events": len(deliveries),
        "events_per_second": len(deliveries) / seconds,
        "seconds": seconds,
        "quiet_for_minutes": QUIET_QUIET_FOR_MINUTES,
        "outcomes": dict(outcomes),
        "ledger_writes": methods.get("Commit", 0),
        "ledger_reads": methods.get("BatchGetDocuments", 0),
        "ledger_calls_by_method": methods,
        "run_status": (document.to_dict() or {}).get("status"),
        "run_written_after_create": document.update_time != document.create_time,
        "jobs_created": vertex_log.request_counts()["CreateCustomJob"],
        "peak_rss_mib": peak_rss_mib(),
    }


# --- reconcile -------------------------------------------------------------------------------


def reconcile_at_scale(runs: int) -> dict[str, Any]:
    """One reconcile tick over ``runs`` active runs whose jobs are spread over two regions."""
    _quiet_logs()
    from shared.adapters import vertex
    from shared.handlers.reconcile import reconcile
    from shared.handlers.services import default_services

    services = default_services()
    seed_started = time.perf_counter()
    regions = _seed_runs(services, runs)
    seed_seconds = time.perf_counter() - seed_started
    vertex_log.clear_requests()
    started = time.perf_counter()
    report = reconcile(services, services.now())
    seconds = time.perf_counter() - started
    calls = vertex_log.request_counts()
    page_size = vertex.LIST_PAGE_SIZE
    return {
        "runs": runs,
        "regions": regions,
        "page_size": page_size,
        "seed_seconds": seed_seconds,
        "tick_seconds": seconds,
        "vertex_calls": sum(calls.values()),
        "vertex_calls_by_method": dict(calls),
        "vertex_calls_target": 2 * -(-runs // page_size) + len(regions),
        "runs_read": report.runs_read,
        "jobs_listed": report.jobs_listed,
        "states_recorded": report.states_recorded,
        "jobs_not_listed": len(report.jobs_not_listed),
        "errors": list(report.errors),
        "peak_rss_mib": peak_rss_mib(),
    }


def _seed_runs(
    services: Any,
    runs: int,
    regions: Sequence[str] = (),
    timings: dict[str, float] | None = None,
    spread_seconds: float = 0,
) -> list[str]:
    """Create ``runs`` real-shaped jobs (alternating the template's two placements' regions, or
    the FLEX_START placement in each of ``regions``, waiting without a limit) and record each as
    a SUBMITTED run, as dispatch would have, in batched writes; the regions used. With
    ``spread_seconds``, the emulator's clock moves on by that much in all, between chunks of
    jobs. ``timings`` gets the seconds spent creating the jobs and writing the ledger."""
    import dataclasses
    from datetime import timedelta

    from shared.adapters import clients, vertex
    from shared.adapters.ledger import DEFAULT_COLLECTION, Attempt, Run, RunStatus, run_to_document
    from shared.model import runkeys
    from shared.policy import jobspec
    from shared.policy.records import placement_record

    config = services.config
    template = config.templates["resnet-a100"]
    placements = template.placements[:2]
    if regions:
        first = template.placements[0]
        placements = [
            dataclasses.replace(first, region=region, max_wait=timedelta(0)) for region in regions
        ]
    tag = uuid.uuid4().hex[:8]

    def create(index: int) -> Run:
        run_key = f"bench-reconcile:{tag}:{index}"
        run_id = runkeys.run_id(run_key)
        placement = placements[index % len(placements)]
        params = {"dataset_uri": f"gs://{events.BUCKET}/reconcile/{index}/"}
        rendered = jobspec.render_job(
            template,
            params,
            placement,
            project=config.project,
            default_region=config.region,
            run_id=run_id,
            attempt=1,
        )
        job = vertex.create_custom_job(rendered.parent, rendered.custom_job)
        created_at: datetime = job.create_time
        attempt = Attempt(
            number=1,
            placement=placement_record(placement),
            region=rendered.region,
            parent=rendered.parent,
            intent_at=created_at,
            job_name=job.name,
            state=job.state.name,
            job_created_at=created_at,  # as dispatch records it (the listing window's bounds)
        )
        return Run(
            run_id=run_id,
            run_key=run_key,
            route="imagenet-daily",
            template=template.name,
            trigger={"kind": "BenchSeed", "index": index},
            params=params,
            status=RunStatus.SUBMITTED,
            attempts=(attempt,),
            created_at=created_at,
            updated_at=created_at,
        )

    started = time.perf_counter()
    chunks = ROUND_CHUNKS if spread_seconds else 1
    chunk = -(-runs // chunks)
    seeded: list[Run] = []
    with ThreadPoolExecutor(SEED_THREADS) as pool:
        for start in range(0, runs, chunk):
            seeded += pool.map(create, range(start, min(start + chunk, runs)))
            if spread_seconds:
                vertex_log.advance(spread_seconds / chunks)
    jobs_done = time.perf_counter()
    firestore = clients.firestore_client(config.project)
    collection = firestore.collection(DEFAULT_COLLECTION)
    for start in range(0, len(seeded), FIRESTORE_BATCH):
        batch = firestore.batch()
        for run in seeded[start : start + FIRESTORE_BATCH]:
            batch.set(collection.document(run.run_id), run_to_document(run))
        batch.commit()
    if timings is not None:
        timings["jobs"] = jobs_done - started
        timings["ledger"] = time.perf_counter() - jobs_done
    return sorted({run.attempts[0].region for run in seeded})


# --- reconcile round ---------------------------------------------------------------------------

ROUND_REGIONS = ("us-central1", "us-east4", "europe-west4")
ROUND_SPREAD_HOURS = 10  # the runs were started over this long, as in production, not at once
ROUND_CHUNKS = 100  # the emulator's clock moves on once per chunk of jobs created
FUNCTION_TIMEOUT_SECONDS = 300  # deploy/terraform's function_timeout_seconds default


def reconcile_round(runs: int) -> dict[str, Any]:
    """Ticks of the round-robin over ``runs`` active runs in three regions, with the config's
    ``reconcile_max_runs``, until every run was read: how many ticks, and each tick's Vertex AI
    calls and wall time.

    The runs are started over ``ROUND_SPREAD_HOURS`` of the emulator's clock (a chunk of jobs,
    then the clock moves on), and their jobs never end (FLEX_START waiting without a limit, or
    running for 1000 h), so all stay active; the ticks run on the emulator's clock.
    """
    import dataclasses

    _quiet_logs()
    from shared.adapters.ledger import Ledger, RunPage
    from shared.handlers.reconcile import reconcile
    from shared.handlers.services import default_services

    # The emulator's clock, read once per tick (it is frozen): read per call, it would add one
    # admin request per run the tick reads (the owed-actions check asks for the time).
    clock = [vertex_log.now()]
    services = dataclasses.replace(default_services(), now=lambda: clock[0])
    max_runs = services.config.reconcile_max_runs
    vertex_log.add_outcome({"result": "succeeded", "duration": "1000h"})
    seed_started = time.perf_counter()
    timings: dict[str, float] = {}
    regions = _seed_runs(
        services,
        runs,
        regions=ROUND_REGIONS,
        timings=timings,
        spread_seconds=ROUND_SPREAD_HOURS * 3600,
    )
    seed_seconds = time.perf_counter() - seed_started

    read: list[str] = []  # every run id the ticks read, in order
    next_runs = Ledger.next_runs

    def counted(ledger: Ledger, *args: Any, **kwargs: Any) -> RunPage:
        page = next_runs(ledger, *args, **kwargs)
        read.extend(snapshot.run.run_id for snapshot in page.snapshots)
        return page

    Ledger.next_runs = counted  # type: ignore[method-assign]
    bound = -(-runs // max_runs)
    ticks: list[dict[str, Any]] = []
    covered_after = None
    while covered_after is None and len(ticks) < bound + 2:
        clock[0] = vertex_log.now()
        vertex_log.clear_requests()
        started = time.perf_counter()
        report = reconcile(services, services.now())
        seconds = time.perf_counter() - started
        calls = vertex_log.request_counts()
        ticks.append(
            {
                "seconds": seconds,
                "vertex_calls": sum(calls.values()),
                "vertex_calls_by_method": dict(calls),
                "runs_read": report.runs_read,
                "round_wrapped": report.round_wrapped,
                "jobs_listed": report.jobs_listed,
                "states_recorded": report.states_recorded,
                "errors": len(report.errors),
            }
        )
        if len(set(read)) >= runs:
            covered_after = len(ticks)
    seconds = [tick["seconds"] for tick in ticks]
    calls_per_tick = [tick["vertex_calls"] for tick in ticks]
    return {
        "runs": runs,
        "regions": regions,
        "reconcile_max_runs": max_runs,
        "seed_seconds": seed_seconds,
        "seed_jobs_seconds": timings["jobs"],
        "seed_ledger_seconds": timings["ledger"],
        "ticks_to_cover": covered_after,
        "ticks_bound": bound,
        # Of the first ``runs`` reads: 0 when no run was read twice before every run was read.
        "runs_read_twice_before_covered": runs - len(set(read[:runs])),
        "tick_seconds_p50": statistics.median(seconds),
        "tick_seconds_max": max(seconds),
        "vertex_calls_per_tick_p50": statistics.median(calls_per_tick),
        "vertex_calls_per_tick_max": max(calls_per_tick),
        "function_timeout_seconds": FUNCTION_TIMEOUT_SECONDS,
        "ticks": ticks,
        "peak_rss_mib": peak_rss_mib(),
    }


WORKLOADS: dict[str, Callable[[int], dict[str, Any]]] = {
    "warm": warm_path,
    "burst": burst,
    "quiet_burst": quiet_burst,
    "reconcile": reconcile_at_scale,
    "reconcile_round": reconcile_round,
}


def main(argv: list[str]) -> None:
    name, size = argv
    result = WORKLOADS[name](int(size))
    print(RESULT_PREFIX + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
