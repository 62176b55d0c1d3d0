"""Create-time refusals move along the placement chain; a placement that failed for capacity cools.

Dispatch and the job-state function run in this process against the emulators, with the config
configs/chain.yaml and a clock the tests move (``Services.now``). The Vertex AI emulator refuses
a create for quota by its own quota model (a zero limit and ``quota_when_exceeded: refuse``: 429
"The following quota metrics exceed quota limits: ..."), and otherwise through its fault rules
(``RESOURCE_EXHAUSTED`` with the quota message, ``INVALID_ARGUMENT`` "Accelerator type ... is not
supported in location ..."), each firing once, so the first create (us-central1) is refused and
the next one is not. Assertions read state
only: the ledger, the alerts topic, the emulator's request log and jobs.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jobstate_test_support import (
    Subscription,
    VertexAdmin,
    job_request,
    job_state_hint,
    message_published,
)

from shared.adapters import clients
from shared.adapters import vertex as vertex_api
from shared.adapters.alerts import AlertNotSent
from shared.adapters.config_source import load_config
from shared.adapters.ledger import (
    COOLDOWNS_DOCUMENT,
    DEFAULT_COLLECTION,
    LedgerConflict,
    Run,
    RunStatus,
)
from shared.adapters.retry_messages import retry_body
from shared.config.model import Config
from shared.decode.events import KIND_ATTRIBUTE, MessageKind
from shared.handlers.dispatch import dispatch_event
from shared.handlers.jobstate import JobStateOutcome, handle_job_event
from shared.handlers.rejections import finish_run
from shared.handlers.services import Services
from shared.model.alerts import AlertReason
from shared.model.errors import TransientError
from shared.model.results import DispatchOutcome
from shared.model.runkeys import request_run_key, run_id
from tooling import main

CHAIN_CONFIG = Path(__file__).parent / "configs" / "chain.yaml"
A100 = "NVIDIA_TESLA_A100"
QUOTA_MESSAGE = (
    "The following quota metrics exceed quota limits: "
    "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus"
)
NOT_OFFERED_MESSAGE = "Accelerator type NVIDIA_TESLA_A100 is not supported in location us-central1."
CENTRAL_FLEX = {"flex_start": {"max_wait": "3600s"}}
EAST_FLEX = {"flex_start": {"max_wait": "7200s", "region": "us-east4"}}
CENTRAL_KEY = "flex_start|us-central1|a2-highgpu-1g+NVIDIA_TESLA_A100x1"


class Clock:
    """The functions' clock, moved by the tests."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, by: timedelta) -> None:
        self.at += by


@pytest.fixture(scope="module")
def chain_config(topics: Config) -> Config:
    """configs/chain.yaml; its topics are the ones ``topics`` made for jobstate.yaml."""
    return load_config(str(CHAIN_CONFIG))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def chain_services(
    chain_config: Config, firestore_emulator: object, clock: Clock
) -> Iterator[Services]:
    """Services on chain.yaml and the test's clock, with no placement cooling down."""
    cooldowns = (
        clients.firestore_client(chain_config.project)
        .collection(DEFAULT_COLLECTION + "-placements")
        .document(COOLDOWNS_DOCUMENT)
    )
    cooldowns.delete()
    yield Services(chain_config, now=clock)
    cooldowns.delete()


def start(services: Services, template: str, key: str) -> tuple[str, Any]:
    result = dispatch_event(job_request(template, key), services)
    the_run_id = run_id(request_run_key("unused", key))
    assert result.run_id == the_run_id, result
    return the_run_id, result


def run_of(services: Services, the_run_id: str) -> Run:
    snapshot = services.ledger.get_run(the_run_id)
    assert snapshot is not None
    return snapshot.run


def create_statuses(vertex: VertexAdmin, the_run_id: str) -> list[tuple[str, str]]:
    """(gRPC status, region) of every CreateCustomJob call logged for the run, oldest first."""
    logged = vertex.call("GET", "requests?method=CreateCustomJob")["requests"]
    return [
        (entry["status"], entry["request"]["parent"].split("/")[3])
        for entry in logged
        if entry["request"]["customJob"].get("labels", {}).get("vd-run") == the_run_id
    ]


def jobs_of(the_run_id: str, region: str) -> list[str]:
    parent = f"projects/local-project/locations/{region}"
    return [job.name for job in vertex_api.find_jobs_by_label(parent, "vd-run", the_run_id)]


def alerts_of(subscription: Subscription, the_run_id: str) -> list[dict[str, Any]]:
    return [a for a in subscription.pull_json() if a["run_id"] == the_run_id]


def test_a_quota_refused_create_in_us_central1_moves_to_us_east4_in_the_same_delivery(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> None:
    alerts = subscribe(chain_services.config.alerts_topic)
    # The emulator's own quota, not a fault rule: no preemptible A100 quota in us-central1, and
    # a create over quota refused at once (429), as the service answers it.
    vertex.call(
        "PUT",
        "quota",
        {"kind": "preemptible", "region": "us-central1", "acceleratorType": A100, "count": 0},
    )
    vertex.call("PUT", "createRefusals", {"quota_when_exceeded": "refuse"})

    the_run_id, result = start(chain_services, "two-regions", fresh_name("quota"))

    assert result.outcome is DispatchOutcome.SUBMITTED
    assert create_statuses(vertex, the_run_id) == [
        ("RESOURCE_EXHAUSTED", "us-central1"),
        ("OK", "us-east4"),
    ]
    run = run_of(chain_services, the_run_id)
    assert run.status is RunStatus.SUBMITTED
    (attempt,) = run.attempts
    assert (attempt.placement, attempt.region) == (EAST_FLEX, "us-east4")
    assert attempt.job_name == result.job_name
    assert jobs_of(the_run_id, "us-east4") == [result.job_name]
    assert jobs_of(the_run_id, "us-central1") == []
    (skip,) = attempt.skips
    assert (skip.placement, skip.region, skip.skip_class) == (CENTRAL_FLEX, "us-central1", "quota")
    assert QUOTA_MESSAGE in skip.reason
    assert skip.at == chain_services.now()
    assert alerts_of(alerts, the_run_id) == []
    # A quota refusal is no capacity failure: nothing cools down.
    assert chain_services.ledger.placement_cooldowns() == {}


def test_concurrent_deliveries_of_a_request_refused_once_make_exactly_one_job(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
) -> None:
    # Eight copies of one request at once; the first create is refused for quota. Whichever
    # delivery claims the attempt moves its intent to us-east4 before creating there; the others
    # lose the claim, or find the intent and wait, then find the job by label where it names.
    vertex.call(
        "POST",
        "faults",
        {
            "method": "CreateCustomJob",
            "code": "RESOURCE_EXHAUSTED",
            "message": QUOTA_MESSAGE,
            "count": 1,
        },
    )
    key = fresh_name("racing")
    the_run_id = run_id(request_run_key("unused", key))

    def deliver_until_acknowledged() -> DispatchOutcome:
        for _ in range(40):
            try:
                return dispatch_event(job_request("two-regions", key), chain_services).outcome
            except TransientError:  # AttemptInProgress, LedgerConflict: delivered again
                time.sleep(0.25)
        raise AssertionError("never acknowledged")

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda _: deliver_until_acknowledged(), range(8)))

    assert outcomes.count(DispatchOutcome.SUBMITTED) == 1, outcomes
    assert set(outcomes) <= {
        DispatchOutcome.SUBMITTED,
        DispatchOutcome.DUPLICATE,
        DispatchOutcome.REATTACHED,
    }
    assert [status for status, _ in create_statuses(vertex, the_run_id)] == [
        "RESOURCE_EXHAUSTED",
        "OK",
    ]
    (attempt,) = run_of(chain_services, the_run_id).attempts
    assert jobs_of(the_run_id, "us-east4") == [attempt.job_name]
    assert jobs_of(the_run_id, "us-central1") == []


def test_a_quota_refusal_the_template_does_not_retry_fails_the_run_with_one_alert(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> None:
    alerts = subscribe(chain_services.config.alerts_topic)
    vertex.call(
        "POST",
        "faults",
        {
            "method": "CreateCustomJob",
            "code": "RESOURCE_EXHAUSTED",
            "message": QUOTA_MESSAGE,
            "count": 1,
        },
    )

    the_run_id, result = start(chain_services, "quota-not-retried", fresh_name("quota-no"))

    assert result.outcome is DispatchOutcome.REJECTED
    assert create_statuses(vertex, the_run_id) == [("RESOURCE_EXHAUSTED", "us-central1")]
    run = run_of(chain_services, the_run_id)
    assert run.status is RunStatus.FAILED
    (attempt,) = run.attempts
    assert attempt.job_name is None and attempt.state == "CREATE_FAILED"
    assert attempt.error is not None and attempt.error["class"] == "quota"
    assert [s.skip_class for s in attempt.skips] == ["quota"]
    sent = alerts_of(alerts, the_run_id)
    assert [a["reason"] for a in sent] == [AlertReason.QUOTA]
    assert "retry_on" in sent[0]["what_to_do"]


def test_a_refusal_not_retried_after_one_that_was_fails_with_one_alert_listing_both(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> None:
    alerts = subscribe(chain_services.config.alerts_topic)
    not_offered_east = NOT_OFFERED_MESSAGE.replace("us-central1", "us-east4")
    for code, message in (
        ("RESOURCE_EXHAUSTED", QUOTA_MESSAGE),  # retried: move on
        ("INVALID_ARGUMENT", not_offered_east),  # capacity, not retried: the end
    ):
        vertex.call(
            "POST",
            "faults",
            {"method": "CreateCustomJob", "code": code, "message": message, "count": 1},
        )

    the_run_id, result = start(chain_services, "quota-only", fresh_name("capacity-no"))

    assert result.outcome is DispatchOutcome.REJECTED
    assert create_statuses(vertex, the_run_id) == [
        ("RESOURCE_EXHAUSTED", "us-central1"),
        ("INVALID_ARGUMENT", "us-east4"),
    ]
    run = run_of(chain_services, the_run_id)
    assert run.status is RunStatus.FAILED
    (attempt,) = run.attempts
    assert (attempt.placement, attempt.state) == (EAST_FLEX, "CREATE_FAILED")
    assert [(s.region, s.skip_class) for s in attempt.skips] == [
        ("us-central1", "quota"),
        ("us-east4", "unsuitable"),
    ]
    (alert,) = alerts_of(alerts, the_run_id)
    assert alert["reason"] == AlertReason.NO_PLACEMENT
    lines = alert["message"].splitlines()
    assert any("FLEX_START" in line and "exceed quota limits" in line for line in lines)
    assert any("us-east4" in line and "not supported in location" in line for line in lines)
    assert "retry_on" in alert["what_to_do"]


def test_every_create_refused_makes_the_run_wait_then_its_retry_takes_the_attempt_over(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    clock: Clock,
) -> None:
    vertex.call(
        "POST",
        "faults",
        {
            "method": "CreateCustomJob",
            "code": "RESOURCE_EXHAUSTED",
            "message": QUOTA_MESSAGE,
            "count": 2,
        },
    )
    key = fresh_name("all-refused")

    the_run_id, result = start(chain_services, "two-regions", key)

    assert result.outcome is DispatchOutcome.WAITING
    waiting = run_of(chain_services, the_run_id)
    assert waiting.status is RunStatus.WAITING_RETRY
    (attempt,) = waiting.attempts
    # The intent was on the last placement tried; both refusals are recorded on it.
    assert (attempt.placement, attempt.state, attempt.job_name) == (
        EAST_FLEX,
        "CREATE_FAILED",
        None,
    )
    assert [(s.region, s.skip_class) for s in attempt.skips] == [
        ("us-central1", "quota"),
        ("us-east4", "quota"),
    ]
    assert waiting.next_retry is not None
    assert (waiting.next_retry.attempt, waiting.next_retry.placement_index) == (1, 0)

    # The retry, once due (the quota is back): the attempt is taken over at once (nothing was
    # created, so no lease to wait for) and its job created on the first placement.
    clock.advance(timedelta(minutes=2))
    retried = retry_event(waiting)
    outcome = dispatch_event(retried, chain_services)

    assert outcome.outcome is DispatchOutcome.SUBMITTED, outcome
    run = run_of(chain_services, the_run_id)
    (attempt,) = run.attempts
    assert (attempt.placement, attempt.region, attempt.skips) == (CENTRAL_FLEX, "us-central1", ())
    assert jobs_of(the_run_id, "us-central1") == [attempt.job_name]
    assert jobs_of(the_run_id, "us-east4") == []


def test_a_gpu_not_offered_moves_on_and_cools_the_placement_down_for_the_next_runs(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    clock: Clock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vertex.call(
        "POST",
        "faults",
        {
            "method": "CreateCustomJob",
            "code": "INVALID_ARGUMENT",
            "message": NOT_OFFERED_MESSAGE,
            "count": 1,
        },
    )

    first, result = start(chain_services, "two-regions", fresh_name("not-offered"))

    assert result.outcome is DispatchOutcome.SUBMITTED
    assert create_statuses(vertex, first) == [
        ("INVALID_ARGUMENT", "us-central1"),
        ("OK", "us-east4"),
    ]
    (attempt,) = run_of(chain_services, first).attempts
    assert [(s.region, s.skip_class) for s in attempt.skips] == [("us-central1", "unsuitable")]
    cooldowns = chain_services.ledger.placement_cooldowns()
    assert list(cooldowns) == [CENTRAL_KEY]
    assert cooldowns[CENTRAL_KEY].until == clock() + timedelta(minutes=30)
    assert cooldowns[CENTRAL_KEY].run_id == first
    # The operator sees it: `vertex-dispatch status --placements` (and --json).
    assert main(["status", "--placements", "--config", str(CHAIN_CONFIG), "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["placements"]
    assert (shown["key"], shown["cooling"], shown["run_id"]) == (CENTRAL_KEY, True, first)
    assert main(["status", "--placements", "--config", str(CHAIN_CONFIG)]) == 0
    table = capsys.readouterr().out
    assert "flex_start  us-central1  a2-highgpu-1g" in table
    assert "1 placement cooling down" in table

    # The next run, ten minutes on: us-central1 cools down, so us-east4 is tried first, and
    # us-central1 is recorded as passed over; no create goes to us-central1.
    clock.advance(timedelta(minutes=10))
    second, result = start(chain_services, "two-regions", fresh_name("cooled"))
    assert create_statuses(vertex, second) == [("OK", "us-east4")]
    (attempt,) = run_of(chain_services, second).attempts
    assert attempt.region == "us-east4"
    assert [(s.placement, s.skip_class) for s in attempt.skips] == [(CENTRAL_FLEX, "cooldown")]

    # Past the cooldown, us-central1 is first again.
    clock.advance(timedelta(minutes=21))
    third, result = start(chain_services, "two-regions", fresh_name("cooled-off"))
    assert create_statuses(vertex, third) == [("OK", "us-central1")]
    assert run_of(chain_services, third).attempts[0].skips == ()


def test_a_persistent_resource_the_service_will_not_run_the_job_on_moves_on(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
) -> None:
    # The resource reads RUNNING with a matching pool (the live rules pass), but the service
    # refuses the create on it: the refusal belongs to the placement, so FLEX_START is next.
    pool = "projects/local-project/locations/us-central1/persistentResources/a100-pool"
    vertex.call("PUT", "persistentResources", persistent_resource(pool))
    refusal = f"Persistent resource {pool} is in state STOPPING; it must be RUNNING to run jobs."
    vertex.call(
        "POST",
        "faults",
        {
            "method": "CreateCustomJob",
            "code": "FAILED_PRECONDITION",
            "message": refusal,
            "count": 1,
        },
    )

    the_run_id, result = start(chain_services, "pool-then-flex", fresh_name("pool-refused"))

    assert result.outcome is DispatchOutcome.SUBMITTED
    assert create_statuses(vertex, the_run_id) == [
        ("FAILED_PRECONDITION", "us-central1"),
        ("OK", "us-central1"),
    ]
    (attempt,) = run_of(chain_services, the_run_id).attempts
    assert attempt.placement == CENTRAL_FLEX
    assert [(s.placement, s.skip_class) for s in attempt.skips] == [
        ({"persistent_resource": "a100-pool"}, "capacity")
    ]
    assert list(chain_services.ledger.placement_cooldowns()) == [
        "persistent_resource|us-central1|a100-pool"
    ]


def persistent_resource(name: str) -> dict[str, Any]:
    """A RUNNING resource with one pool matching the chain templates' machine and disk."""
    return {
        "name": name,
        "state": "RUNNING",
        "resourcePools": [
            {
                "id": "a100-x1",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": A100,
                    "acceleratorCount": 1,
                },
                "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                "replicaCount": 1,
            }
        ],
    }


def test_an_expired_wait_cools_its_placement_so_the_next_run_starts_on_the_next_one(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    clock: Clock,
) -> None:
    vertex.set_capacity("us-central1", A100, 0)
    first, result = start(chain_services, "two-regions", fresh_name("expired"))
    assert create_statuses(vertex, first) == [("OK", "us-central1")]
    vertex.call("POST", "clock:advance", {"seconds": 3600 + 60})  # past the 1h max wait
    clock.advance(timedelta(minutes=61))
    job = vertex_api.get_custom_job(result.job_name)
    decided = handle_job_event(
        job_state_hint(job.name, job.state.name), chain_services, random.Random(4)
    )
    assert decided.outcome is JobStateOutcome.DECIDED
    assert run_of(chain_services, first).attempts[0].error["class"] == "capacity"
    assert list(chain_services.ledger.placement_cooldowns()) == [CENTRAL_KEY]

    vertex.set_capacity("us-central1", A100, 8)  # back, but the placement still cools down
    clock.advance(timedelta(minutes=5))
    second, _ = start(chain_services, "two-regions", fresh_name("after-expiry"))
    assert create_statuses(vertex, second) == [("OK", "us-east4")]
    assert [s.skip_class for s in run_of(chain_services, second).attempts[0].skips] == ["cooldown"]

    clock.advance(timedelta(minutes=30))
    third, _ = start(chain_services, "two-regions", fresh_name("cool-again"))
    assert create_statuses(vertex, third) == [("OK", "us-central1")]


def retry_event(run: Run) -> Any:
    """The retry message the reconciler publishes for the run's due ``next_retry``."""
    assert run.next_retry is not None
    body = json.dumps(retry_body(run.run_id, run.next_retry)).encode()
    attributes = {KIND_ATTRIBUTE: MessageKind.RETRY.value}
    return message_published(body, attributes, "projects/local-project/topics/requests")


def test_a_quota_refusal_alert_whose_publish_fails_is_sent_by_the_redelivery(
    fresh_name: Callable[[str], str],
    chain_config: Config,
    chain_services: Services,
    clock: Clock,
    vertex: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> None:
    """The alert goes out before the run ends (``finish_run``): a failed publish leaves the run
    open, so the redelivery (to which an ended run would be a duplicate) is refused again,
    alerts, then ends it."""
    alerts = subscribe(chain_services.config.alerts_topic)
    vertex.call(
        "POST",
        "faults",
        {
            "method": "CreateCustomJob",
            "code": "RESOURCE_EXHAUSTED",
            "message": QUOTA_MESSAGE,
            "count": 2,  # the first delivery and its redelivery are both refused
        },
    )
    no_alerts_topic = replace(chain_config, alerts_topic=f"{chain_config.alerts_topic}-missing")
    key = fresh_name("quota-unsent")

    with pytest.raises(AlertNotSent):  # transient: the request is delivered again
        start(
            Services(no_alerts_topic, now=clock, _ledger=chain_services.ledger),
            "quota-not-retried",
            key,
        )

    the_run_id = run_id(request_run_key("unused", key))
    waiting = run_of(chain_services, the_run_id)
    assert not waiting.status.is_terminal()
    assert waiting.alerts == ()  # the claim was given back
    _, result = start(chain_services, "quota-not-retried", key)
    assert result.outcome is DispatchOutcome.REJECTED
    assert run_of(chain_services, the_run_id).status is RunStatus.FAILED
    assert [a["reason"] for a in alerts_of(alerts, the_run_id)] == [AlertReason.QUOTA]
    assert create_statuses(vertex, the_run_id) == [("RESOURCE_EXHAUSTED", "us-central1")] * 2


def test_an_ending_decided_on_a_run_read_before_its_job_was_created_neither_alerts_nor_ends(
    fresh_name: Callable[[str], str],
    chain_services: Services,
    vertex: VertexAdmin,
    subscribe: Callable[[str], Subscription],
) -> None:
    """A stale delivery (it read the run before another claimed the attempt and created the
    job) that decides to end the run: ``finish_run`` refuses (``LedgerConflict``), so the job
    is not left running under an ended run, and no alert says the run ended."""
    vertex.call("DELETE", "faults")  # a fault left by an earlier test must not refuse the create
    alerts = subscribe(chain_services.config.alerts_topic)
    the_run_id, result = start(chain_services, "quota-not-retried", fresh_name("stale-end"))
    assert result.outcome is DispatchOutcome.SUBMITTED
    now = chain_services.ledger.get_run(the_run_id)
    assert now is not None
    stale = replace(now, run=replace(now.run, status=RunStatus.ACCEPTED, attempts=()))

    with pytest.raises(LedgerConflict):
        finish_run(
            chain_services.ledger,
            stale,
            RunStatus.REJECTED,
            config=chain_services.config,
            trigger="test",
            reason=AlertReason.INVALID_SPEC,
            message="no placement can ever take the job",
            what_to_do="nothing",
        )

    run = run_of(chain_services, the_run_id)
    assert run.status is RunStatus.SUBMITTED
    assert run.alerts == ()
    assert run.attempts[0].job_name is not None
    assert alerts_of(alerts, the_run_id) == []
