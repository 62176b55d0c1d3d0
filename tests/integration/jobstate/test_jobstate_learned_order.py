"""Learned placement order on the emulators: a run of a ``placement_order: learned`` template walks
first the placement its template's history says starts fastest, records that order with its
claim, and a capacity end falls back to the next placement of the recorded order.

Dispatch and the job-state function run in this process against the emulators, with the config
configs/learned.yaml and a clock the tests move (``Services.now``). The history is runs of the
template written into the ledger (Firestore emulator) with their attempts' times set; assertions
read state only: the ledger and the Vertex AI emulator's request log.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jobstate_test_support import VertexAdmin, job_request, job_state_hint, message_published

from emulator_stack import LOCAL_PROJECT
from emulator_stack.ports import LOOPBACK, free_port
from shared.adapters import clients
from shared.adapters import vertex as vertex_api
from shared.adapters.config_source import load_config
from shared.adapters.ledger import Ledger, Run, RunStatus
from shared.adapters.retry_messages import retry_body
from shared.config.model import Config
from shared.decode.events import KIND_ATTRIBUTE, MessageKind
from shared.handlers import placement_orders
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, handle_job_event
from shared.handlers.services import Services
from shared.model.runkeys import request_run_key, run_id
from shared.model.runs import Attempt
from shared.policy.records import placement_record
from shared.policy.timing import PLACEMENT_HISTORY_READ_EVERY

LEARNED_CONFIG = Path(__file__).parent / "configs" / "learned.yaml"
A100 = "NVIDIA_TESLA_A100"
MACHINE = "a2-highgpu-1g+NVIDIA_TESLA_A100x1"
CENTRAL, EAST = 0, 1


class Clock:
    """The functions' clock, moved by the tests."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, by: timedelta) -> None:
        self.at += by


@pytest.fixture(scope="module")
def learned_config(topics: Config) -> Config:
    """configs/learned.yaml; its topics are the ones ``topics`` made for jobstate.yaml."""
    return load_config(str(LEARNED_CONFIG))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def services(learned_config: Config, firestore_emulator: object, clock: Clock) -> Services:
    return Services(learned_config, now=clock)


def history_run(
    config: Config,
    template: str,
    index: int,
    waited: timedelta,
    now: datetime,
    name: str,
    recorded_as: str | None = None,
) -> Run:
    """A run of ``template`` (recorded under ``recorded_as``, if given) whose one job, on
    placement ``index``, was created two hours before ``now``, started ``waited`` later and
    succeeded an hour after that."""
    placement = config.templates[template].placements[index]
    region = placement.region or config.region
    created = now - timedelta(hours=2)
    attempt = Attempt(
        number=1,
        placement=placement_record(placement),
        region=region,
        parent=f"projects/local-project/locations/{region}",
        intent_at=created,
        job_name=f"projects/local-project/locations/{region}/customJobs/{name}",
        state="JOB_STATE_SUCCEEDED",
        job_created_at=created,
        started_at=created + waited,
        ended_at=created + waited + timedelta(hours=1),
        machine=MACHINE,
        gpus=1,
    )
    return Run(
        name, f"history:{name}", "on-request", recorded_as or template, {},
        status=RunStatus.SUCCEEDED,
        attempts=(attempt,),
    )  # fmt: skip


def seed_history(services: Services, template: str, fresh_name: Callable[[str], str]) -> None:
    """us-central1 took 40 and 50 minutes to start; us-east4 3 and 5 minutes."""
    now = services.now()
    for index, waited in ((CENTRAL, 40), (CENTRAL, 50), (EAST, 3), (EAST, 5)):
        run = history_run(
            services.config, template, index, timedelta(minutes=waited), now, fresh_name("hist")
        )
        services.ledger.open_run(run)


def start(services: Services, template: str, key: str) -> tuple[str, Any]:
    result = dispatch_event(job_request(template, key), services)
    the_run_id = run_id(request_run_key("unused", key))
    assert result.run_id == the_run_id, result
    return the_run_id, result


def run_of(services: Services, the_run_id: str) -> Run:
    snapshot = services.ledger.get_run(the_run_id)
    assert snapshot is not None
    return snapshot.run


def create_regions(vertex: VertexAdmin, the_run_id: str) -> list[tuple[str, str]]:
    """(gRPC status, region) of every CreateCustomJob call logged for the run, oldest first."""
    logged = vertex.call("GET", "requests?method=CreateCustomJob")["requests"]
    return [
        (entry["status"], entry["request"]["parent"].split("/")[3])
        for entry in logged
        if entry["request"]["customJob"].get("labels", {}).get("vd-run") == the_run_id
    ]


def retry_event(run: Run) -> Any:
    """The retry message the job-state function publishes for the run's ``next_retry``."""
    assert run.next_retry is not None
    body = json.dumps(retry_body(run.run_id, run.next_retry)).encode()
    attributes = {KIND_ATTRIBUTE: MessageKind.RETRY.value}
    return message_published(body, attributes, "projects/local-project/topics/requests")


def test_a_learned_run_walks_the_faster_placement_first_and_falls_back_along_its_order(
    fresh_name: Callable[[str], str], services: Services, vertex: VertexAdmin, clock: Clock
) -> None:
    seed_history(services, "learned-two-regions", fresh_name)
    vertex.set_capacity("us-east4", A100, 0)  # its FLEX_START wait will run out

    the_run_id, result = start(services, "learned-two-regions", fresh_name("learned"))

    assert create_regions(vertex, the_run_id) == [("OK", "us-east4")]
    run = run_of(services, the_run_id)
    assert run.placement_order == (EAST, CENTRAL)  # recorded with the claim
    assert run.attempts[0].region == "us-east4"

    vertex.advance(2 * 3600 + 60)  # past us-east4's 2h max wait: a capacity end
    clock.advance(timedelta(minutes=121))
    job = vertex_api.get_custom_job(result.job_name)
    decided = handle_job_event(job_state_hint(job.name, job.state.name), services, random.Random(4))
    assert decided.outcome is JobStateOutcome.DECIDED
    run = run_of(services, the_run_id)
    assert run.attempts[0].error is not None and run.attempts[0].error["class"] == "capacity"
    # As written, us-east4 is the end of the chain and the run would fail; its order goes on.
    assert run.status is RunStatus.WAITING_RETRY
    assert run.next_retry is not None
    assert (run.next_retry.attempt, run.next_retry.placement_index) == (2, CENTRAL)

    dispatch_event(retry_event(run), services)

    assert create_regions(vertex, the_run_id) == [("OK", "us-east4"), ("OK", "us-central1")]
    run = run_of(services, the_run_id)
    assert run.placement_order == (EAST, CENTRAL)  # kept by every later write
    assert [attempt.region for attempt in run.attempts] == ["us-east4", "us-central1"]


def test_an_as_written_run_ignores_the_history_and_records_no_order(
    fresh_name: Callable[[str], str], services: Services, vertex: VertexAdmin
) -> None:
    seed_history(services, "written-two-regions", fresh_name)

    the_run_id, _ = start(services, "written-two-regions", fresh_name("written"))

    assert create_regions(vertex, the_run_id) == [("OK", "us-central1")]
    assert run_of(services, the_run_id).placement_order is None


def test_the_history_is_read_once_per_interval_per_instance(
    fresh_name: Callable[[str], str], services: Services
) -> None:
    probe = fresh_name("probe")  # a template name no other run has
    ledger: Ledger = services.ledger
    now = services.now()

    def add_run() -> None:
        minute = timedelta(minutes=1)
        run = history_run(
            services.config, "learned-two-regions", EAST, minute, now, fresh_name("h"), probe
        )
        ledger.open_run(run)

    add_run()
    first = placement_orders.recent_runs(ledger, probe, now)
    add_run()
    cached = placement_orders.recent_runs(ledger, probe, now + timedelta(minutes=1))
    later = placement_orders.recent_runs(ledger, probe, now + PLACEMENT_HISTORY_READ_EVERY)

    assert (len(first), len(cached), len(later)) == (1, 1, 2)


def test_an_unreadable_history_gives_the_written_order_and_is_not_read_again_at_once(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger whose Firestore does not answer (nothing listens on its port): the learned
    template's run is ordered as written, and the next submission does not wait on the read."""
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", f"{LOOPBACK}:{free_port()}")
    unreachable = Ledger(clients.firestore_client(LOCAL_PROJECT))
    template = services.config.templates["learned-two-regions"]
    now = services.now()
    a_run = Run("r-unreadable", "k", "on-request", template.name, {})

    chosen = placement_orders.choose_order(
        unreachable, services.config, template, a_run, now=now, labels={}
    )
    started = time.monotonic()
    again = placement_orders.recent_runs(unreachable, template.name, now + timedelta(minutes=1))

    assert chosen.order == (CENTRAL, EAST)
    assert "could not be read" in chosen.reasons[CENTRAL]
    assert again is None and time.monotonic() - started < 1.0
