"""Hints bounded per job, end to end: the emulator's simulated ml_job logs, through the log-sink
stand-in and Pub/Sub, into on_job_event; Vertex AI reads counted in the emulator's request log.

A job's trainer writes thousands of lines; the sink (``SINK_FILTER``) routes only Vertex AI's own
service lines, and on_job_event reads the job only for a line that may change what the ledger
records. Target: at most 3 GetCustomJob per job lifetime, whatever it logs; 0 for a job that is
not ours. No reconciler runs here: the hints alone carry each run to its end.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from jobstate_test_support import Subscription, VertexAdmin, job_request, message_published

from emulator_stack import LOCAL_PROJECT, PubSubEmulator, VertexAIEmulator
from emulator_stack.logsink import LogSink
from emulator_stack.wiring import PubSubWiring
from shared.adapters import vertex as vertex_api
from shared.adapters.ledger import RunStatus
from shared.aiplatform import aiplatform_v1
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import handle_job_event
from shared.handlers.services import Services

TEMPLATE = "two-regions"
LIFETIME = 120 + 600 + 60  # provisioning, the default 10-minute run, a margin (simulated s)
STEP = 30  # how far the clock moves between two deliveries of what the sink routed
TRAINER_LINES_PER_SECOND = 5  # 3,000 lines in a 10-minute run
MAX_READS_PER_JOB = 3


@dataclass
class Hints:
    """The log sink onto a job-events topic of this test, and on_job_event fed from it."""

    sink: LogSink
    subscription: Subscription
    topic: str
    services: Services
    rng: random.Random
    outcomes: Counter[str] = field(default_factory=Counter)

    def deliver(self) -> None:
        """Route what the jobs logged since the last call, and handle each message, in order."""
        routed = self.sink.pump()
        received: list[tuple[bytes, dict[str, str]]] = []
        deadline = time.monotonic() + 60
        while len(received) < routed and time.monotonic() < deadline:
            received.extend(self.subscription.pull(quiet_seconds=0.1))
        assert len(received) == routed, "the topic lost or duplicated what the sink routed"
        for body, attributes in received:
            event = message_published(body, attributes, self.topic)
            result = handle_job_event(event, self.services, self.rng)
            key = result.outcome.value
            self.outcomes[f"{key}:{result.detail}" if key == "dropped" else key] += 1


@pytest.fixture
def hints(
    services: Services,
    clean_vertex_ai: VertexAIEmulator,
    pubsub_emulator: PubSubEmulator,
    subscribe: Callable[[str], Subscription],
    fresh_name: Callable[[str], str],
    rng: random.Random,
) -> Iterator[Hints]:
    wiring = PubSubWiring(pubsub_emulator.address)
    topic = f"projects/{LOCAL_PROJECT}/topics/{fresh_name('job-events')}"
    wiring.create_topic(topic)
    sink = LogSink(clean_vertex_ai.admin_url, wiring.publish, topic)
    sink.skip_to_now()
    yield Hints(sink, subscribe(topic), topic, services, rng)


def gets_of(vertex: VertexAdmin, job_name: str) -> int:
    """GetCustomJob calls the emulator received for ``job_name``."""
    logged = vertex.call("GET", "requests?method=GetCustomJob")["requests"]
    return sum(1 for entry in logged if entry["resource"] == job_name)


def start_run(services: Services, key: str) -> tuple[str, str]:
    """A run started through dispatch: its id and its job's name."""
    result = dispatch_event(job_request(TEMPLATE, key), services)
    assert result.run_id is not None
    snapshot = services.ledger.get_run(result.run_id)
    assert snapshot is not None and snapshot.run.attempts[0].job_name
    return result.run_id, snapshot.run.attempts[0].job_name


def live_through(vertex: VertexAdmin, hints: Hints, seconds: int) -> None:
    for _ in range(seconds // STEP + 1):
        vertex.advance(STEP)
        hints.deliver()


def test_a_chatty_job_costs_at_most_three_reads_and_its_hints_alone_end_the_run(
    services: Services,
    vertex: VertexAdmin,
    hints: Hints,
    fresh_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="shared.handlers.jobstate")
    vertex.call("PUT", "jobLogs", {"trainer_lines_per_second": TRAINER_LINES_PER_SECOND})
    run_id, job_name = start_run(services, fresh_name("chatty"))
    before = gets_of(vertex, job_name)

    live_through(vertex, hints, LIFETIME)

    snapshot = services.ledger.get_run(run_id)
    assert snapshot is not None and snapshot.run.status is RunStatus.SUCCEEDED
    reads = gets_of(vertex, job_name) - before
    print(f"\nchatty job: {hints.sink.counts}; GetCustomJob calls: {reads}; {dict(hints.outcomes)}")
    assert hints.sink.counts.left_out >= 600 * TRAINER_LINES_PER_SECOND  # the trainer's lines
    assert hints.sink.counts.by_task == {"service": 9}  # a successful job's service lines
    assert 1 <= reads <= MAX_READS_PER_JOB
    assert hints.outcomes["decided"] == 1
    assert hints.outcomes["dropped:no_state_change"] >= 6  # provisioning and tear-down lines
    # Each drop is one INFO line with the reason and the run (what the dashboards count).
    drops = [r for r in caplog.records if "hint_dropped" in getattr(r, "fields", {})]
    assert len(drops) == sum(n for key, n in hints.outcomes.items() if key.startswith("dropped"))
    assert {(r.levelno, r.fields["hint_dropped"], r.labels["run_id"]) for r in drops} == {
        (logging.INFO, "no_state_change", run_id)
    }


def test_a_failing_chatty_job_costs_at_most_three_reads(
    services: Services, vertex: VertexAdmin, hints: Hints, fresh_name: Callable[[str], str]
) -> None:
    vertex.call("PUT", "jobLogs", {"trainer_lines_per_second": TRAINER_LINES_PER_SECOND})
    key = fresh_name("failing")
    vertex.add_outcome(display_name="^two-regions-", result="user_error", exit_code=3)
    run_id, job_name = start_run(services, key)
    before = gets_of(vertex, job_name)

    live_through(vertex, hints, LIFETIME)

    snapshot = services.ledger.get_run(run_id)
    assert snapshot is not None
    first = snapshot.run.attempts[0]
    assert first.decision is not None and first.state == "JOB_STATE_FAILED"
    reads = gets_of(vertex, job_name) - before
    print(f"\nfailing job: {hints.sink.counts}; GetCustomJob calls: {reads}")
    assert 1 <= reads <= MAX_READS_PER_JOB


def test_a_job_that_is_not_ours_costs_no_read(
    services: Services, vertex: VertexAdmin, hints: Hints
) -> None:
    vertex.call("PUT", "jobLogs", {"trainer_lines_per_second": 1})
    parent = f"projects/{services.config.project}/locations/us-central1"
    spec = aiplatform_v1.CustomJobSpec(
        worker_pool_specs=[
            aiplatform_v1.WorkerPoolSpec(
                machine_spec=aiplatform_v1.MachineSpec(machine_type="n1-standard-4"),
                replica_count=1,
                container_spec=aiplatform_v1.ContainerSpec(image_uri="us-docker.pkg.dev/x/y:1"),
            )
        ]
    )
    # Another system's job, even one that wears our label: the ledger does not record it.
    theirs = vertex_api.create_custom_job(
        parent,
        aiplatform_v1.CustomJob(
            display_name="someone-else", job_spec=spec, labels={"vd-run": "r-" + "0" * 24}
        ),
    )

    live_through(vertex, hints, LIFETIME)

    assert vertex_api.get_custom_job(theirs.name).state.name == "JOB_STATE_SUCCEEDED"
    assert gets_of(vertex, theirs.name) == 1  # the line above, none from on_job_event
    assert hints.outcomes == Counter({"dropped:not_ours": 9})
    assert hints.sink.counts.left_out >= 600


def test_a_wider_sinks_trainer_lines_are_dropped_on_their_task_without_a_read(
    services: Services,
    vertex: VertexAdmin,
    clean_vertex_ai: VertexAIEmulator,
    pubsub_emulator: PubSubEmulator,
    hints: Hints,
    fresh_name: Callable[[str], str],
) -> None:
    # The old sink, on resource.type alone: every trainer line reaches on_job_event, which drops
    # it on its task name before reading anything.
    wide = LogSink(
        clean_vertex_ai.admin_url,
        PubSubWiring(pubsub_emulator.address).publish,
        hints.topic,
        'resource.type="ml_job"',
    )
    wide.skip_to_now()
    hints.sink = wide
    vertex.call("PUT", "jobLogs", {"trainer_lines_per_second": 1})
    run_id, job_name = start_run(services, fresh_name("wide"))
    before = gets_of(vertex, job_name)

    live_through(vertex, hints, LIFETIME)

    snapshot = services.ledger.get_run(run_id)
    assert snapshot is not None and snapshot.run.status is RunStatus.SUCCEEDED
    assert hints.outcomes["dropped:not_service"] >= 600
    assert gets_of(vertex, job_name) - before <= MAX_READS_PER_JOB


def test_however_many_error_lines_a_job_writes_its_hints_cost_at_most_three_reads(
    services: Services, vertex: VertexAdmin, hints: Hints, fresh_name: Callable[[str], str]
) -> None:
    # The texts of a failed end are unknown, so every ERROR service line may be the end; a job
    # writing many while it still runs (one per failing replica, say) spends the attempt's
    # read budget, and the rest are dropped until the reconciler reads the job.
    run_id, job_name = start_run(services, fresh_name("noisy"))
    before = gets_of(vertex, job_name)
    live_through(vertex, hints, 120 + 60)  # running: "Job is running." was read
    assert gets_of(vertex, job_name) - before == 1
    job_id = job_name.rsplit("/", 1)[-1]
    for replica in range(10):
        entry = {
            "logName": f"projects/{LOCAL_PROJECT}/logs/ml.googleapis.com%2F{job_id}",
            "resource": {
                "type": "ml_job",
                "labels": {"job_id": job_id, "project_id": LOCAL_PROJECT, "task_name": "service"},
            },
            "severity": "ERROR",
            "textPayload": f"The replica workerpool0-{replica} exited with a non-zero status.",
            "timestamp": "2026-12-01T04:10:00Z",
        }
        event = message_published(json.dumps(entry).encode(), {}, hints.topic)
        result = handle_job_event(event, services, hints.rng)
        hints.outcomes[f"{result.outcome.value}:{result.detail}"] += 1

    assert gets_of(vertex, job_name) - before == MAX_READS_PER_JOB
    assert hints.outcomes["dropped:read_budget"] == 8
    snapshot = services.ledger.get_run(run_id)
    assert snapshot is not None and snapshot.run.attempts[0].hint_reads == MAX_READS_PER_JOB
