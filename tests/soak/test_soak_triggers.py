"""A soak: many job requests through the whole local stack while Vertex AI fails at random.

Requests go in on the requests topic only (some published twice under one idempotency key, as a
sender retrying); Pub/Sub pushes them to on_request and redelivers after each 500; the reconcile
ticks and on_job_event carry every run to its end while Vertex AI answers UNAVAILABLE to a share
of all calls and loses the answer of a share of creates it performed. Then, from state only (the
ledger and the jobs that exist): every run ended succeeded, cancelled or alerted; no run has two
jobs for an attempt; no trigger is lost. The short version runs by default; ``-m slow`` runs
2,000 triggers.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from emulator_stack.local_stack import LocalStack
from emulator_stack.observe import http_json
from emulator_stack.wiring import DEAD_LETTER_SUBSCRIPTION_ID
from shared.ledger import Ledger, Run, RunStatus, default_ledger
from shared.runkeys import request_run_key, run_id

FAULTS = (
    {"method": "CreateCustomJob", "code": "DEADLINE_EXCEEDED", "when": "after", "fraction": 0.1},
    {"method": "*", "code": "UNAVAILABLE", "fraction": 0.1},
)
FLAKY_SHARE = 0.1  # requests whose jobs fail in user code: they end alerted
PUBLISHED_TWICE_SHARE = 0.1
ENDED = {RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.REJECTED}
POLL_SECONDS = 2.0


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
    seconds: float

    def line(self) -> str:
        return (
            f"FIGURES soak: triggers={self.triggers}, publishes={self.publishes}, "
            f"runs={self.runs}, ended={dict(self.ended)}, alerted={self.alerted}, "
            f"not_ended={self.not_ended}, jobs={self.jobs}, duplicate_jobs={self.duplicate_jobs}, "
            f"lost_triggers={self.lost_triggers}, dead_lettered={self.dead_lettered}, "
            f"seconds={self.seconds:.0f}"
        )


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


def _is_end(run: Run) -> bool:
    if run.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED):
        return True
    return run.status in ENDED and bool(run.alerts)  # failed or rejected: alerted


def _soak(stack: LocalStack, triggers: int, deadline_seconds: float) -> SoakFigures:
    started = time.monotonic()
    admin = f"http://{stack.vertex_ai.address}/emulator/v1"
    for fault in FAULTS:
        http_json("POST", f"{admin}/faults", fault)
    ledger = default_ledger(stack.config.project)
    run_ids, publishes = _publish_requests(stack, triggers, random.Random(triggers))

    runs: dict[str, Run] = {}
    while time.monotonic() - started < deadline_seconds:
        runs = _runs(ledger, run_ids)
        if len(runs) == triggers and all(_is_end(run) for run in runs.values()):
            break
        time.sleep(POLL_SECONDS)

    http_json("DELETE", f"{admin}/faults")
    jobs_per_attempt = Counter(
        (job["labels"]["vd-run"], job["labels"]["vd-attempt"])
        for job in _all_jobs(stack)
        if job.get("labels", {}).get("vd-run") in set(run_ids)
    )
    dead_letter_kept = (
        f"projects/{stack.config.project}/subscriptions/{DEAD_LETTER_SUBSCRIPTION_ID}"
    )
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
        dead_lettered=len(stack.pubsub.pull(dead_letter_kept)),
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
    figures = _soak(soak_stack, triggers, deadline_seconds)
    print(figures.line())

    assert figures.lost_triggers == 0, figures.line()
    assert figures.duplicate_jobs == 0, figures.line()
    if outlasts_the_intent_lease:
        assert figures.not_ended == 0, figures.line()
    else:
        assert figures.not_ended == figures.ended[RunStatus.SUBMITTING.value], figures.line()
    assert figures.dead_lettered == 0, figures.line()
    assert figures.ended.keys() <= {s.value for s in ENDED}, figures.line()
