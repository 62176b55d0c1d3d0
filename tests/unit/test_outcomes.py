"""shared.policy.classify: real Vertex AI error texts and the emulator's own → a failure class."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.cloud import aiplatform_v1
from google.rpc import status_pb2

from shared.config.model import FailureClass
from shared.model.runs import CancelReason
from shared.policy.classify import (
    CANCEL_REQUESTED_RULE,
    CLASSIFICATION_RULES,
    QUEUE_TIMEOUT_RULE,
    Classification,
    NotTerminal,
    classify,
    classify_error,
    is_terminal,
    quota_metric,
)
from vertex_ai_emulator import failures
from vertex_ai_emulator.names import LocationName

FAILED = "JOB_STATE_FAILED"
JOB = "projects/123456789012/locations/us-central1/customJobs/4606268999515242496"

# (state, code, message, class): texts quoted from real jobs (GitHub issues, Google's docs).
REAL_ERRORS = [
    pytest.param(
        FAILED,
        3,
        "The replica workerpool0-0 exited with a non-zero status of 1. To find out more about "
        "why your job exited please check the logs: https://console.cloud.google.com/logs/viewer"
        "?project=619829274226&resource=ml_job%2Fjob_id%2F4606268999515242496",
        FailureClass.USER_CODE,
        id="replica exit 1 with logs link",
    ),
    pytest.param(
        FAILED,
        3,
        "The replica workerpool0-0 exited with a non-zero status of 128. Termination reason: "
        "StartError. \n Termination log message: failed to create containerd task",
        FailureClass.USER_CODE,
        id="replica exit 128 StartError",
    ),
    pytest.param(
        FAILED,
        3,
        "The replica workerpool1-1 exited with a non-zero status of 1. Termination reason: Error. "
        '\nTraceback (most recent call last):\n  File "/root/.local/lib/python3.7/site-packages/'
        'transformers/modeling_utils.py", line 2208, in from_pretrained',
        FailureClass.USER_CODE,
        id="replica exit with traceback",
    ),
    pytest.param(
        FAILED,
        3,
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error. "
        "google.api_core.exceptions.ResourceExhausted: 429 Quota exceeded for "
        "aiplatform.googleapis.com/online_prediction_requests_per_base_model",
        FailureClass.USER_CODE,
        id="user code quoting a quota error stays user code",
    ),
    pytest.param(
        FAILED,
        2,
        "Replica exited with a non-zero status code 1",
        FailureClass.USER_CODE,
        id="short replica exit wording",
    ),
    pytest.param(
        FAILED,
        8,
        "The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
        FailureClass.QUOTA,
        id="quota metrics exceed (code 8)",
    ),
    pytest.param(
        FAILED,
        8,
        "Quota exceeded for aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100"
        "_gpus with base model: none. Please submit a quota increase request.",
        FailureClass.QUOTA,
        id="quota exceeded for preemptible H100",
    ),
    pytest.param(
        FAILED,
        8,
        "Quota failure for project qwiklabs-gcp-00-1234. The request for 2 K80 accelerators "
        "exceeds the allowed maximum of 0 A100, 0 K80, 0 P100, 0 P4, 0 T4, 0 TPU_V2, 0 V100 "
        "accelerators.",
        FailureClass.QUOTA,
        id="quota failure for project",
    ),
    pytest.param(
        FAILED,
        8,
        "Resources are insufficient in region: us-central1. Please try a different region. If "
        "you use K80, please consider using P100 or V100 instead.",
        FailureClass.CAPACITY,
        id="stockout in region",
    ),
    pytest.param(
        FAILED,
        8,
        "The zone 'projects/acme-ml/zones/us-central1-a' does not have enough resources available "
        "to fulfill the request.  Try a different zone, or try again later.",
        FailureClass.CAPACITY,
        id="zone lacks resources",
    ),
    pytest.param(
        FAILED,
        8,
        "ZONE_RESOURCE_POOL_EXHAUSTED: the zone us-east4-c has no a3-highgpu-8g available",
        FailureClass.CAPACITY,
        id="ZONE_RESOURCE_POOL_EXHAUSTED",
    ),
    pytest.param(
        FAILED,
        8,
        "Resource exhausted.",
        FailureClass.CAPACITY,
        id="code 8 without quota wording",
    ),
    pytest.param(
        "JOB_STATE_EXPIRED",
        0,
        "",
        FailureClass.CAPACITY,
        id="expired without error",
    ),
    pytest.param(
        "JOB_STATE_EXPIRED",
        8,
        "Quota exceeded for aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_"
        "a100_gpus",
        FailureClass.QUOTA,
        id="expired with quota wording is quota",
    ),
    pytest.param(
        FAILED,
        13,
        "Internal error occurred for the current attempt.",
        FailureClass.INFRASTRUCTURE,
        id="internal error code 13",
    ),
    pytest.param(
        FAILED,
        2,
        "Internal error occurred for the current attempt.",
        FailureClass.INFRASTRUCTURE,
        id="internal error wording, code 2",
    ),
    pytest.param(
        FAILED,
        14,
        "The service is currently unavailable.",
        FailureClass.INFRASTRUCTURE,
        id="unavailable code 14",
    ),
    pytest.param(
        FAILED,
        13,
        "Job failed: worker workerpool0-0 restarts exceeded the maximum of 5; the job was "
        "retried 3 times.",
        FailureClass.INFRASTRUCTURE,
        id="worker restarts exhausted",
    ),
    pytest.param(
        FAILED,
        3,
        "Invalid argument: acceleratorType NVIDIA_TESLA_T4 is not supported with machine type "
        "a2-highgpu-1g.",
        FailureClass.INVALID_SPEC,
        id="INVALID_ARGUMENT without replica exit",
    ),
    pytest.param(
        FAILED,
        9,
        "Persistent resource projects/123/locations/us-central1/persistentResources/a100-pool "
        "is not in RUNNING state.",
        FailureClass.INVALID_SPEC,
        id="FAILED_PRECONDITION",
    ),
    pytest.param(
        FAILED,
        7,
        "Permission 'aiplatform.customJobs.create' denied on resource "
        "'//aiplatform.googleapis.com/projects/acme-ml/locations/us-central1' (or it may not "
        "exist).",
        FailureClass.INVALID_SPEC,
        id="permission denied",
    ),
    pytest.param(
        FAILED,
        5,
        "Image us-docker.pkg.dev/acme-ml/train/resnet:9.9 not found.",
        FailureClass.INVALID_SPEC,
        id="NOT_FOUND image",
    ),
    pytest.param(
        "JOB_STATE_CANCELLED",
        1,
        "CustomJob was cancelled.",
        FailureClass.CANCELLED,
        id="cancelled state",
    ),
    pytest.param(
        FAILED,
        1,
        "The operation was cancelled.",
        FailureClass.CANCELLED,
        id="code 1 in a failed job",
    ),
    pytest.param(FAILED, 0, "", FailureClass.UNKNOWN, id="failed with no error at all"),
    pytest.param(
        FAILED,
        4,
        "Job exceeded its timeout of 172800s.",
        FailureClass.UNKNOWN,
        id="deadline exceeded is unknown",
    ),
    pytest.param(
        FAILED,
        2,
        "Something unexpected happened.",
        FailureClass.UNKNOWN,
        id="unrecognised text",
    ),
    pytest.param(
        "JOB_STATE_PARTIALLY_SUCCEEDED",
        0,
        "",
        FailureClass.UNKNOWN,
        id="partially succeeded is not success",
    ),
]

# (state, code, message, class, row): the texts of the placement kinds of issue 13. The emulator
# words a Spot preemption and a reservation without free VMs this way (its documented contract);
# Google documents no training text for either. The rows around them show the order rules.
RESERVATION = "projects/acme-ml/zones/us-central1-a/reservations/a100-block"
PLACEMENT_KIND_ERRORS = [
    pytest.param(
        FAILED,
        8,
        "The job was preempted: its Spot VMs were reclaimed by Compute Engine. Resources are "
        "insufficient in region: us-central1.",
        FailureClass.CAPACITY,
        "Spot VM preempted",
        id="spot preempted with the stockout wording",
    ),
    pytest.param(
        FAILED,
        14,
        "Worker workerpool0-0 was preempted.",
        FailureClass.CAPACITY,
        "Spot VM preempted",
        id="spot preempted reported as UNAVAILABLE is still capacity",
    ),
    pytest.param(
        FAILED,
        8,
        f"Reservation {RESERVATION} has insufficient capacity: resources are insufficient in "
        "zone us-central1-a",
        FailureClass.CAPACITY,
        "reservation without capacity",
        id="reservation without free VMs",
    ),
    pytest.param(
        FAILED,
        8,
        f"The specific reservation {RESERVATION} does not have enough capacity for 2 VMs.",
        FailureClass.CAPACITY,
        "reservation without capacity",
        id="reservation lacks capacity, other wording",
    ),
    pytest.param(
        FAILED,
        3,
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error. "
        "torch.distributed.elastic: worker group was preempted",
        FailureClass.USER_CODE,
        "replica exited non-zero",
        id="a traceback saying preempted stays user code",
    ),
    pytest.param(
        FAILED,
        3,
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error. "
        "RuntimeError: reservation pool has insufficient capacity",
        FailureClass.USER_CODE,
        "replica exited non-zero",
        id="a traceback about a reservation stays user code",
    ),
    pytest.param(
        FAILED,
        8,
        "The job was preempted. The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus",
        FailureClass.QUOTA,
        "quota ceiling",
        id="quota wording wins over preempted",
    ),
    pytest.param(
        FAILED,
        8,
        "Quota exceeded for aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_l4"
        "_gpus",
        FailureClass.QUOTA,
        "quota ceiling",
        id="preemptible quota is not a preemption",
    ),
]


@pytest.mark.parametrize(("state", "code", "message", "expected", "rule"), PLACEMENT_KIND_ERRORS)
def test_spot_preemption_and_a_full_reservation_are_capacity(
    state: str, code: int, message: str, expected: FailureClass, rule: str
) -> None:
    result = classify_error(state, code, message)

    assert (result.failure, result.evidence) == (expected, rule)


@pytest.mark.parametrize(("state", "code", "message", "expected"), REAL_ERRORS)
def test_real_error_texts_are_classified(
    state: str, code: int, message: str, expected: FailureClass
) -> None:
    result = classify_error(state, code, message)

    assert (result.failure, result.succeeded) == (expected, False)
    assert result.message == message
    assert result.code == (code or None)
    assert result.summary.startswith(f"{state}: {expected.value}")
    assert "\n" not in result.summary


def _job(state: str, error: status_pb2.Status | None = None) -> aiplatform_v1.CustomJob:
    job = aiplatform_v1.CustomJob(name=JOB, state=aiplatform_v1.JobState[state])
    if error is not None:
        job.error = error
    return job


EMULATED_JOB = LocationName("123456789012", "us-central1").child("customJobs", "4606268999515")

# The errors the project's Vertex AI emulator sets, built by its own functions.
EMULATOR_ERRORS = [
    pytest.param(FAILED, failures.stockout("us-central1"), FailureClass.CAPACITY, "stockout"),
    pytest.param(
        FAILED,
        failures.flex_start_wait_expired("us-central1", 7200),
        FailureClass.CAPACITY,
        "FLEX_START max wait expired",
    ),
    pytest.param(
        FAILED,
        failures.persistent_resource_full(
            "projects/123456789012/locations/us-central1/persistentResources/a100-pool",
            "1 replica of a2-highgpu-1g",
            "0",
        ),
        FailureClass.CAPACITY,
        "persistent resource full",
    ),
    pytest.param(
        FAILED,
        failures.user_error(EMULATED_JOB, 1),
        FailureClass.USER_CODE,
        "replica exited non-zero",
    ),
    pytest.param(
        FAILED,
        failures.user_error(EMULATED_JOB, 137),
        FailureClass.USER_CODE,
        "replica exited non-zero",
    ),
    pytest.param(FAILED, failures.internal_error(), FailureClass.INFRASTRUCTURE, "internal error"),
    pytest.param(
        "JOB_STATE_CANCELLED", failures.cancelled(), FailureClass.CANCELLED, "state cancelled"
    ),
]


@pytest.mark.parametrize(("state", "error", "expected", "rule"), EMULATOR_ERRORS)
def test_emulator_jobs_are_classified(
    state: str, error: status_pb2.Status, expected: FailureClass, rule: str
) -> None:
    result = classify(_job(state, error))

    assert (result.failure, result.evidence) == (expected, rule)
    assert (result.code, result.message) == (error.code, error.message)


def test_a_succeeded_job_is_a_success_without_failure_class() -> None:
    result = classify(_job("JOB_STATE_SUCCEEDED"))

    assert result == Classification(
        state="JOB_STATE_SUCCEEDED",
        succeeded=True,
        failure=None,
        code=None,
        message="",
        evidence="state succeeded",
        summary="JOB_STATE_SUCCEEDED",
    )
    assert result.error_record() is None


@pytest.mark.parametrize(
    "state", ["JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING"]
)
def test_a_job_that_has_not_ended_cannot_be_classified(state: str) -> None:
    with pytest.raises(NotTerminal, match=rf"{JOB} is {state}, not terminal"):
        classify(_job(state))


@pytest.mark.parametrize(
    ("state", "terminal"),
    [
        ("JOB_STATE_SUCCEEDED", True),
        ("JOB_STATE_FAILED", True),
        ("JOB_STATE_CANCELLED", True),
        ("JOB_STATE_EXPIRED", True),
        ("JOB_STATE_PARTIALLY_SUCCEEDED", True),
        ("JOB_STATE_QUEUED", False),
        ("JOB_STATE_PENDING", False),
        ("JOB_STATE_RUNNING", False),
        ("JOB_STATE_CANCELLING", False),
        ("JOB_STATE_PAUSED", False),
        ("JOB_STATE_UPDATING", False),
        ("INTENT", False),
        (aiplatform_v1.JobState.JOB_STATE_FAILED, True),
        (aiplatform_v1.JobState.JOB_STATE_RUNNING, False),
    ],
)
def test_is_terminal(state: str | aiplatform_v1.JobState, terminal: bool) -> None:
    assert is_terminal(state) is terminal


@pytest.mark.parametrize(
    ("message", "metric"),
    [
        (
            "The following quota metrics exceed quota limits: "
            "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",
            "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",
        ),
        (
            "Quota exceeded for aiplatform.googleapis.com/custom_model_training_preemptible_nvidia"
            "_h100_gpus with base model: none.",
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100_gpus",
        ),
        ("Quota failure for project p. The request for 2 K80 accelerators exceeds ...", None),
        ("", None),
    ],
)
def test_quota_metric_is_read_from_the_message(message: str, metric: str | None) -> None:
    assert quota_metric(message) == metric


def test_error_record_is_what_the_ledger_stores() -> None:
    result = classify(_job(FAILED, failures.internal_error()))

    assert result.error_record() == {
        "code": 13,
        "message": "Internal error occurred for the current attempt.",
        "class": "infrastructure",
    }


def test_every_verdict_row_is_reached_by_some_test_case() -> None:
    reached = {classify_error(*case.values[:3]).evidence for case in REAL_ERRORS}
    reached |= {case.values[3] for case in EMULATOR_ERRORS}
    reached |= {case.values[4] for case in PLACEMENT_KIND_ERRORS}

    assert {row.rule for row in CLASSIFICATION_RULES} <= reached


@pytest.mark.parametrize(
    ("state", "error", "failure"),
    [
        # A container that exits non-zero on SIGTERM ends FAILED: still our cancel.
        ("JOB_STATE_FAILED", status_pb2.Status(code=3, message="exit status 143"), "cancelled"),
        ("JOB_STATE_CANCELLED", status_pb2.Status(code=1, message="CANCELED"), "cancelled"),
        ("JOB_STATE_FAILED", None, "cancelled"),
        ("JOB_STATE_SUCCEEDED", None, None),  # the cancel came too late: it succeeded
    ],
)
def test_a_job_we_asked_to_cancel_ends_cancelled_short_of_success(
    state: str, error: status_pb2.Status | None, failure: str | None
) -> None:
    result = classify(_job(state, error), cancel_requested=True)

    assert result.state == state
    assert (result.failure.value if result.failure else None) == failure
    assert result.succeeded is (failure is None)


def test_a_failed_job_nobody_cancelled_is_a_failure() -> None:
    error = status_pb2.Status(code=3, message="exit status 143")
    assert classify(_job("JOB_STATE_FAILED", error)).failure is not FailureClass.CANCELLED


@pytest.mark.parametrize(
    ("state", "error", "started", "reason", "failure", "evidence"),
    [
        # The queue watchdog's cancel: the placement did not take the job in time.
        (
            "JOB_STATE_CANCELLED",
            status_pb2.Status(code=1, message="CANCELED"),
            False,
            CancelReason.QUEUE_TIMEOUT,
            "capacity",
            QUEUE_TIMEOUT_RULE,
        ),
        (
            "JOB_STATE_FAILED",
            None,
            False,
            CancelReason.QUEUE_TIMEOUT,
            "capacity",
            QUEUE_TIMEOUT_RULE,
        ),
        # It started before the cancel reached it, then failed: read by its error.
        (
            "JOB_STATE_FAILED",
            status_pb2.Status(code=13, message="Internal error occurred."),
            True,
            CancelReason.QUEUE_TIMEOUT,
            "infrastructure",
            "internal error",
        ),
        (
            "JOB_STATE_CANCELLED",
            None,
            True,
            CancelReason.QUEUE_TIMEOUT,
            "capacity",
            QUEUE_TIMEOUT_RULE,
        ),
        ("JOB_STATE_SUCCEEDED", None, True, CancelReason.QUEUE_TIMEOUT, None, "state succeeded"),
        # An operator's cancel (or one recorded before reasons were kept) is never retried.
        (
            "JOB_STATE_CANCELLED",
            None,
            False,
            CancelReason.OPERATOR,
            "cancelled",
            CANCEL_REQUESTED_RULE,
        ),
        ("JOB_STATE_CANCELLED", None, False, None, "cancelled", CANCEL_REQUESTED_RULE),
    ],
)
def test_why_we_asked_for_the_cancel_decides_what_the_end_means(
    state: str,
    error: status_pb2.Status | None,
    started: bool,
    reason: CancelReason | None,
    failure: str | None,
    evidence: str,
) -> None:
    job = _job(state, error)
    if started:
        job.start_time = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    result = classify(job, cancel_requested=True, cancel_reason=reason)

    assert (result.failure.value if result.failure else None) == failure
    assert result.evidence == evidence
