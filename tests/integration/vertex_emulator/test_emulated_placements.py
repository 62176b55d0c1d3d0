"""Spot, reservations, create-time refusals and CMEK through the real clients (REST and gRPC).

And Compute Engine's `reservations.get`, which the emulator serves on its REST port for the
dispatcher's live reservation rules, read with the real `google-cloud-compute` client.
"""

from __future__ import annotations

from typing import Any

import pytest
from emulator_test_support import (
    A100_POOL,
    PARENT,
    PROJECT,
    PROVISIONING_SECONDS,
    REGION,
    RUN_SECONDS,
    a100_worker_pool,
    persistent_resource_job,
    raw_rest_call,
)
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1

from emulator_stack.observe import VertexAdmin

pytestmark = pytest.mark.integration

JobState = aiplatform_v1.JobState
A100 = "NVIDIA_TESLA_A100"
ZONE = f"{REGION}-a"
RESERVATION = f"projects/{PROJECT}/zones/{ZONE}/reservations/a100-res"
KEY = f"projects/{PROJECT}/locations/{REGION}/keyRings/ml/cryptoKeys/train"


def _reservation(count: int = 1) -> dict[str, Any]:
    return {
        "name": RESERVATION,
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": A100,
        "accelerator_count": 1,
        "count": count,
    }


def _spot_job() -> aiplatform_v1.CustomJob:
    return aiplatform_v1.CustomJob(
        display_name="spot-job",
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[a100_worker_pool()],
            scheduling=aiplatform_v1.Scheduling(strategy=aiplatform_v1.Scheduling.Strategy.SPOT),
        ),
    )


def _on_demand_job() -> aiplatform_v1.CustomJob:
    return aiplatform_v1.CustomJob(
        display_name="on-demand-job",
        job_spec=aiplatform_v1.CustomJobSpec(worker_pool_specs=[a100_worker_pool()]),
    )


def _reservation_job(name: str = RESERVATION) -> aiplatform_v1.CustomJob:
    pool = a100_worker_pool()
    pool.machine_spec.reservation_affinity = aiplatform_v1.ReservationAffinity(
        reservation_affinity_type=aiplatform_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION,
        key="compute.googleapis.com/reservation-name",
        values=[name],
    )
    return aiplatform_v1.CustomJob(
        display_name="reserved-job", job_spec=aiplatform_v1.CustomJobSpec(worker_pool_specs=[pool])
    )


def test_a_spot_job_is_preempted_as_a_stockout_and_gives_its_gpus_back(job_client, admin):
    admin.set_capacity(A100, 1)
    assert admin.call("PUT", "spot", {"preempt_after": "10m"}) == {"preempt_after": 600.0}
    assert admin.call("GET", "spot") == {"preempt_after": 600.0}
    admin.call("PUT", "timings", {"provisioning": 60})
    admin.call("POST", "outcomes", {"display_name": "^spot-", "duration": "1h"})
    job = job_client.create_custom_job(parent=PARENT, custom_job=_spot_job())

    admin.advance_clock(60 + 600)
    preempted = job_client.get_custom_job(name=job.name)
    assert (preempted.state, preempted.error.code) == (JobState.JOB_STATE_FAILED, 8)
    assert "preempted" in preempted.error.message
    assert f"Resources are insufficient in region: {REGION}" in preempted.error.message
    assert admin.call("GET", "state")["capacity"][REGION][A100]["held"] == 0


def test_a_reservation_takes_one_job_and_the_next_fails_for_capacity(job_client, admin):
    admin.call("PUT", "reservations", _reservation(count=1))
    first = job_client.create_custom_job(parent=PARENT, custom_job=_reservation_job())
    second = job_client.create_custom_job(parent=PARENT, custom_job=_reservation_job())

    admin.advance_clock(PROVISIONING_SECONDS)
    assert job_client.get_custom_job(name=first.name).state == JobState.JOB_STATE_RUNNING
    failed = job_client.get_custom_job(name=second.name)
    assert (failed.state, failed.error.code) == (JobState.JOB_STATE_FAILED, 8)
    assert failed.error.message.startswith(
        f"Reservation {RESERVATION} has insufficient capacity: resources are insufficient in "
        f"zone {ZONE}."
    )
    (reservation,) = admin.call("GET", "reservations")["reservations"]
    assert (reservation["in_use"], reservation["free"]) == (1, 0)

    admin.call("PUT", "reservations", {"name": RESERVATION, "count": 2})  # a resize
    third = job_client.create_custom_job(parent=PARENT, custom_job=_reservation_job())
    admin.advance_clock(PROVISIONING_SECONDS)
    assert job_client.get_custom_job(name=third.name).state == JobState.JOB_STATE_RUNNING
    admin.advance_clock(RUN_SECONDS)
    assert admin.call("GET", "reservations")["reservations"][0]["in_use"] == 0


def test_an_unknown_reservation_is_refused_at_create(job_client, admin):
    with pytest.raises(exceptions.BadRequest, match="does not exist"):
        job_client.create_custom_job(parent=PARENT, custom_job=_reservation_job())


def test_with_refuse_a_create_over_quota_is_answered_429(job_client, admin):
    admin.call("PUT", "createRefusals", {"quota_when_exceeded": "refuse"})
    admin.call(
        "PUT",
        "quota",
        {"kind": "preemptible", "region": REGION, "acceleratorType": A100, "count": 0},
    )
    with pytest.raises(exceptions.TooManyRequests) as raised:
        job_client.create_custom_job(parent=PARENT, custom_job=_spot_job(), retry=None)
    # Over REST the client puts the method and URL before the service's message.
    assert raised.value.message.endswith(
        "The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus"
    )
    (record,) = admin.requests("CreateCustomJob")
    assert record["status"] == "RESOURCE_EXHAUSTED"
    assert job_client.create_custom_job(  # the on-demand quota is another one
        parent=PARENT, custom_job=_on_demand_job()
    ).name


def test_a_gpu_the_region_does_not_offer_is_refused(job_client, admin):
    admin.call("PUT", "createRefusals", {"offered_accelerators": {REGION: ["NVIDIA_L4"]}})
    with pytest.raises(exceptions.BadRequest) as raised:
        job_client.create_custom_job(parent=PARENT, custom_job=_on_demand_job())
    # Over REST the client puts the method and URL before the service's message.
    assert raised.value.message.split(": ", 1)[-1] == (
        f"Accelerator type {A100} is not supported in location {REGION}."
    )


def test_a_job_with_another_cmek_key_than_its_persistent_resource_is_refused(job_client, admin):
    resource = admin.call("GET", "state")["persistent_resources"][0]
    resource["encryptionSpec"] = {"kmsKeyName": KEY}
    admin.call("PUT", "persistentResources", resource)
    job = persistent_resource_job(resource_id=A100_POOL)
    with pytest.raises(exceptions.BadRequest, match=r"encryption_spec\.kms_key_name"):
        job_client.create_custom_job(parent=PARENT, custom_job=job)

    job.encryption_spec.kms_key_name = KEY
    created = job_client.create_custom_job(parent=PARENT, custom_job=job)
    assert job_client.get_custom_job(name=created.name).encryption_spec.kms_key_name == KEY


# -- Compute Engine reservations.get ---------------------------------------------------------


@pytest.fixture
def reservations_client(emulator_server, admin):
    compute_v1 = pytest.importorskip("google.cloud.compute_v1")
    return compute_v1.ReservationsClient(
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": emulator_server.rest_url},
    )


def test_the_compute_client_reads_a_reservation_with_its_vms_in_use(
    reservations_client, admin, emulator_server
):
    admin.call("PUT", "reservations", _reservation(count=2))
    status, _ = raw_rest_call(
        emulator_server.rest_url,
        "POST",
        f"/v1/{PARENT}/customJobs",
        aiplatform_v1.CustomJob.to_dict(_reservation_job(), use_integers_for_enums=False),
    )
    assert status == 200
    admin.advance_clock(1)

    read = reservations_client.get(project=PROJECT, zone=ZONE, reservation="a100-res")
    assert (read.name, read.status, read.specific_reservation_required) == (
        "a100-res",
        "READY",
        False,
    )
    assert read.zone.endswith(f"/compute/v1/projects/{PROJECT}/zones/{ZONE}")
    assert read.self_link == f"{read.zone}/reservations/a100-res"
    specific = read.specific_reservation
    assert (specific.count, specific.in_use_count) == (2, 1)
    assert specific.instance_properties.machine_type == "a2-highgpu-1g"
    (gpu,) = specific.instance_properties.guest_accelerators
    assert (gpu.accelerator_type, gpu.accelerator_count) == ("nvidia-tesla-a100", 1)
    (record,) = admin.requests("GetReservation")
    assert (record["resource"], record["status"]) == (
        f"projects/{PROJECT}/zones/{ZONE}/reservations/a100-res",
        "OK",
    )


def test_the_compute_read_answers_computes_rest_json(admin, emulator_server):
    # The shape the dispatcher's Compute adapter reads, without any client library in between.
    admin.call("PUT", "reservations", _reservation(count=3))
    status, body = raw_rest_call(
        emulator_server.rest_url,
        "GET",
        f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/reservations/a100-res",
    )
    assert status == 200
    zone_url = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}"
    assert body | {"id": "ID", "creationTimestamp": "T"} == {
        "kind": "compute#reservation",
        "id": "ID",
        "creationTimestamp": "T",
        "name": "a100-res",
        "zone": zone_url,
        "selfLink": f"{zone_url}/reservations/a100-res",
        "specificReservation": {
            "instanceProperties": {
                "machineType": "a2-highgpu-1g",
                "guestAccelerators": [
                    {"acceleratorType": "nvidia-tesla-a100", "acceleratorCount": 1}
                ],
            },
            "count": "3",
            "inUseCount": "0",
            "assuredCount": "3",
        },
        "specificReservationRequired": False,
        "status": "READY",
        "shareSettings": {"shareType": "LOCAL"},
    }


def test_a_missing_reservation_is_compute_not_found(reservations_client, emulator_server):
    with pytest.raises(exceptions.NotFound, match="was not found"):
        reservations_client.get(project=PROJECT, zone=ZONE, reservation="nope")
    status, body = raw_rest_call(
        emulator_server.rest_url,
        "GET",
        f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/reservations/nope",
    )
    assert status == 404
    assert body["error"]["errors"][0]["reason"] == "notFound"


def test_faults_hit_the_compute_read_too(reservations_client, admin):
    admin.call("PUT", "reservations", _reservation())
    admin.add_fault(method="GetReservation", code="UNAVAILABLE", count=1)
    with pytest.raises(exceptions.ServiceUnavailable):
        reservations_client.get(project=PROJECT, zone=ZONE, reservation="a100-res", retry=None)
    assert reservations_client.get(project=PROJECT, zone=ZONE, reservation="a100-res").name
    records = admin.requests("GetReservation")
    assert [record["injectedFault"] for record in records] == [True, False]


def test_the_stacks_admin_helpers_steer_the_new_settings(admin, emulator_server):
    vertex = VertexAdmin(emulator_server.rest_host)
    vertex.set_spot_preemption("10m")
    vertex.set_create_refusals(quota_when_exceeded="refuse", offered_accelerators={REGION: [A100]})
    vertex.set_quota("preemptible", REGION, A100, 2)
    reservation = vertex.put_reservation(**_reservation(count=1))
    assert (reservation["name"], reservation["free"]) == (RESERVATION, 1)
    assert vertex.put_reservation(name=RESERVATION, count=3)["free"] == 3

    state = admin.call("GET", "state")
    assert state["spot"] == {"preempt_after": 600.0}
    assert state["refusals"] == {
        "quota_when_exceeded": "refuse",
        "offered_accelerators": {REGION: [A100]},
    }
    assert state["quota"]["preemptible"][REGION][A100]["limit"] == 2
    vertex.set_spot_preemption(None)
    assert admin.call("GET", "spot") == {"preempt_after": None}
