"""``python -m bench capacity``: the stockout benchmark, a simulated week of scarce GPUs.

Owns the harness: it starts the Pub/Sub and Firestore emulators (``emulator_stack``) and our
Vertex AI emulator in this process with a frozen clock, generates the trace from a seed
(``bench.capacity_trace``) into the emulator's capacity timeline, and plays the same trace under
three policies, one after the other, each on a reset emulator and a fresh ledger collection:

- ``naive``: what the seed page does: one FLEX_START ``CreateCustomJob`` per delivered trigger
  (a plain ``aiplatform_v1`` client call), no ledger, no retry;
- ``static``: our real handlers (``dispatch_event``, ``handle_job_event`` fed by the log-sink
  stand-in, a ``reconcile`` tick per step), the chain as written;
- ``learned``: the same with ``placement_order: learned`` and ``start_by`` (when the loader
  knows them) and resume (when the emulator reports redone work).

Time is driven here: the emulator's clock moves in steps of ``--step`` simulated minutes (and to
each trigger's exact time); the handlers' ``now`` returns the same simulated time. At each step
the log sink's hints are delivered to the job-state handler, the reconciler ticks, and the retry
messages it (or a decision) published are pulled from a Pub/Sub subscription and delivered to
dispatch, a seeded share of them twice; a delivery that raises is delivered again next step
(at least once, as Eventarc does). Figures: ``bench.capacity_summary``. Progress goes to stderr;
the table is the only thing on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bench import capacity_summary as summary
from bench import capacity_trace as tracing
from bench.capacity_trace import Trace, TraceSettings

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
DISPATCH_CONFIG = BENCH_DIR / "capacity-config.yaml"
TEMPLATE = "resnet-a100"
BUCKET = "bench-datasets"
TOPICS = {
    "alerts": "capacity-alerts",
    "requests": "capacity-requests",
    "hints": "capacity-job-events",
}
RUN_LABEL = "vd-run"  # shared.policy.jobspec.RUN_LABEL
NAIVE_LABEL = "bench-trigger"
NAIVE_MAX_WAIT_S = 2 * 3600  # the seed page's FLEX_START max wait, as the static chain's first
NAIVE_TIMEOUT_S = 8 * 3600
SECOND_DELIVERY_S = 30.0  # a duplicate delivery of a trigger comes this much later
REDELIVERED_SHARE = 0.1  # retry messages delivered twice
# Learned-policy keys (issue 14), added to the template only when the loader knows them.
LEARNED_ORDER = {"placement_order": "learned"}
DEFAULT_START_BY = "12h"
PROGRESS_ENDPOINT = "progress"  # the emulator's report of work redone per output dir (resume)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    started = time.perf_counter()
    settings = TraceSettings(seed=args.seed, triggers=args.triggers, days=args.days)
    trace = tracing.generate(settings)
    _progress(
        f"trace: {len(trace.triggers)} triggers over {settings.days:g} days "
        f"(seed {settings.seed}), "
        f"primary in stock {trace.notes['primary_in_stock_share']:.0%} of the time, pool busy "
        f"{trace.notes['pool_busy_share']:.0%}, Spot preempting "
        f"{trace.notes['spot_preempting_share']:.0%}"
    )
    results: dict[str, Any] = {
        "started_at": datetime.now().astimezone().isoformat(),
        "command": " ".join(["python", "-m", "bench", "capacity", *(argv or sys.argv[2:])]),
        "settings": {
            **asdict(settings),
            "step_minutes": args.step,
            "policies": args.policies,
            "learned_start_by": args.start_by or None,
        },
        "trace": {
            **trace.notes,
            "triggers": len(trace.triggers),
            "capacity_changes": len(trace.capacity),
        },
        "policies": {},
    }
    _quiet_logs()
    with _emulators() as world:
        for policy in args.policies:
            policy_started = time.perf_counter()
            _progress(f"policy {policy}: playing the trace ...")
            figures = play(policy, trace, world, step_s=args.step * 60.0, start_by=args.start_by)
            figures["wall_seconds"] = round(time.perf_counter() - policy_started, 1)
            results["policies"][policy] = figures
            _progress(
                f"policy {policy}: success {figures['success_rate']:.3f}, "
                f"{figures['wall_seconds']:.0f} s"
            )
    results["wall_seconds"] = round(time.perf_counter() - started, 1)
    results["targets"] = summary.verdicts(results["policies"])
    print(summary.render_table(results["policies"]))
    json_path = args.json or RESULTS_DIR / f"capacity-{time.strftime('%Y%m%d-%H%M%S')}.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    _progress(f"raw figures: {json_path}; {results['wall_seconds']:.0f} s in all")
    return 0


# --- the emulators ---------------------------------------------------------------------------


@dataclass
class Emulators:
    """The running emulators and what every policy shares."""

    vertex_rest_url: str = ""
    progress: bool = False  # the emulator models training progress (redone work is measured)

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.vertex_rest_url}/emulator/v1/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None


@contextlib.contextmanager
def _emulators() -> Iterator[Emulators]:
    from emulator_stack import scoped_environ, start_emulators

    log_dir = Path(tempfile.mkdtemp(prefix="vertex-dispatch-capacity-"))
    _progress(f"starting the Pub/Sub and Firestore emulators (logs in {log_dir}) ...")
    with (
        start_emulators(["pubsub", "firestore"], log_dir) as stack,
        scoped_environ({**stack.env, "GOOGLE_CLOUD_PROJECT": tracing.PROJECT}),
    ):
        _create_topics(stack.env["PUBSUB_EMULATOR_HOST"])
        yield Emulators()


def _vertex_server(trace: Trace, world: Emulators) -> Any:
    """The emulator for one policy's week; with the progress model when this emulator has one
    (its outcome keys ``work`` and ``checkpoint_every``), else without (``world.progress``)."""
    from vertex_ai_emulator.config import EmulatorConfig
    from vertex_ai_emulator.errors import ConfigError
    from vertex_ai_emulator.server import EmulatorServer

    try:
        config = EmulatorConfig.from_dict(tracing.emulator_config(trace, progress=True))
        world.progress = True
    except ConfigError:
        config = EmulatorConfig.from_dict(tracing.emulator_config(trace, progress=False))
        world.progress = False
    return EmulatorServer(config, time_scale=0)


def _create_topics(pubsub_host: str) -> None:
    for topic in TOPICS.values():
        url = f"http://{pubsub_host}/v1/projects/{tracing.PROJECT}/topics/{topic}"
        with contextlib.suppress(urllib.error.HTTPError):  # 409: made by an earlier run
            urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=10).close()


# --- one policy's week -----------------------------------------------------------------------


@dataclass
class Clock:
    """The simulated time every party reads: the emulator's (moved only by ``advance``)."""

    start: datetime
    offset_s: float = 0.0

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.offset_s)


@dataclass(order=True)
class Happening:
    """Something due at ``at_s`` in the trace; ``order`` breaks ties (triggers before ticks)."""

    at_s: float
    order: int
    what: str = field(compare=False)
    payload: Any = field(compare=False, default=None)


def schedule(trace: Trace, step_s: float) -> list[Happening]:
    """Everything the harness does, in time order: deliveries, the pool's other system, Spot's
    preempting windows, and the step ticks up to the trace's horizon."""
    found: list[Happening] = []
    for trigger in trace.triggers:
        for delivery in range(trigger.deliveries):
            found.append(
                Happening(trigger.at_s + delivery * SECOND_DELIVERY_S, 1, "trigger", trigger)
            )
    for index, window in enumerate(trace.pool_busy):
        found.append(Happening(window.start_s, 0, "blocker", index))
    for window in trace.spot_preempting:
        found.append(Happening(window.start_s, 0, "spot", trace.settings.preempt_after_s))
        found.append(Happening(window.end_s, 0, "spot", None))
    ticks = int(trace.settings.horizon_s // step_s)
    found += [Happening(step * step_s, 2, "tick") for step in range(1, ticks + 1)]
    return sorted(found)


def play(
    policy: str, trace: Trace, world: Emulators, *, step_s: float, start_by: str | None
) -> dict[str, Any]:
    """Play the whole trace under ``policy`` on a fresh emulator and ledger; its figures."""
    from emulator_stack import scoped_environ

    with (
        _vertex_server(trace, world) as server,
        scoped_environ(
            {
                "VERTEX_AI_EMULATOR_GRPC_HOST": server.grpc_target,
                "VERTEX_AI_EMULATOR_HOST": server.rest_host,
            }
        ),
    ):
        from shared.adapters import clients

        clients.forget_clients()  # each policy's emulator listens on new ports
        world.vertex_rest_url = server.rest_url
        clock = Clock(_emulator_now(world))
        player = (
            NaivePlayer(world, clock)
            if policy == "naive"
            else OurPlayer(policy, world, clock, start_by)
        )
        last_trigger_s = trace.triggers[-1].at_s + SECOND_DELIVERY_S
        for happening in schedule(trace, step_s):
            if happening.at_s > clock.offset_s:
                world.admin("POST", "clock:advance", {"seconds": happening.at_s - clock.offset_s})
                clock.offset_s = happening.at_s
            if happening.what == "trigger":
                player.trigger(happening.payload)
            elif happening.what == "blocker":
                _start_blocker(world, happening.payload)
            elif happening.what == "spot":
                seconds = happening.payload
                world.admin(
                    "PUT",
                    "spot",
                    {"preempt_after": None if seconds is None else f"{int(seconds)}s"},
                )
            elif player.tick() and clock.offset_s > last_trigger_s:
                break  # every run has ended: the drain is over
        return player.figures(trace)


def _emulator_now(world: Emulators) -> datetime:
    stamp = world.admin("GET", "clock")["now"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _start_blocker(world: Emulators, index: int) -> None:
    """Another system's job that takes every replica of the pool for its busy window."""
    from google.cloud import aiplatform_v1

    job = aiplatform_v1.CustomJob(
        display_name=tracing.blocker_name(index),
        job_spec=aiplatform_v1.CustomJobSpec(
            persistent_resource_id=tracing.POOL_ID,
            # The first pool runs the primary replica (one); the second the rest of the pool.
            worker_pool_specs=[
                _worker_pool(replicas=1, image="other/job:1"),
                _worker_pool(replicas=tracing.POOL_REPLICAS - 1, image="other/job:1"),
            ],
        ),
    )
    _plain_client(world).create_custom_job(parent=_parent(tracing.PRIMARY_REGION), custom_job=job)


def _worker_pool(replicas: int = 1, args: list[str] | None = None, image: str = "") -> Any:
    from google.cloud import aiplatform_v1

    return aiplatform_v1.WorkerPoolSpec(
        machine_spec=aiplatform_v1.MachineSpec(
            machine_type=tracing.MACHINE_TYPE,
            accelerator_type=tracing.ACCELERATOR,
            accelerator_count=1,
        ),
        replica_count=replicas,
        disk_spec=aiplatform_v1.DiskSpec(boot_disk_type="pd-ssd", boot_disk_size_gb=100),
        container_spec=aiplatform_v1.ContainerSpec(
            image_uri=image or "us-docker.pkg.dev/local-project/train/resnet:1.4",
            args=args or [],
        ),
    )


def _plain_client(world: Emulators) -> Any:
    """A plain ``aiplatform_v1`` client on the emulator's REST port (as the seed page's
    function would be, pointed at the emulator), not our adapter."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobServiceClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options={"api_endpoint": world.vertex_rest_url},
    )


def _parent(region: str) -> str:
    return f"projects/{tracing.PROJECT}/locations/{region}"


def list_jobs(world: Emulators, clock: Clock) -> list[dict[str, Any]]:
    """Every CustomJob the emulator holds in both regions, as plain dicts with trace seconds."""
    client = _plain_client(world)
    found = []
    for region in (tracing.PRIMARY_REGION, tracing.SECOND_REGION):
        for job in client.list_custom_jobs(request={"parent": _parent(region), "page_size": 100}):
            found.append(
                {
                    "name": job.name,
                    "display_name": job.display_name,
                    "labels": dict(job.labels),
                    "state": job.state.name,
                    "created_s": _seconds(job.create_time, clock),
                    "started_s": _seconds(job.start_time, clock),
                    "ended_s": _seconds(job.end_time, clock),
                    "gpus": sum(
                        pool.replica_count * pool.machine_spec.accelerator_count
                        for pool in job.job_spec.worker_pool_specs
                    ),
                }
            )
    return found


def _seconds(stamp: Any, clock: Clock) -> float | None:
    if not stamp:
        return None
    moment: datetime = stamp
    return (moment - clock.start).total_seconds()


def _records(jobs: list[dict[str, Any]], owner_label: str) -> list[summary.JobRecord]:
    return [
        summary.JobRecord(
            name=job["name"],
            owner=job["labels"].get(owner_label, ""),
            state=job["state"],
            created_s=job["created_s"],
            started_s=job["started_s"],
            ended_s=job["ended_s"],
            gpus=job["gpus"],
        )
        for job in jobs
        if not job["display_name"].startswith(tracing.BLOCKER_PREFIX)
    ]


class NaivePlayer:
    """The seed page's function: one FLEX_START job per delivered trigger, nothing else."""

    def __init__(self, world: Emulators, clock: Clock) -> None:
        self.world = world
        self.clock = clock
        self.client = _plain_client(world)

    def trigger(self, trigger: tracing.Trigger) -> None:
        from google.cloud import aiplatform_v1
        from google.protobuf import duration_pb2

        dataset = f"gs://{BUCKET}/{trigger.object_name.removesuffix('/_SUCCESS')}/"
        job = aiplatform_v1.CustomJob(
            display_name=f"resnet-{trigger.index + 1}",  # the object's generation, as seeded
            labels={NAIVE_LABEL: str(trigger.index)},
            job_spec=aiplatform_v1.CustomJobSpec(
                worker_pool_specs=[_worker_pool(args=[f"--data={dataset}", "--epochs=90"])],
                service_account="trainer@local-project.iam.gserviceaccount.com",
                scheduling=aiplatform_v1.Scheduling(
                    timeout=duration_pb2.Duration(seconds=NAIVE_TIMEOUT_S),
                    strategy=aiplatform_v1.Scheduling.Strategy.FLEX_START,
                    max_wait_duration=duration_pb2.Duration(seconds=NAIVE_MAX_WAIT_S),
                ),
            ),
        )
        self.client.create_custom_job(
            parent=_parent(tracing.PRIMARY_REGION), custom_job=job, retry=None
        )

    def tick(self) -> bool:
        return False  # no ledger to ask: the trace plays to its horizon

    def figures(self, trace: Trace) -> dict[str, Any]:
        jobs = _records(list_jobs(self.world, self.clock), NAIVE_LABEL)
        by_trigger: dict[str, list[summary.JobRecord]] = {}
        for job in jobs:
            by_trigger.setdefault(job.owner, []).append(job)
        outcomes = [
            summary.TriggerOutcome(
                t.index,
                t.at_s,
                summary.first_running(by_trigger.get(str(t.index), [])),
                any(j.state == "JOB_STATE_SUCCEEDED" for j in by_trigger.get(str(t.index), [])),
            )
            for t in trace.triggers
        ]
        figures = summary.summarize(
            outcomes,
            jobs,
            summary.first_job_per_owner(jobs),
            self.clock.offset_s,
            alerts=0,
            # It never resubmits, so it redoes nothing; its duplicates are counted as such.
            redone_gpu_hours=0.0 if self.world.progress else None,
        )
        figures["alerts_note"] = "the seed page's function raises no alert: its failures are silent"
        return figures


class OurPlayer:
    """Our handlers, in this process, on the emulators: dispatch, job-state, reconcile."""

    def __init__(self, policy: str, world: Emulators, clock: Clock, start_by: str | None) -> None:
        from google.cloud import pubsub_v1

        from emulator_stack.logsink import LogSink
        from shared.adapters import clients
        from shared.adapters.ledger import Ledger
        from shared.handlers.services import Services

        self.policy = policy
        self.world = world
        self.clock = clock
        self.rng = random.Random(f"{policy}:deliveries")
        config, self.features = load_policy_config(policy, start_by)
        tag = uuid.uuid4().hex[:8]
        ledger = Ledger(
            clients.firestore_client(tracing.PROJECT), f"capacity-{policy}-{tag}", clock=clock.now
        )
        self.services = Services(config, now=clock.now, _ledger=ledger)
        self.subscriber = pubsub_v1.SubscriberClient()
        self.subscriptions = {}
        for kind in ("requests", "alerts"):
            name = f"projects/{tracing.PROJECT}/subscriptions/capacity-{kind}-{policy}-{tag}"
            self.subscriber.create_subscription(
                name=name, topic=f"projects/{tracing.PROJECT}/topics/{TOPICS[kind]}"
            )
            self.subscriptions[kind] = name
        self.hints: list[tuple[bytes, dict[str, str]]] = []
        self.sink = LogSink(
            f"{world.vertex_rest_url}/emulator/v1",
            lambda _topic, data, attributes: self._hinted(data, attributes),
            TOPICS["hints"],
        )
        self.sink.skip_to_now()
        self.run_of_trigger: dict[int, str] = {}
        self.undelivered: list[tuple[str, Any]] = []  # deliveries that raised: again next step
        self.counts: dict[str, int] = {
            "trigger_deliveries": 0,
            "hints_delivered": 0,
            "retries_delivered": 0,
            "deliveries_failed": 0,
            "reconcile_ticks": 0,
        }
        self.message_ids = iter(range(1, 10**9))

    def _hinted(self, data: bytes, attributes: dict[str, str]) -> str:
        self.hints.append((data, dict(attributes)))
        return str(len(self.hints))

    def trigger(self, trigger: tracing.Trigger) -> None:
        from bench import events

        event = events.object_finalized(trigger.object_name, trigger.index + 1, BUCKET)
        event["time"] = self.clock.now().isoformat().replace("+00:00", "Z")
        self._deliver("trigger", (trigger, event))

    def _deliver(self, kind: str, payload: Any) -> None:
        from shared.handlers.dispatch import dispatch_event
        from shared.handlers.jobstate import handle_job_event

        try:
            if kind == "trigger":
                trigger, event = payload
                result = dispatch_event(event, self.services)
                if result.run_id:
                    self.run_of_trigger.setdefault(trigger.index, result.run_id)
                self.counts["trigger_deliveries"] += 1
            elif kind == "hint":
                handle_job_event(payload, self.services)
                self.counts["hints_delivered"] += 1
            else:
                dispatch_event(payload, self.services)
                self.counts["retries_delivered"] += 1
        except Exception as error:  # as Eventarc would: the event comes again
            self.counts["deliveries_failed"] += 1
            _progress(f"  {kind} delivery raised {type(error).__name__}: {error}; delivered again")
            self.undelivered.append((kind, payload))

    def tick(self) -> bool:
        """One step: pending redeliveries, the log sink's hints, a reconcile tick, the retries
        it published. True when no run is active any more."""
        from bench import events
        from shared.handlers.reconcile import reconcile

        pending, self.undelivered = self.undelivered, []
        for kind, payload in pending:
            self._deliver(kind, payload)
        self.sink.pump()
        hints, self.hints = self.hints, []
        for data, attributes in hints:
            event = events.pubsub_message(
                TOPICS["hints"], f"hint-{next(self.message_ids)}", json.loads(data), attributes
            )
            self._deliver("hint", event)
        report = reconcile(self.services, self.clock.now())
        self.counts["reconcile_ticks"] += 1
        for data, attributes, message_id in self._pull("requests"):
            event = events.pubsub_message(
                TOPICS["requests"], message_id, json.loads(data), attributes
            )
            self._deliver("retry", event)
            if self.rng.random() < REDELIVERED_SHARE:
                self._deliver("retry", event)
        return report.runs_read == 0 and not self.undelivered

    def _pull(self, kind: str) -> list[tuple[bytes, dict[str, str], str]]:
        found = []
        while True:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                response = self.subscriber.pull(
                    subscription=self.subscriptions[kind],
                    max_messages=1000,
                    return_immediately=True,
                    timeout=10,
                )
            received = list(response.received_messages)
            if not received:
                return found
            self.subscriber.acknowledge(
                subscription=self.subscriptions[kind], ack_ids=[m.ack_id for m in received]
            )
            found += [
                (m.message.data, dict(m.message.attributes), m.message.message_id) for m in received
            ]

    def figures(self, trace: Trace) -> dict[str, Any]:
        ledger = self.services.ledger
        jobs = _records(list_jobs(self.world, self.clock), RUN_LABEL)
        by_run: dict[str, list[summary.JobRecord]] = {}
        for job in jobs:
            by_run.setdefault(job.owner, []).append(job)
        owned: set[str] = set()
        outcomes = []
        statuses: dict[str, int] = {}
        resubmissions = 0
        by_placement: dict[str, dict[str, int]] = {}
        orders: dict[str, int] = {}
        unsuccessful: list[dict[str, Any]] = []  # what each run that did not succeed tried
        for trigger in trace.triggers:
            run_id = self.run_of_trigger.get(trigger.index)
            snapshot = ledger.get_run(run_id) if run_id else None
            run = snapshot.run if snapshot else None
            status = run.status.value if run else "NOT_OPENED"
            statuses[status] = statuses.get(status, 0) + 1
            if run is not None:
                owned |= {a.job_name for a in run.attempts if a.job_name}
                _count_attempts(run, by_placement)
                order = ",".join(map(str, run.placement_order or ())) or "as written"
                orders[order] = orders.get(order, 0) + 1
                if status != "SUCCEEDED":
                    unsuccessful.append(_tried(trigger, run))
                resubmissions += max(0, len([a for a in run.attempts if a.job_name]) - 1)
            run_jobs = by_run.get(run_id or "", [])
            outcomes.append(
                summary.TriggerOutcome(
                    trigger.index,
                    trigger.at_s,
                    summary.first_running(run_jobs),
                    status == "SUCCEEDED"
                    and any(j.state == "JOB_STATE_SUCCEEDED" for j in run_jobs),
                )
            )
        alerts = self._pull("alerts")
        directories = progress_report(self.world) if self.world.progress else None
        redone, bound, resumed = summary.redone(directories or [])
        figures = summary.summarize(
            outcomes,
            jobs,
            owned,
            self.clock.offset_s,
            alerts=len(alerts),
            redone_gpu_hours=None if directories is None else redone,
        )
        if directories is not None:
            figures["redone_gpu_hours_bound"] = round(bound, 3)
            figures["resubmissions_that_ran_again"] = resumed
            figures["output_dirs_tracked"] = len(directories)
        alert_kinds: dict[str, int] = {}
        for data, _attributes, _id in alerts:
            reason = str(json.loads(data).get("reason", "?"))
            alert_kinds[reason] = alert_kinds.get(reason, 0) + 1
        figures.update(
            {
                "run_statuses": statuses,
                "resubmissions": resubmissions,
                "alerts_by_reason": alert_kinds,
                "attempts_by_placement": by_placement,
                "placement_orders": orders,
                "unsuccessful_runs": unsuccessful,
                "features": self.features,
                "deliveries": self.counts,
            }
        )
        for name in self.subscriptions.values():
            self.subscriber.delete_subscription(subscription=name)
        self.subscriber.close()
        return figures


def _tried(trigger: tracing.Trigger, run: Any) -> dict[str, Any]:
    """A run that did not succeed, as the JSON shows it: its status and each attempt's try."""
    return {
        "trigger": trigger.index,
        "run_id": run.run_id,
        "status": run.status.value,
        "attempts": [
            {
                "placement": next(iter(attempt.placement), "?"),
                "region": attempt.region,
                "state": attempt.state,
                "error": (attempt.error or {}).get("message", "")[:200],
            }
            for attempt in run.attempts
        ],
    }


def _count_attempts(run: Any, by_placement: dict[str, dict[str, int]]) -> None:
    """Each attempt's end (``policy.run_history.outcome_class``), by placement kind and region."""
    from shared.policy.run_history import outcome_class

    for attempt in run.attempts:
        kind = next(iter(attempt.placement), "?")
        where = f"{kind}@{attempt.region}"
        ended = outcome_class(attempt) or "not ended"
        counts = by_placement.setdefault(where, {})
        counts[ended] = counts.get(ended, 0) + 1


def load_policy_config(policy: str, start_by: str | None) -> tuple[Any, dict[str, str]]:
    """Our config for ``policy``: bench/capacity-config.yaml, with the learned policy's keys
    added one by one where the loader knows them (a branch not merged yet leaves them out, and
    ``features`` says so)."""
    from shared.adapters.config_source import load_config
    from shared.model.errors import ConfigError

    raw = yaml.safe_load(DISPATCH_CONFIG.read_text(encoding="utf-8"))
    features: dict[str, str] = {}
    if policy == "learned":
        learned = {**LEARNED_ORDER, **({"start_by": start_by} if start_by else {})}
        for key, value in learned.items():
            trial = json.loads(json.dumps(raw))
            trial["templates"][TEMPLATE][key] = value
            try:
                _load(trial, load_config)
            except ConfigError as error:
                features[key] = f"unavailable: {config_problem(str(error), key)}"
                continue
            raw = trial
            features[key] = str(value)
    return _load(raw, load_config), features


def config_problem(message: str, key: str) -> str:
    """The line of a config error that names ``key``, without the list of allowed keys."""
    lines = [line.strip(" -") for line in message.splitlines()]
    named = next((line for line in lines if key in line), lines[0] if lines else message)
    return named.split("; ")[0]


def _load(raw: dict[str, Any], load_config: Callable[[str], Any]) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as f:
        yaml.safe_dump(raw, f)
    try:
        return load_config(f.name)
    finally:
        os.unlink(f.name)


def progress_report(world: Emulators) -> list[dict[str, Any]] | None:
    """The emulator's progress per output directory (``GET /emulator/v1/progress``); None when
    this emulator has no progress model (the resume work has not landed)."""
    try:
        report = world.admin("GET", PROGRESS_ENDPOINT)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    directories: list[dict[str, Any]] = report.get("directories", [])
    return directories


def _quiet_logs() -> None:
    """The handlers' log lines (JSON, as in production) go nowhere: stdout is the table."""
    from shared import logs

    logs.configure(logging.WARNING, open(os.devnull, "w"))  # noqa: SIM115 (lives as long as the run)


def _progress(message: str) -> None:
    print(f"bench capacity: {message}", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m bench capacity",
        description="The stockout benchmark: a simulated week of triggers on the emulators while "
        "A100s come and go, played by three policies (naive: the seed page's one FLEX_START "
        "submit; static: our handlers, chain as written; learned: learned order, deadline, "
        "resume). Prints one table (stdout); progress on stderr. See docs/performance.md.",
    )
    command.add_argument("--triggers", type=int, default=210, help="triggers in the trace (210)")
    command.add_argument("--days", type=float, default=7.0, help="simulated days of triggers (7)")
    command.add_argument("--seed", type=int, default=14, help="the trace's seed (14)")
    command.add_argument("--step", type=float, default=10.0, help="simulated minutes per step (10)")
    command.add_argument(
        "--start-by",
        default=DEFAULT_START_BY,
        help="the learned policy's start_by deadline (12h); '' for none",
    )
    command.add_argument(
        "--policies",
        nargs="+",
        choices=summary.POLICIES,
        default=list(summary.POLICIES),
        help="which policies to play (all three)",
    )
    command.add_argument(
        "--json", type=Path, help="where to write the raw figures (default bench/results/)"
    )
    return command
