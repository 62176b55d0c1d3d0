"""Requests the service refuses, and raw REST bodies it accepts or refuses, as the real one does.

Over gRPC the client raises the exception of the status code (`InvalidArgument`); over REST it
raises the exception of the HTTP status (`BadRequest` for every 400, of which `InvalidArgument` and
`FailedPrecondition` are subclasses), exactly as against the real service.
"""

from __future__ import annotations

import datetime

import grpc
import pytest
from emulator_test_support import (
    A100_POOL,
    PARENT,
    PROJECT_NUMBER,
    SEED_REST_BODY,
    a100_worker_pool,
    flex_start_job,
    persistent_resource_job,
    raw_rest_call,
)
from google.api_core import exceptions
from google.cloud import aiplatform_v1

pytestmark = pytest.mark.integration

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.NOT_FOUND: 404,
}


def expected_exception(transport: str, code: grpc.StatusCode) -> type[Exception]:
    if transport == "grpc":
        return exceptions.exception_class_for_grpc_status(code)
    return exceptions.exception_class_for_http_status(HTTP_STATUS[code])


def _unnamed() -> aiplatform_v1.CustomJob:
    job = flex_start_job()
    job.display_name = ""
    return job


def _flex_start_on_t4() -> aiplatform_v1.CustomJob:
    job = flex_start_job()
    machine = job.job_spec.worker_pool_specs[0].machine_spec
    machine.machine_type = "n1-standard-8"
    machine.accelerator_type = aiplatform_v1.AcceleratorType.NVIDIA_TESLA_T4
    return job


def _flex_start_for_eight_days() -> aiplatform_v1.CustomJob:
    job = flex_start_job()
    job.job_spec.scheduling.timeout = datetime.timedelta(days=8)
    return job


def _flex_start_with_mixed_machines() -> aiplatform_v1.CustomJob:
    job = flex_start_job()
    other = a100_worker_pool()
    other.machine_spec.machine_type = "a2-highgpu-2g"
    other.machine_spec.accelerator_count = 2
    job.job_spec.worker_pool_specs.append(other)
    return job


def _bad_label() -> aiplatform_v1.CustomJob:
    return flex_start_job(labels={"Run-Key": "x"})


def _on_a_missing_resource() -> aiplatform_v1.CustomJob:
    return persistent_resource_job(resource_id="no-such-pool")


def _not_matching_the_pool() -> aiplatform_v1.CustomJob:
    job = persistent_resource_job()
    job.job_spec.worker_pool_specs[0].disk_spec.boot_disk_size_gb = 200
    return job


def _more_replicas_than_the_pool() -> aiplatform_v1.CustomJob:
    job = persistent_resource_job()
    job.job_spec.worker_pool_specs.append(a100_worker_pool(replica_count=2))
    return job


@pytest.mark.parametrize(
    ("build_job", "code", "message_part"),
    [
        (_unnamed, grpc.StatusCode.INVALID_ARGUMENT, "custom_job.display_name"),
        (_flex_start_on_t4, grpc.StatusCode.INVALID_ARGUMENT, "FLEX_START does not support"),
        (_flex_start_for_eight_days, grpc.StatusCode.INVALID_ARGUMENT, "at most 7 days"),
        (_flex_start_with_mixed_machines, grpc.StatusCode.INVALID_ARGUMENT, "same machine"),
        (_bad_label, grpc.StatusCode.INVALID_ARGUMENT, "Label keys"),
        (_on_a_missing_resource, grpc.StatusCode.INVALID_ARGUMENT, "does not exist"),
        (_not_matching_the_pool, grpc.StatusCode.INVALID_ARGUMENT, "No resource pool"),
        (_more_replicas_than_the_pool, grpc.StatusCode.INVALID_ARGUMENT, "at most 2"),
    ],
)
def test_the_service_refuses_a_job_it_cannot_run(
    job_client, transport, build_job, code, message_part
):
    with pytest.raises(exceptions.GoogleAPICallError) as refused:
        job_client.create_custom_job(parent=PARENT, custom_job=build_job())

    assert type(refused.value) is expected_exception(transport, code)
    assert message_part in refused.value.message


def test_a_job_on_a_resource_that_is_not_running_is_refused(job_client, transport, admin):
    admin.call(
        "PUT",
        "persistentResources",
        {"name": f"{PARENT}/persistentResources/{A100_POOL}", "state": "STOPPING"},
    )
    with pytest.raises(exceptions.GoogleAPICallError) as refused:
        job_client.create_custom_job(parent=PARENT, custom_job=persistent_resource_job())

    assert type(refused.value) is expected_exception(transport, grpc.StatusCode.FAILED_PRECONDITION)
    assert "STOPPING" in refused.value.message


def test_an_unknown_job_is_not_found(job_client):
    with pytest.raises(exceptions.NotFound):
        job_client.get_custom_job(name=f"{PARENT}/customJobs/404")


# --- raw REST -----------------------------------------------------------------------------------


def test_the_seed_body_posted_verbatim_is_accepted(emulator_server, admin):
    status, job = raw_rest_call(
        emulator_server.rest_url, "POST", f"/v1/{PARENT}/customJobs", SEED_REST_BODY
    )

    assert status == 200
    assert job["name"].startswith(f"projects/{PROJECT_NUMBER}/")
    assert job["state"] == "JOB_STATE_QUEUED"
    assert job["jobSpec"]["scheduling"] == {"maxWaitDuration": "1800s", "strategy": "FLEX_START"}


def test_enums_may_be_sent_as_numbers(emulator_server, admin):
    body = {**SEED_REST_BODY, "jobSpec": {**SEED_REST_BODY["jobSpec"]}}
    body["jobSpec"]["scheduling"] = {"maxWaitDuration": "1800s", "strategy": 6}

    status, job = raw_rest_call(emulator_server.rest_url, "POST", f"/v1/{PARENT}/customJobs", body)

    assert status == 200
    assert job["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            f"/v1/{PARENT}/customJobs",
            {**SEED_REST_BODY, "foo": 1},
            "Invalid JSON payload received. Unknown name \"foo\" at 'custom_job': "
            "Cannot find field.",
        ),
        (
            f"/v1/{PARENT}/customJobs",
            {**SEED_REST_BODY, "jobSpec": {"scheduling": {"strategy": "FAST"}}},
            "Invalid value at 'custom_job.job_spec.scheduling.strategy' "
            '(type.googleapis.com/google.cloud.aiplatform.v1.Scheduling.Strategy), "FAST"',
        ),
        (
            f"/v1/{PARENT}/customJobs",
            b"{not json",
            "Invalid JSON payload received.",
        ),
        (
            f"/v1/{PARENT}/customJobs?pageSize=2",
            SEED_REST_BODY,
            'Invalid JSON payload received. Unknown name "pageSize": Cannot bind query parameter.',
        ),
    ],
)
def test_a_bad_rest_payload_gets_400_in_the_google_error_shape(
    emulator_server, admin, path, body, message
):
    status, answer = raw_rest_call(emulator_server.rest_url, "POST", path, body)

    assert status == 400
    assert answer["error"]["code"] == 400
    assert answer["error"]["status"] == "INVALID_ARGUMENT"
    assert answer["error"]["message"].startswith(message)
    assert admin.requests("CreateCustomJob") == []
