"""Job lifecycles through the real aiplatform_v1 clients, over REST and over gRPC."""

from __future__ import annotations

import pytest
from emulator_test_support import (
    A100_POOL,
    CANCEL_SECONDS,
    PARENT,
    PERSISTENT_START_SECONDS,
    PROJECT_NUMBER,
    PROVISIONING_SECONDS,
    REGION,
    RUN_SECONDS,
    flex_start_job,
    persistent_resource_job,
)
from google.api_core import exceptions
from google.cloud import aiplatform_v1

pytestmark = pytest.mark.integration

JobState = aiplatform_v1.JobState
RESOURCE_EXHAUSTED = 8
CANCELLED = 1


def _state(job_client, name: str) -> JobState:
    return job_client.get_custom_job(name=name).state


def test_a_flex_start_job_queues_runs_once_capacity_comes_and_succeeds(job_client, admin):
    job = job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job())
    assert job.name.startswith(f"projects/{PROJECT_NUMBER}/locations/{REGION}/customJobs/")
    assert job.state == JobState.JOB_STATE_QUEUED

    admin.advance_clock(600)
    assert _state(job_client, job.name) == JobState.JOB_STATE_QUEUED

    admin.set_capacity("NVIDIA_TESLA_A100", 1)
    assert _state(job_client, job.name) == JobState.JOB_STATE_PENDING
    admin.advance_clock(PROVISIONING_SECONDS)
    assert _state(job_client, job.name) == JobState.JOB_STATE_RUNNING
    admin.advance_clock(RUN_SECONDS)

    finished = job_client.get_custom_job(name=job.name)
    assert finished.state == JobState.JOB_STATE_SUCCEEDED
    assert finished.start_time < finished.end_time


def test_a_flex_start_job_whose_wait_expires_fails_with_resource_exhausted(job_client, admin):
    job = job_client.create_custom_job(
        parent=PARENT, custom_job=flex_start_job(max_wait_seconds=1800)
    )
    admin.advance_clock(1799)
    assert _state(job_client, job.name) == JobState.JOB_STATE_QUEUED
    admin.advance_clock(2)

    expired = job_client.get_custom_job(name=job.name)
    assert expired.state == JobState.JOB_STATE_FAILED
    assert expired.error.code == RESOURCE_EXHAUSTED


def test_with_an_error_delay_a_failed_job_has_no_error_at_first(job_client, admin):
    """As the real service: the error is set about a minute after the end (timings.error_delay,
    here set at run time through the admin API, until the next reset)."""
    timings = admin.call("PUT", "timings", {"error_delay": "60s"})
    assert timings["error_delay"] == 60
    assert admin.call("GET", "timings") == timings
    job = job_client.create_custom_job(
        parent=PARENT, custom_job=flex_start_job(max_wait_seconds=1800)
    )
    admin.advance_clock(1800)

    expired = job_client.get_custom_job(name=job.name)
    assert expired.state == JobState.JOB_STATE_FAILED
    assert (expired.error.code, expired.error.message) == (0, "")
    listed = next(iter(job_client.list_custom_jobs(parent=PARENT)))
    assert (listed.state, listed.error.code) == (JobState.JOB_STATE_FAILED, 0)

    admin.advance_clock(60)
    settled = job_client.get_custom_job(name=job.name)
    assert settled.error.code == RESOURCE_EXHAUSTED
    assert settled.update_time > settled.end_time == expired.end_time

    admin.call("POST", "reset")
    assert admin.call("GET", "timings")["error_delay"] == 0


def test_a_job_on_a_persistent_resource_uses_a_replica_while_it_runs(
    job_client, resource_client, admin
):
    resource_name = f"{PARENT}/persistentResources/{A100_POOL}"

    def used_replicas() -> int:
        resource = resource_client.get_persistent_resource(name=resource_name)
        return resource.resource_pools[0].used_replica_count

    assert used_replicas() == 0
    job = job_client.create_custom_job(parent=PARENT, custom_job=persistent_resource_job())
    admin.advance_clock(PERSISTENT_START_SECONDS)
    assert _state(job_client, job.name) == JobState.JOB_STATE_RUNNING
    assert used_replicas() == 1

    admin.advance_clock(RUN_SECONDS)
    assert _state(job_client, job.name) == JobState.JOB_STATE_SUCCEEDED
    assert used_replicas() == 0


def test_persistent_resources_are_listed(resource_client):
    listed = resource_client.list_persistent_resources(parent=PARENT)
    assert [resource.name.rsplit("/", 1)[-1] for resource in listed] == [A100_POOL]


def test_cancel_ends_a_job_cancelled_with_code_1(job_client, admin):
    job = job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job())
    job_client.cancel_custom_job(name=job.name)
    admin.advance_clock(CANCEL_SECONDS)

    cancelled = job_client.get_custom_job(name=job.name)
    assert cancelled.state == JobState.JOB_STATE_CANCELLED
    assert cancelled.error.code == CANCELLED


def test_delete_returns_an_operation_that_completes(job_client, admin):
    job = job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job())
    job_client.cancel_custom_job(name=job.name)
    admin.advance_clock(CANCEL_SECONDS)

    operation = job_client.delete_custom_job(name=job.name)
    operation.result(timeout=10)

    assert operation.done()
    with pytest.raises(exceptions.NotFound):
        job_client.get_custom_job(name=job.name)


def test_the_delete_operation_can_be_read_back(job_client, admin):
    job = job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job())
    job_client.cancel_custom_job(name=job.name)
    admin.advance_clock(CANCEL_SECONDS)
    operation_name = job_client.delete_custom_job(name=job.name).operation.name

    operation = job_client.get_operation(request={"name": operation_name})

    assert operation.name == operation_name
    assert operation.done
