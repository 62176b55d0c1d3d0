"""Spot, reservations, create-time refusals (quota 429, GPUs not offered) and CMEK in the core.

Spot jobs take GPUs like on-demand ones and are preempted `spot.preempt_after` into their run
(FAILED, code 8, "preempted" and the stockout wording). Reservations hold VMs of their own, one per
replica, counted like persistent-resource pools. With `quota_when_exceeded: refuse` a create over
the remaining quota is RESOURCE_EXHAUSTED; `offered_accelerators` refuses GPU types a region does
not offer; a job on a persistent resource must use the resource's CMEK key.
"""

from __future__ import annotations

import re
from typing import Any

import grpc
import pytest
from core_builders import (
    PARENT,
    RESOURCE_ID,
    job,
    new_emulator,
    persistent_resource_config,
    pool,
    state_of,
)
from google.cloud import aiplatform_v1

from shared.config.model import FailureClass
from shared.policy.classify import classify
from vertex_ai_emulator import failures
from vertex_ai_emulator.errors import ConfigError, EmulatorError
from vertex_ai_emulator.quota import QuotaKind, quota_metric
from vertex_ai_emulator.reservations import parse_reservation_name

REGION = "us-central1"
A100 = "NVIDIA_TESLA_A100"
PROVISIONING = 120
RUN = 600  # the default outcome: succeeded after 10 minutes
RESERVATION = "projects/acme-ml/zones/us-central1-a/reservations/a100-res"
RESERVATION_BY_NUMBER = "projects/123456789012/zones/us-central1-a/reservations/a100-res"
EUROPE_RESERVATION = "projects/acme-ml/zones/europe-west4-a/reservations/a100-res"
STOCKOUT_TEXT = f"Resources are insufficient in region: {REGION}"


def _reservation(count: int = 2, **changes: Any) -> dict[str, Any]:
    return {
        "name": RESERVATION,
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": A100,
        "accelerator_count": 1,
        "count": count,
        **changes,
    }


def _affinity(kind: str = "SPECIFIC_RESERVATION", name: str = RESERVATION) -> dict[str, Any]:
    if kind != "SPECIFIC_RESERVATION":
        return {"reservationAffinityType": kind}
    return {
        "reservationAffinityType": kind,
        "key": "compute.googleapis.com/reservation-name",
        "values": [name],
    }


def _reserved_job(
    replicas: int = 1, affinity: dict[str, Any] | None = None, machine: str = "a2-highgpu-1g"
) -> aiplatform_v1.CustomJob:
    pools = [pool(machine)]
    if replicas > 1:
        pools.append(pool(machine, replicas=replicas - 1))
    for spec in pools:
        spec["machineSpec"]["reservationAffinity"] = affinity or _affinity()
    return job(display_name="reserved", pools=pools)


def _spot(gpus: int = 1) -> aiplatform_v1.CustomJob:
    return job(
        display_name="spot",
        pools=[pool("a2-highgpu-1g", A100, gpus)],
        scheduling={"strategy": "SPOT"},
    )


def _refused(emulator: Any, custom_job: aiplatform_v1.CustomJob) -> EmulatorError:
    with pytest.raises(EmulatorError) as raised:
        emulator.create_custom_job(PARENT, custom_job)
    return raised.value


# -- Spot ---------------------------------------------------------------------------------


def test_a_spot_job_is_preempted_after_the_configured_run_time_and_gives_its_gpus_back() -> None:
    emulator = new_emulator(spot={"preempt_after": "5m"}, capacity={REGION: {A100: 1}})
    created = emulator.create_custom_job(PARENT, _spot())
    emulator.advance_clock(PROVISIONING + 300 - 1)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"
    assert emulator.state_snapshot()["capacity"][REGION][A100]["held"] == 1

    emulator.advance_clock(1)
    preempted = emulator.get_custom_job(created.name)
    assert (preempted.state.name, preempted.error.code) == ("JOB_STATE_FAILED", 8)
    assert "preempted" in preempted.error.message
    assert STOCKOUT_TEXT in preempted.error.message
    assert emulator.state_snapshot()["capacity"][REGION][A100]["held"] == 0


@pytest.mark.parametrize(
    ("spot", "expected"),
    [
        pytest.param({}, "JOB_STATE_SUCCEEDED", id="never-by-default"),
        pytest.param({"preempt_after": None}, "JOB_STATE_SUCCEEDED", id="null-is-never"),
        pytest.param({"preempt_after": RUN}, "JOB_STATE_SUCCEEDED", id="run-ends-first-on-a-tie"),
        pytest.param({"preempt_after": RUN - 1}, "JOB_STATE_FAILED", id="one-second-before"),
    ],
)
def test_when_a_spot_job_is_preempted(spot: dict[str, Any], expected: str) -> None:
    emulator = new_emulator(spot=spot)
    created = emulator.create_custom_job(PARENT, _spot())
    emulator.advance_clock(PROVISIONING + RUN)
    assert state_of(emulator, created.name) == expected


def test_only_spot_jobs_are_preempted() -> None:
    emulator = new_emulator(spot={"preempt_after": "1m"})
    on_demand = emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(PROVISIONING + RUN)
    assert state_of(emulator, on_demand.name) == "JOB_STATE_SUCCEEDED"


def test_a_spot_job_without_gpus_free_stocks_out_like_an_on_demand_one() -> None:
    emulator = new_emulator(capacity={REGION: {A100: 0}})
    created = emulator.create_custom_job(PARENT, _spot())
    emulator.advance_clock(PROVISIONING)
    failed = emulator.get_custom_job(created.name)
    assert (failed.state.name, failed.error.code) == ("JOB_STATE_FAILED", 8)
    assert STOCKOUT_TEXT in failed.error.message


def test_preempt_after_set_at_run_time_applies_to_jobs_that_start_running_later() -> None:
    emulator = new_emulator()
    running = emulator.create_custom_job(PARENT, _spot())
    emulator.advance_clock(PROVISIONING)  # RUNNING before the change: never preempted
    assert emulator.set_spot({"preempt_after": "1m"}) == {"preempt_after": 60.0}
    later = emulator.create_custom_job(PARENT, _spot())
    emulator.advance_clock(PROVISIONING + 60)
    assert state_of(emulator, later.name) == "JOB_STATE_FAILED"
    assert state_of(emulator, running.name) == "JOB_STATE_RUNNING"
    emulator.reset()
    assert emulator.spot() == {"preempt_after": None}


# -- reservations --------------------------------------------------------------------------


def test_a_job_on_a_reservation_holds_one_vm_per_replica_until_it_ends() -> None:
    emulator = new_emulator(reservations=[_reservation(count=3)], capacity={REGION: {A100: 0}})
    created = emulator.create_custom_job(PARENT, _reserved_job(replicas=2))
    emulator.advance_clock(PROVISIONING)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"  # no regional GPUs needed
    (held,) = emulator.state_snapshot()["reservations"]
    assert (held["in_use"], held["free"]) == (2, 1)
    emulator.advance_clock(RUN)
    assert state_of(emulator, created.name) == "JOB_STATE_SUCCEEDED"
    assert emulator.state_snapshot()["reservations"][0]["in_use"] == 0


def test_a_job_the_reservation_has_no_room_for_fails_with_code_8_after_provisioning() -> None:
    emulator = new_emulator(reservations=[_reservation(count=2)])
    first = emulator.create_custom_job(PARENT, _reserved_job(replicas=2))
    second = emulator.create_custom_job(PARENT, _reserved_job(replicas=1))
    emulator.advance_clock(1)
    assert state_of(emulator, second.name) == "JOB_STATE_PENDING"
    emulator.advance_clock(PROVISIONING - 1)
    failed = emulator.get_custom_job(second.name)
    assert (failed.state.name, failed.error.code) == ("JOB_STATE_FAILED", 8)
    assert failed.error.message.startswith(
        f"Reservation {RESERVATION} has insufficient capacity: resources are insufficient in "
        f"zone us-central1-a."
    )
    assert state_of(emulator, first.name) == "JOB_STATE_RUNNING"


def test_a_reservation_named_by_project_number_is_the_same_reservation() -> None:
    emulator = new_emulator(reservations=[_reservation(count=1)])
    created = emulator.create_custom_job(
        PARENT, _reserved_job(affinity=_affinity(name=RESERVATION_BY_NUMBER))
    )
    emulator.advance_clock(PROVISIONING)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"
    assert emulator.state_snapshot()["reservations"][0]["in_use"] == 1


def test_a_resize_at_run_time_makes_room_for_the_next_job() -> None:
    emulator = new_emulator(reservations=[_reservation(count=1)])
    emulator.create_custom_job(PARENT, _reserved_job())
    resized = emulator.put_reservation({"name": RESERVATION, "count": 2})
    assert (resized["count"], resized["in_use"], resized["free"]) == (2, 1, 1)
    second = emulator.create_custom_job(PARENT, _reserved_job())
    emulator.advance_clock(PROVISIONING)
    assert state_of(emulator, second.name) == "JOB_STATE_RUNNING"


@pytest.mark.parametrize(
    ("reservations", "expected_state", "expected_reservation"),
    [
        pytest.param([_reservation(count=1)], "JOB_STATE_RUNNING", RESERVATION, id="room"),
        pytest.param([_reservation(count=0)], "JOB_STATE_FAILED", None, id="full-falls-back"),
        pytest.param(
            [_reservation(count=1, machine_type="a2-highgpu-2g", accelerator_count=2)],
            "JOB_STATE_FAILED",
            None,
            id="other-shape-falls-back",
        ),
        pytest.param(
            [_reservation(count=1, specific_reservation_required=True)],
            "JOB_STATE_FAILED",
            None,
            id="specific-only-falls-back",
        ),
    ],
)
def test_any_reservation_uses_a_matching_reservation_else_ordinary_capacity(
    reservations: list[dict[str, Any]], expected_state: str, expected_reservation: str | None
) -> None:
    # No regional A100s: the fallback to ordinary capacity stocks out.
    emulator = new_emulator(reservations=reservations, capacity={REGION: {A100: 0}})
    created = emulator.create_custom_job(
        PARENT, _reserved_job(affinity=_affinity("ANY_RESERVATION"))
    )
    emulator.advance_clock(PROVISIONING)
    assert state_of(emulator, created.name) == expected_state
    (described,) = emulator.state_snapshot()["jobs"]
    assert described["reservation"] == expected_reservation


@pytest.mark.parametrize(
    ("custom_job", "says"),
    [
        pytest.param(
            _reserved_job(affinity=_affinity(name=RESERVATION.replace("a100-res", "nope"))),
            "Reservation projects/acme-ml/zones/us-central1-a/reservations/nope does not exist",
            id="unknown",
        ),
        pytest.param(
            _reserved_job(machine="a2-highgpu-2g"),
            "The machine (machine_type=a2-highgpu-2g, accelerator_type=NVIDIA_TESLA_A100, "
            "accelerator_count=1) does not match reservation "
            f"{RESERVATION} (machine_type=a2-highgpu-1g",
            id="machine-mismatch",
        ),
        pytest.param(
            _reserved_job(affinity=_affinity(name="a100-res")),
            "give exactly one reservation name, projects/PROJECT/zones/ZONE/reservations/NAME",
            id="short-name",
        ),
        pytest.param(
            _reserved_job(affinity=_affinity(name=EUROPE_RESERVATION)),
            "is in zone europe-west4-a, which is not in the job's location us-central1",
            id="other-region",
        ),
        pytest.param(
            job(
                pools=[pool(**{})],
                scheduling={"strategy": "SPOT"},
            ),
            None,
            id="spot-without-affinity-is-fine",
        ),
    ],
)
def test_a_create_naming_a_reservation_it_cannot_use_is_invalid(
    custom_job: aiplatform_v1.CustomJob, says: str | None
) -> None:
    emulator = new_emulator(reservations=[_reservation(), _reservation(name=EUROPE_RESERVATION)])
    if says is None:
        emulator.create_custom_job(PARENT, custom_job)
        return
    error = _refused(emulator, custom_job)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert says in error.message
    assert emulator.state_snapshot()["jobs"] == []


def test_a_reservation_affinity_with_spot_is_invalid() -> None:
    emulator = new_emulator(reservations=[_reservation()])
    spot = _reserved_job()
    spot.job_spec.scheduling.strategy = aiplatform_v1.Scheduling.Strategy.SPOT
    error = _refused(emulator, spot)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "cannot be combined with scheduling.strategy SPOT" in error.message


# -- create-time refusals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "custom_job", "metric"),
    [
        pytest.param(
            "on_demand",
            job(pools=[pool("a2-highgpu-1g", A100, 1)]),
            "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus",
            id="on-demand",
        ),
        pytest.param(
            "preemptible",
            _spot(),
            "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus",
            id="spot",
        ),
    ],
)
def test_with_refuse_a_create_over_the_remaining_quota_is_resource_exhausted(
    kind: str, custom_job: aiplatform_v1.CustomJob, metric: str
) -> None:
    emulator = new_emulator(quota_when_exceeded="refuse", quota={kind: {REGION: {A100: 1}}})
    emulator.create_custom_job(PARENT, custom_job)  # takes the one GPU of quota
    emulator.advance_clock(1)
    error = _refused(emulator, custom_job)
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.message == f"The following quota metrics exceed quota limits: {metric}"
    assert len(emulator.state_snapshot()["jobs"]) == 1
    other_region = emulator.create_custom_job(
        "projects/acme-ml/locations/us-east4", custom_job
    )  # quota is per region
    assert other_region.name


def test_with_refuse_an_any_reservation_job_a_reservation_has_room_for_needs_no_quota() -> None:
    emulator = new_emulator(
        quota_when_exceeded="refuse",
        quota={"on_demand": {REGION: {A100: 0}}},
        reservations=[_reservation(count=1)],
    )
    any_reservation = _reserved_job(affinity=_affinity("ANY_RESERVATION"))
    created = emulator.create_custom_job(PARENT, any_reservation)
    emulator.advance_clock(PROVISIONING)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"
    error = _refused(emulator, any_reservation)  # the reservation is full now: quota decides
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_with_queue_a_job_over_quota_is_created_and_waits() -> None:
    emulator = new_emulator(quota={"on_demand": {REGION: {A100: 0}}})
    created = emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(1)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"


def test_refusal_settings_change_at_run_time_and_reset() -> None:
    emulator = new_emulator(quota={"on_demand": {REGION: {A100: 0}}})
    assert emulator.set_refusals(
        {"quota_when_exceeded": "refuse", "offered_accelerators": {"us-east4": ["NVIDIA_L4"]}}
    ) == {"quota_when_exceeded": "refuse", "offered_accelerators": {"us-east4": ["NVIDIA_L4"]}}
    assert _refused(emulator, job()).code == grpc.StatusCode.RESOURCE_EXHAUSTED
    emulator.set_refusals({"offered_accelerators": {"us-east4": None}})
    assert emulator.refusals()["offered_accelerators"] == {}
    emulator.reset()
    assert emulator.refusals() == {"quota_when_exceeded": "queue", "offered_accelerators": {}}


def test_a_gpu_the_region_does_not_offer_is_refused_with_the_services_words() -> None:
    emulator = new_emulator(offered_accelerators={REGION: ["NVIDIA_L4", "NVIDIA_H100_80GB"]})
    error = _refused(emulator, job())
    assert (error.code, error.message) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Accelerator type NVIDIA_TESLA_A100 is not supported in location us-central1.",
    )
    emulator.create_custom_job(PARENT, job(pools=[pool("g2-standard-8", "NVIDIA_L4", 1)]))
    emulator.create_custom_job("projects/acme-ml/locations/us-east4", job())  # not listed: all


@pytest.mark.parametrize(
    ("accelerator", "kind", "metric"),
    [
        (A100, QuotaKind.ON_DEMAND, "custom_model_training_nvidia_a100_gpus"),
        ("NVIDIA_A100_80GB", QuotaKind.ON_DEMAND, "custom_model_training_nvidia_a100_80gb_gpus"),
        (
            "NVIDIA_H100_80GB",
            QuotaKind.PREEMPTIBLE,
            "custom_model_training_preemptible_nvidia_h100_gpus",
        ),
        ("NVIDIA_TESLA_T4", QuotaKind.ON_DEMAND, "custom_model_training_nvidia_t4_gpus"),
        ("NVIDIA_L4", QuotaKind.PREEMPTIBLE, "custom_model_training_preemptible_nvidia_l4_gpus"),
    ],
)
def test_quota_metric_names(accelerator: str, kind: QuotaKind, metric: str) -> None:
    assert quota_metric(kind, accelerator) == f"aiplatform.googleapis.com/{metric}"


# -- CMEK ----------------------------------------------------------------------------------

KEY_A = "projects/acme-ml/locations/us-central1/keyRings/ml/cryptoKeys/a"
KEY_B = "projects/acme-ml/locations/us-central1/keyRings/ml/cryptoKeys/b"


def _on_resource(key: str | None) -> aiplatform_v1.CustomJob:
    spec: dict[str, Any] = {"persistentResourceId": RESOURCE_ID}
    created = job(**spec)
    if key is not None:
        created.encryption_spec.kms_key_name = key
    return created


@pytest.mark.parametrize(
    ("resource_key", "job_key", "refused"),
    [
        pytest.param(KEY_A, KEY_A, False, id="same-key"),
        pytest.param(None, None, False, id="neither"),
        pytest.param(KEY_A, KEY_B, True, id="other-key"),
        pytest.param(KEY_A, None, True, id="job-without-key"),
        pytest.param(None, KEY_B, True, id="resource-without-key"),
    ],
)
def test_a_job_on_a_persistent_resource_must_use_its_cmek_key(
    resource_key: str | None, job_key: str | None, refused: bool
) -> None:
    resource = persistent_resource_config()
    if resource_key is not None:
        resource["encryptionSpec"] = {"kmsKeyName": resource_key}
    emulator = new_emulator(persistent_resources=[resource])
    if not refused:
        created = emulator.create_custom_job(PARENT, _on_resource(job_key))
        assert emulator.get_custom_job(created.name).encryption_spec.kms_key_name == (job_key or "")
        return
    error = _refused(emulator, _on_resource(job_key))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"({job_key or 'not set'})" in error.message
    assert f"({resource_key or 'not set'})" in error.message


def test_a_job_keeps_and_echoes_its_encryption_spec() -> None:
    emulator = new_emulator()
    created = job()
    created.encryption_spec.kms_key_name = KEY_A
    answered = emulator.create_custom_job(PARENT, created)
    assert answered.encryption_spec.kms_key_name == KEY_A
    assert emulator.get_custom_job(answered.name).encryption_spec.kms_key_name == KEY_A


# -- config and what our classifier makes of the new errors -------------------------------


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"spot": {"preempt_after": "soon"}}, "spot.preempt_after"),
        ({"spot": {"preempt": "1m"}}, "spot: unknown key(s) preempt"),
        (
            {"quota_when_exceeded": "wait"},
            "quota_when_exceeded: 'wait' is not one of queue, refuse",
        ),
        ({"offered_accelerators": {REGION: ["A100"]}}, "offered_accelerators.us-central1[0]"),
        ({"offered_accelerators": {REGION: "NVIDIA_L4"}}, "offered_accelerators.us-central1"),
        (
            {"reservations": [{"name": "a100-res", "machine_type": "m", "count": 1}]},
            "reservations[0].name",
        ),
        (
            {"reservations": [{"name": RESERVATION, "count": 1}]},
            "reservations[0]: missing key(s) machine_type",
        ),
        ({"reservations": [_reservation(count=-1)]}, "reservations[0].count"),
        (
            {"reservations": [_reservation(accelerator_type="A100")]},
            "reservations[0].accelerator_type",
        ),
        (
            {"reservations": [_reservation(accelerator_count=0)]},
            "reservations[0]: accelerator_type and accelerator_count go together",
        ),
        ({"reservations": [_reservation(vms=2)]}, "reservations[0]: unknown key(s) vms"),
        ({"reservations": [_reservation(), _reservation()]}, "reservations[1].name"),
    ],
)
def test_invalid_new_config_names_the_key(raw: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(names)):
        new_emulator(**raw)


def test_a_compute_gpu_name_is_accepted_in_a_reservation() -> None:
    emulator = new_emulator(reservations=[_reservation(accelerator_type="nvidia-tesla-a100")])
    assert emulator.state_snapshot()["reservations"][0]["accelerator_type"] == A100


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(failures.spot_preempted(REGION), id="spot-preempted"),
        pytest.param(
            failures.reservation_full(RESERVATION, "us-central1-a", 2, 0, 2), id="reservation"
        ),
    ],
)
def test_our_classifier_reads_the_new_failures_as_capacity(error: Any) -> None:
    failed = aiplatform_v1.CustomJob(state=aiplatform_v1.JobState.JOB_STATE_FAILED, error=error)
    assert classify(failed).failure == FailureClass.CAPACITY


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        (RESERVATION, ("acme-ml", "us-central1-a", "a100-res")),
        (RESERVATION_BY_NUMBER, ("123456789012", "us-central1-a", "a100-res")),
        ("projects/acme-ml/zones/us-central1/reservations/a100-res", None),  # a region
        ("projects/acme-ml/zones/us-central1-a/reservations/A100", None),  # not a Compute name
        ("projects/acme-ml/zones/us-central1-a/reservations/", None),
        ("a100-res", None),
    ],
)
def test_reservation_names(name: str, parsed: tuple[str, str, str] | None) -> None:
    assert parse_reservation_name(name) == parsed


def test_a_reservation_without_gpus_takes_jobs_without_gpus() -> None:
    emulator = new_emulator(
        reservations=[{"name": RESERVATION, "machine_type": "n2-standard-8", "count": 1}]
    )
    cpu_pool = pool("n2-standard-8", accelerator=None)
    cpu_pool["machineSpec"]["reservationAffinity"] = _affinity()
    created = emulator.create_custom_job(PARENT, job(pools=[cpu_pool]))
    emulator.advance_clock(PROVISIONING)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"
    assert emulator.get_reservation("acme-ml", "us-central1-a", "a100-res")[
        "specificReservation"
    ] == {
        "instanceProperties": {"machineType": "n2-standard-8"},
        "count": "1",
        "inUseCount": "1",
        "assuredCount": "1",
    }


def test_a_missing_reservation_is_not_found_in_computes_words() -> None:
    emulator = new_emulator()
    with pytest.raises(EmulatorError) as raised:
        emulator.get_reservation("acme-ml", "us-central1-a", "nope")
    assert (raised.value.code, raised.value.message) == (
        grpc.StatusCode.NOT_FOUND,
        "The resource 'projects/acme-ml/zones/us-central1-a/reservations/nope' was not found",
    )
