"""A soak: many job requests through the whole local stack while Vertex AI fails at random.

Requests go in on the requests topic only (some published twice under one idempotency key, as a
sender retrying); Pub/Sub pushes them to on_request and redelivers after each 500; the reconcile
ticks and on_job_event carry every run to its end while Vertex AI answers UNAVAILABLE to a share
of all calls and loses the answer of a share of creates it performed. Then, from state only (the
ledger and the jobs that exist): every run ended succeeded, cancelled or alerted; no run has two
jobs for an attempt; no trigger is lost. The short version runs by default; ``-m slow`` runs
2,000 triggers.

While the requests go in and the runs move, a chaos thread also SIGKILLs a function's server now
and then (on_request or reconcile, mid-request: whatever it was doing is lost and redelivered)
and serves it again on the same port, and freezes the Firestore emulator (SIGSTOP, then SIGCONT a
few seconds later): a ledger that stops answering with its data intact, where a write the client
gave up on may still be applied when it wakes, as a real commit whose answer is lost.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from emulator_stack.local_stack import LocalStack
from emulator_stack.observe import http_json
from emulator_stack.wiring import DEAD_LETTER_SUBSCRIPTION_ID
from shared.adapters.ledger import Ledger, Run, RunStatus, default_ledger
from shared.model.errors import TransientError
from shared.model.runkeys import request_run_key, run_id

FAULTS = (
    {"method": "CreateCustomJob", "code": "DEADLINE_EXCEEDED", "when": "after", "fraction": 0.1},
    {"method": "*", "code": "UNAVAILABLE", "fraction": 0.1},
)
FLAKY_SHARE = 0.1  # requests whose jobs fail in user code: they end alerted
PUBLISHED_TWICE_SHARE = 0.1
CRASHABLE = ("on_request", "reconcile")
# One chaos cycle, as waits before each fault: a crash at 1 s, a ledger freeze at 2 s (for
# FREEZE_SECONDS), a crash at 11 s, then 9 s of calm. The first faults come early because a fast
# machine ends the short soak's 40 runs in under 10 s.
CHAOS_CYCLE = ((1.0, "crash"), (1.0, "freeze"), (5.0, "crash"), (9.0, "calm"))
FREEZE_SECONDS = 4.0
ENDED = {RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.REJECTED}
POLL_SECONDS = 2.0
LEASE_WAIT_EVIDENCE = timedelta(seconds=30)
CHAOS_SHARE = 0.6  # of the deadline: the rest is calm, for the runs the chaos left behind


@dataclass(frozen=True)
class SoakFigures:
    triggers: int
    publishes: int
    runs: int
    ended: Counter[str]
    alerted: int
    not_ended: int
    jobs: int
    duplicate_jobs: int
    lost_triggers: int
    dead_lettered: int
    dead_letters_of_unended_runs: int  # a dead letter is a loss only if its run did not end
    crashes: int
    ledger_freezes: int
    seconds: float

    def line(self) -> str:
        return (
            f"FIGURES soak: triggers={self.triggers}, publishes={self.publishes}, "
            f"runs={self.runs}, ended={dict(self.ended)}, alerted={self.alerted}, "
            f"not_ended={self.not_ended}, jobs={self.jobs}, duplicate_jobs={self.duplicate_jobs}, "
            f"lost_triggers={self.lost_triggers}, dead_lettered={self.dead_lettered} "
            f"({self.dead_letters_of_unended_runs} of runs not ended), "
            f"crashes={self.crashes}, ledger_freezes={self.ledger_freezes}, "
            f"seconds={self.seconds:.0f}"
        )


class Chaos(threading.Thread):
    """Crashes a function's server and freezes the ledger, cycle after cycle of ``CHAOS_CYCLE``,
    until ``stop``; counts what it did. ``first_cycle_done`` is set once each fault happened."""

    def __init__(self, stack: LocalStack, rng: random.Random) -> None:
        super().__init__(name="soak-chaos", daemon=True)
        self.stack = stack
        self.rng = rng
        self.crashes = 0
        self.freezes = 0
        self.first_cycle_done = threading.Event()
        self._stopping = threading.Event()

    def run(self) -> None:
        while True:
            for wait_seconds, fault in CHAOS_CYCLE:
                if self._stopping.wait(wait_seconds):
                    return
                if fault == "crash":
                    self._crash()
                elif fault == "freeze":
                    self._freeze_the_ledger()
            self.first_cycle_done.set()

    def _crash(self) -> None:
        self.stack.crash_and_restart_function(self.rng.choice(CRASHABLE))
        self.crashes += 1

    def _freeze_the_ledger(self) -> None:
        firestore = self.stack.emulators.emulators["firestore"].process
        os.killpg(firestore.process_group_id, signal.SIGSTOP)
        try:
            self._stopping.wait(FREEZE_SECONDS)
        finally:
            os.killpg(firestore.process_group_id, signal.SIGCONT)
        self.freezes += 1

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def _publish_requests(
    stack: LocalStack, triggers: int, rng: random.Random
) -> tuple[list[str], int]:
    topic = stack.config.requests_topic or ""
    run_ids, publishes = [], 0
    for number in range(triggers):
        template = "flaky" if rng.random() < FLAKY_SHARE else "train"
        body = {"template": template, "params": {"dataset_uri": f"gs://soak/d{number}/"}}
        key = f"soak-{number}-{rng.getrandbits(48):012x}"
        copies = 2 if rng.random() < PUBLISHED_TWICE_SHARE else 1
        for _ in range(copies):
            attributes = {"kind": "train", "idempotency_key": key}
            stack.pubsub.publish(topic, json.dumps(body).encode(), attributes)
        publishes += copies
        run_ids.append(run_id(request_run_key("", key)))
    return run_ids, publishes


def _drain(stack: LocalStack, subscription: str) -> list[dict[str, Any]]:
    """Every message ``subscription`` holds (pulled and acknowledged, 100 at a time)."""
    messages: list[dict[str, Any]] = []
    while batch := stack.pubsub.pull(subscription):
        messages.extend(batch)
    return messages


def _run_of(message: dict[str, Any]) -> str:
    """The run a dead-lettered request or retry message was for."""
    attributes = message.get("attributes", {})
    if attributes.get("vertex_dispatch_kind") == "retry":
        return str(json.loads(base64.b64decode(message.get("data", "")))["run_id"])
    return run_id(request_run_key("", attributes.get("idempotency_key", "")))


def _all_jobs(stack: LocalStack) -> list[dict[str, Any]]:
    base = f"http://{stack.vertex_ai.address}/v1/projects/{stack.config.project}/locations"
    jobs: list[dict[str, Any]] = []
    token = ""
    while True:
        page = http_json("GET", f"{base}/{stack.config.region}/customJobs?pageToken={token}")
        jobs.extend(page.get("customJobs", []))
        token = page.get("nextPageToken", "")
        if not token:
            return jobs


def _runs(ledger: Ledger, run_ids: list[str]) -> dict[str, Run]:
    wanted = set(run_ids)
    snapshots = ledger.list_runs(list(RunStatus), limit=len(run_ids) * 2)
    return {s.run.run_id: s.run for s in snapshots if s.run.run_id in wanted}


def _wait_for_ends(
    ledger: Ledger, run_ids: list[str], deadline: float, settled: Callable[[Run], bool]
) -> dict[str, Run]:
    """The runs, read until every one is ``settled`` or ``deadline`` (monotonic) passed."""
    while True:
        try:
            runs = _runs(ledger, run_ids)
        except TransientError:  # the ledger frozen by the chaos thread: read again
            runs = {}
        ended = len(runs) == len(run_ids) and all(settled(run) for run in runs.values())
        if ended or time.monotonic() >= deadline:
            return runs
        time.sleep(POLL_SECONDS)


def _waits_out_the_lease(run: Run) -> bool:
    """An attempt whose create's fate died with its delivery: no job, and an intent older than
    any create takes, so redeliveries get 500 until the intent lease is over."""
    last = run.last_attempt
    if run.status is not RunStatus.SUBMITTING or last is None or last.job_name is not None:
        return False
    return datetime.now(UTC) - last.intent_at > LEASE_WAIT_EVIDENCE


def _is_end(run: Run) -> bool:
    if run.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED):
        return True
    return run.status in ENDED and bool(run.alerts)  # failed or rejected: alerted


def _soak(
    stack: LocalStack, triggers: int, deadline_seconds: float, settled: Callable[[Run], bool]
) -> SoakFigures:
    started = time.monotonic()
    admin = f"http://{stack.vertex_ai.address}/emulator/v1"
    for fault in FAULTS:
        http_json("POST", f"{admin}/faults", fault)
    ledger = default_ledger(stack.config.project)
    rng = random.Random(triggers)
    chaos = Chaos(stack, rng)
    chaos.start()
    try:
        run_ids, publishes = _publish_requests(stack, triggers, rng)
        runs = _wait_for_ends(ledger, run_ids, started + deadline_seconds * CHAOS_SHARE, settled)
        # The chaos phase lasts at least one whole cycle, however fast the runs end.
        chaos.first_cycle_done.wait(timeout=sum(wait for wait, _ in CHAOS_CYCLE) + FREEZE_SECONDS)
    finally:
        chaos.stop()
    # The end, in quiet: a run whose last delivery died with a crash is picked up by the ticks.
    runs = _wait_for_ends(ledger, run_ids, started + deadline_seconds, settled)

    http_json("DELETE", f"{admin}/faults")
    jobs_per_attempt = Counter(
        (job["labels"]["vd-run"], job["labels"]["vd-attempt"])
        for job in _all_jobs(stack)
        if job.get("labels", {}).get("vd-run") in set(run_ids)
    )
    dead_letter_kept = (
        f"projects/{stack.config.project}/subscriptions/{DEAD_LETTER_SUBSCRIPTION_ID}"
    )
    dead_letters = _drain(stack, dead_letter_kept)
    return SoakFigures(
        triggers=triggers,
        publishes=publishes,
        runs=len(runs),
        ended=Counter(run.status.value for run in runs.values()),
        alerted=sum(bool(run.alerts) for run in runs.values()),
        not_ended=sum(not _is_end(run) for run in runs.values()),
        jobs=sum(jobs_per_attempt.values()),
        duplicate_jobs=sum(n - 1 for n in jobs_per_attempt.values()),
        lost_triggers=triggers - len(runs),
        dead_lettered=len(dead_letters),
        dead_letters_of_unended_runs=sum(
            not (_run_of(m) in runs and _is_end(runs[_run_of(m)])) for m in dead_letters
        ),
        crashes=chaos.crashes,
        ledger_freezes=chaos.freezes,
        seconds=time.monotonic() - started,
    )


@pytest.mark.parametrize(
    ("triggers", "deadline_seconds", "outlasts_the_intent_lease"),
    [
        # A run whose create's fate was lost with its delivery stays SUBMITTING until its intent
        # is older than INTENT_LEASE (5 real minutes); only the long soak waits that long.
        pytest.param(40, 150.0, False, id="40 triggers"),
        pytest.param(2000, 900.0, True, id="2000 triggers", marks=pytest.mark.slow),
    ],
)
def test_soak_every_run_ends_once_under_random_faults(
    triggers: int, deadline_seconds: float, outlasts_the_intent_lease: bool, soak_stack: LocalStack
) -> None:
    def settled(run: Run) -> bool:
        return _is_end(run) or (not outlasts_the_intent_lease and _waits_out_the_lease(run))

    figures = _soak(soak_stack, triggers, deadline_seconds, settled)
    print(figures.line())

    assert figures.crashes >= 1 and figures.ledger_freezes >= 1, figures.line()  # it was tried
    assert figures.lost_triggers == 0, figures.line()
    assert figures.duplicate_jobs == 0, figures.line()
    if outlasts_the_intent_lease:
        assert figures.not_ended == 0, figures.line()
    else:
        assert figures.not_ended == figures.ended[RunStatus.SUBMITTING.value], figures.line()
    # With no retry policy locally, a delivery comes back about every second: one that waits out
    # an intent lease (5 minutes) uses its 100 deliveries first. The reconciler then hands the
    # run back to dispatch, so a dead letter is a loss only if its run did not end.
    assert figures.dead_letters_of_unended_runs == 0, figures.line()
    allowed = {s.value for s in ENDED} | (
        set() if outlasts_the_intent_lease else {RunStatus.SUBMITTING.value}
    )
    assert figures.ended.keys() <= allowed, figures.line()
