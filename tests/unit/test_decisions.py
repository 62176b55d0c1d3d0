"""shared.policy.decisions: the retry policy over small runs, templates and real error texts."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest
from run_builders import (
    NOW,
    PROJECT_NUMBER,
    REGION,
    a_retry_plan,
    a_run,
    an_attempt,
    job_name,
    parent_of,
)

from shared.adapters.ledger import Attempt, InvalidTransition, RetryPlan, Run, RunStatus
from shared.config.model import (
    FailureClass,
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    PersistentResourcePlacement,
    ReservationPlacement,
    RetryPolicy,
    SpotPlacement,
    Template,
)
from shared.model.alerts import AlertReason
from shared.model.runs import PlacementSkip
from shared.policy.classify import Classification, classify_error
from shared.policy.decisions import (
    Decision,
    PlacementNotInChain,
    backoff_delay,
    decide,
    placement_index,
)
from shared.policy.records import placement_record

PERSISTENT = PersistentResourcePlacement("a100-pool")
FLEX_2H = FlexStartPlacement(timedelta(hours=2))
FLEX_EAST = FlexStartPlacement(timedelta(hours=6), region="us-east4")
FLEX_H100 = FlexStartPlacement(
    timedelta(0),
    region="europe-west4",
    machine=MachineOverride("a3-highgpu-1g", "NVIDIA_H100_80GB", 1),
)
CHAIN = (PERSISTENT, FLEX_2H, FLEX_EAST, FLEX_H100)
JOB_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {
                "machineType": "a2-highgpu-1g",
                "acceleratorType": "NVIDIA_TESLA_A100",
                "acceleratorCount": 1,
            },
            "replicaCount": "1",
            "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4"},
        }
    ]
}

STOCKOUT = classify_error(
    "JOB_STATE_FAILED",
    8,
    "Resources are insufficient in region: us-central1. Please try a different region.",
)
FLEX_EXPIRED = classify_error(
    "JOB_STATE_FAILED",
    8,
    "The job could not be scheduled within its max wait duration of 2h. Resources are "
    "insufficient in region: us-central1.",
)
INTERNAL = classify_error(
    "JOB_STATE_FAILED", 13, "Internal error occurred for the current attempt."
)
USER_EXIT = classify_error(
    "JOB_STATE_FAILED",
    3,
    "The replica workerpool0-0 exited with a non-zero status of 1. To find out more about why "
    "your job exited please check the logs: https://console.cloud.google.com/logs/viewer",
)
QUOTA_K80 = classify_error(
    "JOB_STATE_FAILED",
    8,
    "The following quota metrics exceed quota limits: "
    "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
)
INVALID = classify_error(
    "JOB_STATE_FAILED",
    3,
    "acceleratorType NVIDIA_TESLA_T4 is not supported with machine type a2-highgpu-1g.",
)
DENIED = classify_error(
    "JOB_STATE_FAILED", 7, "Permission 'aiplatform.customJobs.create' denied on resource."
)
UNKNOWN = classify_error("JOB_STATE_FAILED", 2, "Something unexpected happened.")
CANCELLED = classify_error("JOB_STATE_CANCELLED", 1, "CustomJob was cancelled.")
SUCCEEDED = classify_error("JOB_STATE_SUCCEEDED", 0, "")


def template(
    chain: tuple = CHAIN,
    attempts: int = 4,
    user_failures: int = 1,
    retry_on: tuple[FailureClass, ...] = (FailureClass.CAPACITY, FailureClass.INFRASTRUCTURE),
    base: timedelta = timedelta(seconds=60),
    cap: timedelta = timedelta(minutes=30),
) -> Template:
    return Template(
        name="resnet-a100",
        display_name="resnet-{run_id}",
        job_spec=JOB_SPEC,
        placements=chain,
        retry=RetryPolicy(
            attempts=attempts,
            backoff_base=base,
            backoff_cap=cap,
            user_failures=user_failures,
            retry_on=frozenset(retry_on),
        ),
    )


def attempt(number: int, placement: object, failure: Classification | None = None) -> Attempt:
    """Attempt ``number`` on ``placement``, ended as ``failure`` (None: its job just ended)."""
    region = getattr(placement, "region", None) or REGION
    return an_attempt(
        number,
        placement=placement_record(placement),  # type: ignore[arg-type]
        region=region,
        intent_at=NOW - timedelta(hours=number),
        job_name=job_name(number, parent_of(region, PROJECT_NUMBER)),
        state=failure.state if failure else "JOB_STATE_RUNNING",
        error=failure.error_record() if failure else None,
    )


def run(*attempts: Attempt) -> Run:
    """A run whose last job (of ``attempts``) just ended: what ``decide`` decides about."""
    return a_run(RunStatus.RUNNING, *attempts)


# (run, template, classification of its last job, status, retry, alert reason)
DECISIONS = [
    pytest.param(
        run(attempt(1, PERSISTENT)),
        template(),
        SUCCEEDED,
        RunStatus.SUCCEEDED,
        None,
        None,
        id="success completes",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(),
        CANCELLED,
        RunStatus.CANCELLED,
        None,
        None,
        id="cancelled: never retried, no alert",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT)),
        template(),
        STOCKOUT,
        RunStatus.WAITING_RETRY,
        a_retry_plan(2, at=NOW, placement_index=1, reason="capacity"),
        None,
        id="persistent resource full -> FLEX_START at once",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT, STOCKOUT), attempt(2, FLEX_2H)),
        template(),
        FLEX_EXPIRED,
        RunStatus.WAITING_RETRY,
        a_retry_plan(3, at=NOW, placement_index=2, reason="capacity"),
        None,
        id="FLEX_START wait expired -> next placement",
    ),
    pytest.param(
        run(attempt(1, FLEX_EAST)),
        template(),
        STOCKOUT,
        RunStatus.WAITING_RETRY,
        a_retry_plan(2, at=NOW, placement_index=3, reason="capacity"),
        None,
        id="fallback follows the failed attempt's placement, not its number",
    ),
    pytest.param(
        run(attempt(1, FLEX_H100)),
        template(),
        FLEX_EXPIRED,
        RunStatus.FAILED,
        None,
        AlertReason.NO_PLACEMENT,
        id="chain exhausted",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT, STOCKOUT), attempt(2, FLEX_2H)),
        template(attempts=2),
        STOCKOUT,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="capacity on the last attempt allowed",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT)),
        template(retry_on=(FailureClass.INFRASTRUCTURE,)),
        STOCKOUT,
        RunStatus.FAILED,
        None,
        AlertReason.NO_PLACEMENT,
        id="capacity not in retry_on",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(),
        INTERNAL,
        RunStatus.WAITING_RETRY,
        "backoff",
        None,
        id="infrastructure -> same placement, backoff",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(retry_on=(FailureClass.CAPACITY,)),
        INTERNAL,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="infrastructure not retried",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H, INTERNAL), attempt(2, FLEX_2H, INTERNAL), attempt(3, FLEX_2H)),
        template(attempts=3),
        INTERNAL,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="infrastructure, attempts spent",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(retry_on=(FailureClass.UNKNOWN,)),
        UNKNOWN,
        RunStatus.WAITING_RETRY,
        "backoff",
        None,
        id="unknown retried when listed",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(),
        UNKNOWN,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="unknown alerted when unlisted",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(user_failures=0),
        USER_EXIT,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="user code, user_failures 0",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(user_failures=1),
        USER_EXIT,
        RunStatus.WAITING_RETRY,
        a_retry_plan(2, at=NOW, placement_index=1, reason="user_code"),
        None,
        id="user code, user_failures 1, first failure -> same placement at once",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H, USER_EXIT), attempt(2, FLEX_2H)),
        template(user_failures=1),
        USER_EXIT,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="user code, user_failures 1 already spent",
    ),
    pytest.param(
        run(
            attempt(1, PERSISTENT, STOCKOUT),
            attempt(2, FLEX_2H, FLEX_EXPIRED),
            attempt(3, FLEX_EAST, INTERNAL),
            attempt(4, FLEX_EAST),
        ),
        template(attempts=5, user_failures=1),
        USER_EXIT,
        RunStatus.WAITING_RETRY,
        a_retry_plan(5, at=NOW, placement_index=2, reason="user_code"),
        None,
        id="capacity waits and infrastructure retries do not spend the user budget",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT, STOCKOUT), attempt(2, FLEX_2H)),
        template(attempts=2, user_failures=1),
        USER_EXIT,
        RunStatus.FAILED,
        None,
        AlertReason.RETRIES_EXHAUSTED,
        id="user code with budget left but no attempt left",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT)),
        template(),
        QUOTA_K80,
        RunStatus.FAILED,
        None,
        AlertReason.QUOTA,
        id="quota ceiling alerted",
    ),
    pytest.param(
        run(attempt(1, FLEX_2H)),
        template(retry_on=(FailureClass.CAPACITY, FailureClass.QUOTA)),
        QUOTA_K80,
        RunStatus.WAITING_RETRY,
        a_retry_plan(2, at=NOW, placement_index=2, reason="quota"),
        None,
        id="quota listed in retry_on -> next placement",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT)),
        template(),
        INVALID,
        RunStatus.FAILED,
        None,
        AlertReason.INVALID_SPEC,
        id="invalid spec: FAILED, not REJECTED",
    ),
    pytest.param(
        run(attempt(1, PERSISTENT)),
        template(),
        DENIED,
        RunStatus.FAILED,
        None,
        AlertReason.PERMISSION,
        id="permission denied",
    ),
    pytest.param(
        run(attempt(1, PersistentResourcePlacement("removed-pool"))),
        template(),
        STOCKOUT,
        RunStatus.FAILED,
        None,
        AlertReason.NO_PLACEMENT,
        id="placement no longer in the chain",
    ),
]


@pytest.mark.parametrize(
    ("the_run", "the_template", "classification", "status", "retry", "reason"), DECISIONS
)
def test_decide(
    the_run: Run,
    the_template: Template,
    classification: Classification,
    status: RunStatus,
    retry: RetryPlan | str | None,
    reason: AlertReason | None,
) -> None:
    decision = decide(the_run, the_template, classification, now=NOW, rng=random.Random(7))

    assert decision.status is status
    assert decision.complete is (status is RunStatus.SUCCEEDED)
    assert (decision.alert.reason if decision.alert else None) == reason
    if retry == "backoff":
        assert decision.retry is not None
        last = the_run.attempts[-1]
        assert decision.retry.attempt == last.number + 1
        assert decision.retry.placement_index == placement_index(the_template, last)
        assert NOW + timedelta(seconds=30) <= decision.retry.at <= NOW + timedelta(seconds=60)
    else:
        assert decision.retry == retry
    assert decision.explanation
    assert "\n" not in decision.explanation


def test_same_decision_for_the_same_inputs() -> None:
    the_run = run(attempt(1, FLEX_2H))

    first = decide(the_run, template(), INTERNAL, now=NOW, rng=random.Random(3))
    again = decide(the_run, template(), INTERNAL, now=NOW, rng=random.Random(3))

    assert first == again


def test_success_publishes_a_completion() -> None:
    decision = decide(
        run(attempt(1, PERSISTENT)), template(), SUCCEEDED, now=NOW, rng=random.Random()
    )

    assert decision == Decision(
        RunStatus.SUCCEEDED,
        complete=True,
        explanation=f"attempt 1 succeeded: {SUCCEEDED.summary}",
    )


@pytest.mark.parametrize(
    ("placement", "metric"),
    [
        pytest.param(
            FLEX_H100,
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100_gpus",
            id="FLEX_START with a machine override: its GPU's preemptible quota",
        ),
        pytest.param(
            FLEX_2H,
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus",
            id="FLEX_START: the template's GPU's preemptible quota",
        ),
        pytest.param(
            PERSISTENT,
            "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
            id="persistent resource: the metric the error names",
        ),
    ],
)
def test_quota_alert_names_the_metric_to_raise(placement: object, metric: str) -> None:
    the_run = run(attempt(1, placement))

    decision = decide(the_run, template(), QUOTA_K80, now=NOW, rng=random.Random())

    assert decision.alert is not None
    assert f"raise the quota {metric} in region {the_run.attempts[0].region}" in (
        decision.alert.what_to_do
    )


def test_invalid_spec_alert_names_the_rule_broken() -> None:
    decision = decide(
        run(attempt(1, PERSISTENT)), template(), INVALID, now=NOW, rng=random.Random()
    )

    assert decision.alert is not None
    assert INVALID.message in decision.alert.message
    assert INVALID.message in decision.alert.what_to_do


def test_user_code_alert_carries_the_job_error() -> None:
    the_run = run(attempt(1, FLEX_2H, USER_EXIT), attempt(2, FLEX_2H))

    decision = decide(the_run, template(user_failures=1), USER_EXIT, now=NOW, rng=random.Random())

    assert decision.alert is not None
    assert USER_EXIT.message in decision.alert.message
    assert "2 user-code failure(s), user_failures allows 1 retry" in decision.alert.message


def test_explanation_of_a_traceback_stays_one_line() -> None:
    traceback = classify_error(
        "JOB_STATE_FAILED",
        3,
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."
        ' \nTraceback (most recent call last):\n  File "/app/train.py", line 12, in <module>\n'
        "ValueError: dataset is empty",
    )

    decision = decide(
        run(attempt(1, FLEX_2H)), template(user_failures=0), traceback, now=NOW, rng=random.Random()
    )

    assert decision.alert is not None
    assert "ValueError: dataset is empty" in decision.alert.message
    assert "\n" not in decision.explanation


def test_a_run_without_attempts_cannot_be_decided() -> None:
    with pytest.raises(InvalidTransition, match="has no attempt"):
        decide(run(), template(), STOCKOUT, now=NOW, rng=random.Random())


@pytest.mark.parametrize(("placement", "index"), [(p, i) for i, p in enumerate(CHAIN)])
def test_placement_index_finds_the_recorded_placement(placement: object, index: int) -> None:
    assert placement_index(template(), attempt(1, placement)) == index


def test_placement_index_of_a_placement_gone_from_the_chain() -> None:
    gone = attempt(1, replace(FLEX_EAST, region="asia-east1"))

    with pytest.raises(PlacementNotInChain, match="not in the placement chain of template"):
        placement_index(template(), gone)


@pytest.mark.parametrize(
    ("failures", "low", "high"),
    [
        (1, 30, 60),  # base 60 s, equal jitter: [backoff/2, backoff]
        (2, 60, 120),  # doubles
        (3, 120, 240),
        (5, 480, 960),
        (6, 900, 1800),  # 1920 s capped at 30 min
        (20, 900, 1800),  # stays capped
    ],
)
def test_backoff_doubles_from_base_to_cap_with_bounded_jitter(
    failures: int, low: int, high: int
) -> None:
    rng = random.Random(2026)
    delays = [backoff_delay(template(), failures, rng) for _ in range(200)]

    assert all(timedelta(seconds=low) <= delay <= timedelta(seconds=high) for delay in delays)
    assert len(set(delays)) > 10  # jittered, not constant


def test_backoff_grows_with_each_infrastructure_failure_of_the_run() -> None:
    earlier = (attempt(1, FLEX_2H, INTERNAL), attempt(2, FLEX_2H, UNKNOWN))
    the_run = run(*earlier, attempt(3, FLEX_2H))
    policy = template(attempts=5, retry_on=(FailureClass.INFRASTRUCTURE, FailureClass.UNKNOWN))

    decision = decide(the_run, policy, INTERNAL, now=NOW, rng=random.Random(11))

    assert decision.retry is not None
    assert NOW + timedelta(seconds=120) <= decision.retry.at <= NOW + timedelta(seconds=240)


@pytest.mark.parametrize(
    ("ended", "status", "alert"),
    [
        (SUCCEEDED, RunStatus.SUCCEEDED, None),
        (CANCELLED, RunStatus.CANCELLED, None),
        (STOCKOUT, RunStatus.FAILED, AlertReason.TEMPLATE_GONE),  # no chain to move along
        (INTERNAL, RunStatus.FAILED, AlertReason.TEMPLATE_GONE),  # no policy to retry by
        (USER_EXIT, RunStatus.FAILED, AlertReason.TEMPLATE_GONE),
    ],
)
def test_a_run_whose_template_left_the_config_is_still_decided(
    ended: Classification, status: RunStatus, alert: AlertReason | None
) -> None:
    decision = decide(run(attempt(1, FLEX_2H)), None, ended, now=NOW, rng=random.Random())

    assert decision.status is status and decision.retry is None
    assert (decision.alert.reason if decision.alert else None) == alert
    if decision.alert:
        assert "vertex-dispatch retry" in decision.alert.what_to_do


@pytest.mark.parametrize(
    ("placement", "metric"),
    [
        pytest.param(
            SpotPlacement(region="us-east4"),
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus",
            id="Spot: the template's GPU's preemptible quota",
        ),
        pytest.param(
            SpotPlacement(machine=MachineOverride("n1-standard-8", "NVIDIA_TESLA_T4", 1)),
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_t4_gpus",
            id="Spot with a machine override: its GPU's preemptible quota",
        ),
        pytest.param(
            OnDemandPlacement(),
            "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
            id="on demand: the metric the error names",
        ),
        pytest.param(
            ReservationPlacement(name="projects/acme-ml/zones/us-central1-a/reservations/r"),
            "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
            id="reservation: the metric the error names",
        ),
    ],
)
def test_quota_alert_of_the_new_kinds(placement: object, metric: str) -> None:
    the_run = run(attempt(1, placement))

    decision = decide(
        the_run, template(chain=(placement,)), QUOTA_K80, now=NOW, rng=random.Random()
    )

    assert decision.alert is not None
    assert f"raise the quota {metric} in region {the_run.attempts[0].region}" in (
        decision.alert.what_to_do
    )


def test_a_stockout_on_the_last_placement_goes_back_to_one_passed_over_for_cooldown() -> None:
    # The walk ran the last placement first because the first was cooling down (another run's
    # stockout): when the last one stocks out too, the run tries the first, never tried by it,
    # instead of calling the chain exhausted.
    central, east = OnDemandPlacement(region="us-central1"), OnDemandPlacement(region="us-east4")
    passed_over = PlacementSkip(placement_record(central), REGION, "cooldown", "cooling", NOW)
    last = replace(attempt(1, east, STOCKOUT), skips=(passed_over,))

    decision = decide(
        run(last), template(chain=(central, east)), STOCKOUT, now=NOW, rng=random.Random(1)
    )

    assert decision.status is RunStatus.WAITING_RETRY
    assert decision.retry == RetryPlan(NOW, 2, 0, "capacity")


def test_the_chain_is_exhausted_once_the_placement_passed_over_was_tried() -> None:
    central, east = OnDemandPlacement(region="us-central1"), OnDemandPlacement(region="us-east4")
    passed_over = PlacementSkip(placement_record(central), REGION, "cooldown", "cooling", NOW)
    first = replace(attempt(1, east, STOCKOUT), skips=(passed_over,))
    second = attempt(2, central, STOCKOUT)

    decision = decide(
        run(first, second),
        template(chain=(central, east)),
        STOCKOUT,
        now=NOW,
        rng=random.Random(1),
    )

    assert decision.status is RunStatus.FAILED
    assert decision.alert is not None and decision.alert.reason == AlertReason.NO_PLACEMENT


@pytest.mark.parametrize(
    ("order", "ran", "next_index"),
    [
        pytest.param(None, (1,), 2, id="as-written-the-next-in-the-chain"),
        pytest.param((2, 1, 0, 3), (2,), 1, id="learned-the-next-of-the-recorded-order"),
        pytest.param((3, 1, 0, 2), (3,), 1, id="learned-back-up-the-chain"),
        pytest.param((3, 1, 0, 2), (3, 1), 0, id="learned-skips-none-it-has-not-run-on"),
        pytest.param((3, 1, 0, 2), (3, 1, 0, 2), None, id="learned-order-exhausted"),
        pytest.param((2, 1, 0), (1,), 2, id="an-order-that-no-longer-fits-is-the-written-one"),
    ],
)
def test_a_capacity_end_moves_to_the_next_placement_of_the_runs_order(
    order: tuple[int, ...] | None, ran: tuple[int, ...], next_index: int | None
) -> None:
    attempts = [attempt(number, CHAIN[index]) for number, index in enumerate(ran, start=1)]
    attempts[-1] = attempt(len(ran), CHAIN[ran[-1]], STOCKOUT)
    the_run = replace(run(*attempts), placement_order=order)

    decision = decide(the_run, template(attempts=9), STOCKOUT, now=NOW, rng=random.Random(1))

    if next_index is None:
        assert decision.status is RunStatus.FAILED
    else:
        assert decision.retry == RetryPlan(NOW, len(ran) + 1, next_index, "capacity")
