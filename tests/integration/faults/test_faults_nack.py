"""Pub/Sub redelivering after a nack, on the real Pub/Sub emulator: nothing lost, nothing doubled.

Nothing here delivers by hand: job requests are published on a topic whose push subscription
(wired by ``emulator_stack.wiring``, with a dead-letter topic after production's default of 10
deliveries) points at a real functions-framework server of ``on_request``, and every redelivery
is the emulator's. The function nacks for real:

a) its server is SIGKILLed before the first push: the emulator's pushes are refused (counted in
   the emulator's log) until the server is started again on the same port;
b) Vertex AI answers UNAVAILABLE to the first N creates: on_request raises, functions-framework
   answers 500, the emulator redelivers, the N+1st delivery creates the one job;
c) a batch published while every create fails (30% of them after making the job, the answer
   lost): once the faults stop (when every trigger was nacked, or sooner if one trigger has been
   nacked 7 times: the window must not outlast the dead-letter policy), every trigger has exactly
   one job;
d) the emulator itself, pushing to a local endpoint that nacks, with and without a retry policy.

The subscriptions of a) to c) have no retry policy, because of what d) measures (figures in
docs/robustness.md). A nack sets the message's ack deadline to 1 s and the push loop
(one message at a time per subscription, polling every second when idle) delivers it again: about
every second without a retry policy, as Pub/Sub does ("as soon as possible"). A retry policy is
honoured for a lone message: the first redelivery still comes about 1 s after the nack, each later
one the minimum backoff plus about 2 s later (a minimum under 1 s is raised to 1 s). But with
several messages backing off at once, most messages nacked twice are never delivered again nor
dead-lettered (26 of 30 still waiting after 200 s, emulator 0.8.20): with a retry policy, c) would
lose triggers in the emulator, not in dispatch.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from dispatch_test_support import VertexAdmin
from faults_test_support import FunctionServer, report

from emulator_stack import LOCAL_PROJECT, PubSubEmulator
from emulator_stack.ports import LOOPBACK
from emulator_stack.wiring import PRODUCTION_LIKE_RETRY_POLICY, PubSubWiring, PushRoute, topic_path
from shared.adapters.ledger import Ledger, RunStatus
from shared.logs import LABELS_FIELD
from shared.model.runkeys import request_run_key, run_id

DELIVERY_ATTEMPTS = 10  # production's dead-letter policy (terraform var.max_delivery_attempts)
DATASET = "gs://dispatch-it-datasets/datasets/nacked/"
UNAVAILABLE_CREATES = 3
BATCH = 30
BATCH_NACK_BUDGET = DELIVERY_ATTEMPTS - 3  # the faults stop before any trigger is nacked more
STALL_BATCH = 10  # messages nacked twice each, to show the emulator's stall under a retry policy
STALL_WAIT = 10.0  # seconds: about twice what that batch needs when nothing stalls
BATCH_FAULTS = (
    # The first rule that fires decides a call's fate: 30% of creates make the job and lose the
    # answer, every other create fails before doing anything.
    {"method": "CreateCustomJob", "code": "DEADLINE_EXCEEDED", "when": "after", "fraction": 0.3},
    {"method": "CreateCustomJob", "code": "UNAVAILABLE"},
)
WAIT_SECONDS = 90.0  # a bound: seconds suffice when idle, a loaded 2-core machine is far slower
QUIET_SECONDS = 2.0  # after the last run is recorded: a late redelivery would show by then
POLL_SECONDS = 0.1
DELIVERY_LOG_MESSAGES = ("run opened", "run found (redelivery)")  # one per delivery dispatched


# --- what the tests wire and read -------------------------------------------------------------


@dataclass(frozen=True)
class PushedTopic:
    """A fresh topic pushed to one function, with its own dead-letter topic kept for counting."""

    route: PushRoute
    dead_letter_kept: str

    @property
    def topic(self) -> str:
        return self.route.topic


def push_topic(
    wiring: PubSubWiring,
    name: str,
    function_url: str,
    retry_policy: Mapping[str, str] | None = None,
) -> PushedTopic:
    """A topic named ``name`` whose push subscription (production's dead-letter budget, the
    given retry policy or none) delivers to ``function_url``."""
    route = PushRoute(topic_path(LOCAL_PROJECT, name), function_url)
    dead_letter = topic_path(LOCAL_PROJECT, f"{name}-dead-letter")
    kept = f"projects/{LOCAL_PROJECT}/subscriptions/{name}-dead-letter-kept"
    wiring.create_topic(route.topic)
    wiring.create_topic(dead_letter)
    wiring.create_pull_subscription(kept, dead_letter)
    wiring.create_push_subscription(
        route, dead_letter, retry_policy=retry_policy, max_delivery_attempts=DELIVERY_ATTEMPTS
    )
    return PushedTopic(route, kept)


def publish_request(wiring: PubSubWiring, topic: str) -> str:
    """Publish one job request (no idempotency key: its run is keyed by the message id); its run."""
    body = {"template": "flex-a100", "params": {"dataset_uri": DATASET}}
    message_id = wiring.publish(topic, json.dumps(body).encode(), {"kind": "train"})
    return run_id(request_run_key(message_id, None))


@dataclass
class RefusedPushes:
    """The pushes to ``endpoint`` the Pub/Sub emulator logged as failed from now on."""

    log_path: Path
    endpoint: str
    offset: int = field(init=False)

    def __post_init__(self) -> None:
        self.offset = self.log_path.stat().st_size

    def count(self) -> int:
        with self.log_path.open("rb") as log:
            log.seek(self.offset)
            text = log.read().decode(errors="replace")
        return text.count(f"Failed to push to endpoint '{self.endpoint}'")


def deliveries_seen(server: FunctionServer) -> Counter[str]:
    """Deliveries that reached dispatch, per run id, from the function's own JSON log lines."""
    seen: Counter[str] = Counter()
    for line in server.log_text().splitlines():
        if not line.startswith("{"):
            continue  # functions-framework's and gunicorn's own lines
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") in DELIVERY_LOG_MESSAGES:
            seen[entry.get(LABELS_FIELD, {}).get("run_id", "")] += 1
    return seen


def create_calls(vertex: VertexAdmin, run_ids: list[str]) -> dict[str, list[tuple[float, str]]]:
    """Each run's CreateCustomJob calls, oldest first, as (real seconds, gRPC status)."""
    scale = vertex.call("GET", "clock")["timeScale"] or 1.0  # the log's times are simulated
    calls: dict[str, list[tuple[float, str]]] = {each: [] for each in run_ids}
    for entry in vertex.call("GET", "requests?method=CreateCustomJob")["requests"]:
        labels = entry["request"]["customJob"].get("labels", {})
        if labels.get("vd-run") in calls:
            at = datetime.fromisoformat(entry["time"]).timestamp() / scale
            calls[labels["vd-run"]].append((at, entry["status"]))
    return calls


def intervals(times: list[float]) -> list[float]:
    return [round(later - earlier, 2) for earlier, later in pairwise(times)]


def wait_until(
    condition: Callable[[], bool],
    poll_seconds: float = POLL_SECONDS,
    seconds: float = WAIT_SECONDS,
) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_seconds)
    return True


def wait_for(condition: Callable[[], bool], what: str) -> float:
    """Poll ``condition`` until it holds; how long that took. Fails after WAIT_SECONDS."""
    started = time.monotonic()
    if not wait_until(condition):
        raise AssertionError(f"{what} did not happen within {WAIT_SECONDS:g} s")
    return time.monotonic() - started


def all_submitted(ledger: Ledger, run_ids: list[str]) -> bool:
    for the_run_id in run_ids:
        snapshot = ledger.get_run(the_run_id)
        if snapshot is None or snapshot.run.status is not RunStatus.SUBMITTED:
            return False
    return True


def jobs_of(vertex: VertexAdmin, run_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The jobs that exist for each run (found by label, as a redelivery finds them)."""
    return {the_run_id: vertex.jobs(the_run_id) for the_run_id in run_ids}


def assert_each_run_holds_its_one_job(
    ledger: Ledger, jobs: Mapping[str, list[dict[str, Any]]]
) -> None:
    for the_run_id, its_jobs in jobs.items():
        assert len(its_jobs) == 1, (the_run_id, its_jobs)
        snapshot = ledger.get_run(the_run_id)
        assert snapshot is not None, the_run_id
        run = snapshot.run
        assert run.status is RunStatus.SUBMITTED, (the_run_id, run.status)
        recorded = [(a.number, a.job_name) for a in run.attempts]
        assert recorded == [(1, its_jobs[0]["name"])], (the_run_id, recorded)


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def wiring(pubsub_emulator: PubSubEmulator) -> PubSubWiring:
    return PubSubWiring(pubsub_emulator.address)


@pytest.fixture(scope="module")
def nack_function(
    dispatch_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FunctionServer]:
    """on_request for the tests that kill nothing: its own server, so its log is theirs."""
    server = FunctionServer("on_request", tmp_path_factory.mktemp("nack-function"))
    server.start()
    yield server
    server.stop()


# --- the tests --------------------------------------------------------------------------------


def test_a_push_refused_by_a_killed_function_is_redelivered_after_its_restart(
    dispatch_ready: None,
    pubsub_emulator: PubSubEmulator,
    wiring: PubSubWiring,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    server = FunctionServer("on_request", tmp_path)
    server.start()
    server.kill()  # a real server that died: its port refuses connections
    try:
        pushed = push_topic(wiring, fresh_name("nack-down"), server.url)
        refused = RefusedPushes(pubsub_emulator.process.log_path, pushed.route.endpoint)
        the_run_id = publish_request(wiring, pushed.topic)
        published = time.monotonic()
        # The first push and one redelivery refused: the emulator keeps the message.
        wait_for(lambda: refused.count() >= 2, "two refused pushes")
        server.start()
        seconds_down = time.monotonic() - published
        wait_for(lambda: all_submitted(ledger, [the_run_id]), "the run SUBMITTED after restart")
        time.sleep(QUIET_SECONDS)
        jobs = jobs_of(vertex, [the_run_id])
        calls = create_calls(vertex, [the_run_id])[the_run_id]
        seen = deliveries_seen(server)[the_run_id]
        dead_lettered = len(wiring.pull(pushed.dead_letter_kept))
    finally:
        server.stop()

    report(
        "nack: function killed before the first push",
        refused_pushes=refused.count(),
        seconds_down=round(seconds_down, 1),
        deliveries_seen=seen,
        create_calls=len(calls),
        jobs=len(jobs[the_run_id]),
        dead_lettered=dead_lettered,
    )
    assert refused.count() >= 2
    assert seen == 1  # the first push the restarted server got was handled and acknowledged
    assert [status for _, status in calls] == ["OK"]
    assert_each_run_holds_its_one_job(ledger, jobs)
    assert dead_lettered == 0


def test_creates_refused_by_vertex_are_nacked_and_redelivered_until_one_job_exists(
    nack_function: FunctionServer,
    wiring: PubSubWiring,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    vertex.add_fault(method="CreateCustomJob", code="UNAVAILABLE", count=UNAVAILABLE_CREATES)
    pushed = push_topic(wiring, fresh_name("nack-vertex"), nack_function.url)
    the_run_id = publish_request(wiring, pushed.topic)

    seconds = wait_for(lambda: all_submitted(ledger, [the_run_id]), "the run SUBMITTED")
    time.sleep(QUIET_SECONDS)
    jobs = jobs_of(vertex, [the_run_id])
    calls = create_calls(vertex, [the_run_id])[the_run_id]
    seen = deliveries_seen(nack_function)[the_run_id]
    dead_lettered = len(wiring.pull(pushed.dead_letter_kept))
    redelivered_after = intervals([at for at, _ in calls])
    report(
        f"nack: Vertex AI UNAVAILABLE on the first {UNAVAILABLE_CREATES} creates",
        deliveries_seen=seen,
        create_calls=dict(Counter(status for _, status in calls)),
        redelivery_intervals_s=redelivered_after,
        seconds=round(seconds, 1),
        jobs=len(jobs[the_run_id]),
        dead_lettered=dead_lettered,
    )
    # Every nack was redelivered, by the emulator, and only the last delivery created.
    assert [status for _, status in calls] == ["UNAVAILABLE"] * UNAVAILABLE_CREATES + ["OK"]
    assert seen == UNAVAILABLE_CREATES + 1
    assert_each_run_holds_its_one_job(ledger, jobs)
    assert dead_lettered == 0


def test_a_batch_published_while_creates_fail_ends_with_one_job_per_trigger(
    nack_function: FunctionServer,
    wiring: PubSubWiring,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    started = time.monotonic()
    for fault in BATCH_FAULTS:
        vertex.add_fault(**fault)
    pushed = push_topic(wiring, fresh_name("nack-batch"), nack_function.url)
    run_ids = [publish_request(wiring, pushed.topic) for _ in range(BATCH)]

    def nacks() -> list[int]:
        """Failed creates per trigger: each one a delivery answered 500."""
        calls = create_calls(vertex, run_ids).values()
        return [sum(status != "OK" for _, status in each) for each in calls]

    def faults_done() -> bool:
        # Pushes go one at a time: on a loaded machine the first pass is slow and the first
        # triggers are nacked again meanwhile; the budget keeps them off the dead-letter topic.
        per_trigger = nacks()
        return min(per_trigger) >= 1 or max(per_trigger) >= BATCH_NACK_BUDGET

    wait_until(faults_done, poll_seconds=0.25)
    vertex.call("DELETE", "faults")  # Vertex AI is back: the redeliveries can succeed
    faults_seconds = time.monotonic() - started
    nacked = nacks()
    wait_until(lambda: all_submitted(ledger, run_ids), poll_seconds=0.5)
    time.sleep(QUIET_SECONDS)

    jobs = jobs_of(vertex, run_ids)
    jobs_per_trigger = [len(its_jobs) for its_jobs in jobs.values()]
    calls = create_calls(vertex, run_ids)
    seen = deliveries_seen(nack_function)
    deliveries = [seen[the_run_id] for the_run_id in run_ids]
    dead_lettered = len(wiring.pull(pushed.dead_letter_kept))
    report(
        "nack: batch published while creates fail",
        publishes=BATCH,
        triggers_nacked=sum(n > 0 for n in nacked),
        deliveries_seen=sum(deliveries),
        deliveries_per_trigger=dict(sorted(Counter(deliveries).items())),
        create_calls=dict(Counter(status for each in calls.values() for _, status in each)),
        faults_seconds=round(faults_seconds, 1),
        seconds=round(time.monotonic() - started, 1),
        jobs=sum(jobs_per_trigger),
        duplicates=sum(max(0, n - 1) for n in jobs_per_trigger),
        lost=jobs_per_trigger.count(0),
        dead_lettered=dead_lettered,
    )
    assert sum(deliveries) > BATCH  # nacked triggers were redelivered (all of them, when idle)
    assert any(status == "DEADLINE_EXCEEDED" for each in calls.values() for _, status in each)
    assert jobs_per_trigger == [1] * BATCH  # 0 lost, 0 doubled
    assert_each_run_holds_its_one_job(ledger, jobs)
    assert dead_lettered == 0


# --- the emulator's redelivery itself ---------------------------------------------------------


class _Nacker(BaseHTTPRequestHandler):
    """Answers each push 500 the first ``nacks`` times per message (``/nack-N/...``), then 200."""

    arrivals: dict[tuple[str, str], list[float]]  # (path, message id): arrival times

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        seen = self.arrivals.setdefault((self.path, body["message"]["messageId"]), [])
        seen.append(time.monotonic())
        nacks = int(self.path.split("/")[1].removeprefix("nack-"))
        self.send_response(500 if len(seen) <= nacks else 200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def nacker() -> Iterator[tuple[str, dict[tuple[str, str], list[float]]]]:
    """The nacking endpoint's URL, and the arrival times of each message on each path."""
    arrivals: dict[tuple[str, str], list[float]] = {}
    handler = type("Handler", (_Nacker,), {"arrivals": arrivals})
    server = ThreadingHTTPServer((LOOPBACK, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{LOOPBACK}:{server.server_port}", arrivals
    server.shutdown()
    server.server_close()


def backoff_policy(minimum_seconds: int) -> dict[str, str]:
    return {"minimumBackoff": f"{minimum_seconds}s", "maximumBackoff": "5s"}


def test_the_emulators_redelivery_with_and_without_a_retry_policy(
    wiring: PubSubWiring,
    nacker: tuple[str, dict[tuple[str, str], list[float]]],
    fresh_name: Callable[[str], str],
) -> None:
    url, arrivals = nacker
    always = f"{url}/nack-{DELIVERY_ATTEMPTS}"

    def subscribe(name: str, endpoint: str, policy: Mapping[str, str] | None) -> str:
        """Push ``name`` to ``endpoint``; the path its pushes arrive on."""
        pushed = push_topic(wiring, fresh_name(name), endpoint, policy)
        return pushed.route.endpoint.removeprefix(url)

    def publish(path: str, messages: int) -> None:
        topic = path.split("/", 2)[2]
        for _ in range(messages):
            wiring.publish(topic, b"{}", {})

    # A lone message nacked every time, under a 1 s and a 3 s minimum backoff.
    lone = {
        backoff: subscribe(f"nack-lone-{backoff}s", always, backoff_policy(backoff))
        for backoff in (1, 3)
    }
    # A batch whose every message is nacked twice: without a retry policy, and with the local
    # local stack's former one (PRODUCTION_LIKE_RETRY_POLICY, 1-5 s).
    twice = f"{url}/nack-2"
    batch = {
        "without": subscribe("nack-batch-plain", twice, None),
        "with": subscribe("nack-batch-policy", twice, PRODUCTION_LIKE_RETRY_POLICY),
    }
    started = time.monotonic()
    for path in lone.values():
        publish(path, 1)
    for path in batch.values():
        publish(path, STALL_BATCH)

    def times(path: str) -> list[list[float]]:
        return [each for (on, _), each in list(arrivals.items()) if on == path]

    def acked(path: str) -> int:
        return sum(len(each) > 2 for each in times(path))

    def lone_pushes(path: str) -> list[float]:
        found = times(path)
        return found[0] if found else []

    wait_for(lambda: all(len(lone_pushes(p)) >= 3 for p in lone.values()), "3 lone pushes")
    wait_for(lambda: acked(batch["without"]) == STALL_BATCH, "the batch without a policy acked")
    # Were nothing stalled, the batch with a policy would be done within about 4 s: wait longer.
    left = max(0.0, STALL_WAIT - (time.monotonic() - started))
    wait_until(lambda: acked(batch["with"]) == STALL_BATCH, poll_seconds=0.25, seconds=left)
    lone_intervals = {backoff: intervals(lone_pushes(path)[:3]) for backoff, path in lone.items()}
    report(
        "nack: the emulator's redeliveries",
        lone_intervals_s={f"min {b}s": lone_intervals[b] for b in lone},
        batch=STALL_BATCH,
        acked_without_policy=acked(batch["without"]),
        acked_with_policy=acked(batch["with"]),
        seconds=round(time.monotonic() - started),
    )
    # A lone message: the first redelivery (about 1 s after the nack whatever the policy) is
    # only reported; later ones wait at least the minimum backoff, a longer minimum longer.
    for backoff, (_, backed_off) in lone_intervals.items():
        assert backed_off >= backoff
    assert lone_intervals[3][1] > lone_intervals[1][1]
    # What the dispatch tests rely on: without a policy every nacked message comes back. (The
    # batch with a policy is reported, not asserted: which messages stall depends on timing.)
    assert acked(batch["without"]) == STALL_BATCH
