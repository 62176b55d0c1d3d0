"""Jobs on persistent resources: fast start, used_replica_count, and what happens when full."""

from __future__ import annotations

import pytest
from core_builders import (
    PARENT,
    RESOURCE_ID,
    RESOURCE_NAME,
    at,
    job,
    new_emulator,
    persistent_resource_config,
    pool,
    state_of,
)
from google.cloud import aiplatform_v1


def persistent_job(replicas: int = 1, display_name: str = "on-pool") -> aiplatform_v1.CustomJob:
    pools = [pool()]
    if replicas > 1:
        pools.append(pool(replicas=replicas - 1))
    return job(display_name, pools=pools, persistentResourceId=RESOURCE_ID)


def used_replicas(emulator: object) -> int:
    resource = emulator.get_persistent_resource(RESOURCE_NAME)
    return resource.resource_pools[0].used_replica_count


def test_job_starts_within_seconds_and_holds_replicas_while_running() -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config(replicas=3)])
    created = emulator.create_custom_job(PARENT, persistent_job(replicas=2))
    assert used_replicas(emulator) == 2  # admitted at once: PENDING, replicas reserved
    emulator.advance_clock(5)
    running = emulator.get_custom_job(created.name)
    assert running.state == aiplatform_v1.JobState.JOB_STATE_RUNNING
    assert running.start_time == at(5)
    assert used_replicas(emulator) == 2
    emulator.advance_clock(600)
    assert state_of(emulator, created.name) == "JOB_STATE_SUCCEEDED"
    assert used_replicas(emulator) == 0


def test_persistent_jobs_ignore_regional_gpu_capacity() -> None:
    emulator = new_emulator(
        persistent_resources=[persistent_resource_config()],
        capacity={"us-central1": {"NVIDIA_TESLA_A100": 0}},
    )
    created = emulator.create_custom_job(PARENT, persistent_job())
    emulator.advance_clock(5)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"


def test_full_resource_queues_jobs_until_replicas_free() -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config(replicas=2)])
    first = emulator.create_custom_job(PARENT, persistent_job(replicas=2, display_name="first"))
    second = emulator.create_custom_job(PARENT, persistent_job(display_name="second"))
    emulator.advance_clock(5)
    assert state_of(emulator, second.name) == "JOB_STATE_QUEUED"
    emulator.advance_clock(605)  # first ends at 605 s; second starts then, runs 5 s later
    second_now = emulator.get_custom_job(second.name)
    assert state_of(emulator, first.name) == "JOB_STATE_SUCCEEDED"
    assert second_now.state == aiplatform_v1.JobState.JOB_STATE_RUNNING
    assert second_now.start_time == at(605 + 5)
    assert used_replicas(emulator) == 1


def test_full_resource_rejects_jobs_when_configured() -> None:
    emulator = new_emulator(
        persistent_resources=[persistent_resource_config(replicas=1)],
        persistent_resource_when_full="reject",
    )
    emulator.create_custom_job(PARENT, persistent_job())
    rejected = emulator.create_custom_job(PARENT, persistent_job(display_name="late"))
    failed = emulator.get_custom_job(rejected.name)
    assert failed.state == aiplatform_v1.JobState.JOB_STATE_FAILED
    assert failed.error.code == 8
    assert RESOURCE_NAME in failed.error.message


def test_autoscaling_maximum_bounds_the_pool() -> None:
    emulator = new_emulator(
        persistent_resources=[
            persistent_resource_config(
                replicas=1, autoscalingSpec={"minReplicaCount": 1, "maxReplicaCount": 3}
            )
        ]
    )
    created = emulator.create_custom_job(PARENT, persistent_job(replicas=3))
    emulator.advance_clock(5)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"
    assert used_replicas(emulator) == 3


def test_put_persistent_resource_starts_waiting_jobs() -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config(replicas=1)])
    emulator.create_custom_job(PARENT, persistent_job())
    waiting = emulator.create_custom_job(PARENT, persistent_job(display_name="waiting"))
    emulator.advance_clock(1)
    grown = aiplatform_v1.PersistentResource(emulator.get_persistent_resource(RESOURCE_NAME))
    grown.resource_pools[0].replica_count = 2
    emulator.put_persistent_resource(grown)
    assert state_of(emulator, waiting.name) == "JOB_STATE_PENDING"


@pytest.mark.parametrize("parent", [PARENT, "projects/123456789012/locations/us-central1"])
def test_list_persistent_resources_under_a_parent(parent: str) -> None:
    emulator = new_emulator(persistent_resources=[persistent_resource_config()])
    listed = emulator.list_persistent_resources(parent)
    assert [resource.name for resource in listed.persistent_resources] == [RESOURCE_NAME]
    assert emulator.list_persistent_resources("projects/acme-ml/locations/europe-west4") == (
        aiplatform_v1.ListPersistentResourcesResponse()
    )
