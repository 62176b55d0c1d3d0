"""The live rules of a named reservation (shared.validation.reservation), as tables: the job as a
reservation placement renders it, the reservation as shared.adapters.compute returns it."""

from __future__ import annotations

import dataclasses

import pytest
from google.cloud.aiplatform_v1 import CustomJob, WorkerPoolSpec

from shared.config.model import Guards, ReservationPlacement
from shared.model.reservations import Reservation, ReservedGpu, vertex_accelerator_type
from shared.validation import Rule, ViolationKind, validate_job
from shared.validation.reservation import check_reservation

NAME = "projects/acme-ml/zones/us-central1-a/reservations/a100-block"
PLACEMENT = ReservationPlacement(name=NAME)
REGION = "us-central1"
POOL0 = "jobSpec.workerPoolSpecs[0]"
POOL1 = "jobSpec.workerPoolSpecs[1]"
AFFINITY = "jobSpec.workerPoolSpecs[*].machineSpec.reservationAffinity.values"


def reserved_job(
    machine: str = "a2-highgpu-1g",
    accelerator: str = "NVIDIA_TESLA_A100",
    count: int = 1,
    *,
    replicas: int = 1,
    workers: int = 0,
) -> CustomJob:
    """A job whose pools consume the reservation, as the reservation placement renders it."""
    machine_spec = {
        "machine_type": machine,
        "accelerator_type": accelerator,
        "accelerator_count": count,
        "reservation_affinity": {
            "reservation_affinity_type": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [NAME],
        },
    }
    pool = {
        "machine_spec": machine_spec,
        "replica_count": replicas,
        "container_spec": {"image_uri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4"},
    }
    pools = [pool, {**pool, "replica_count": workers}] if workers else [pool]
    return CustomJob(display_name="resnet", job_spec={"worker_pool_specs": pools})


def reservation(**changes: object) -> Reservation:
    """Four a2-highgpu-1g VMs with one A100 each, one in use: READY."""
    base = Reservation(
        name=NAME,
        zone="us-central1-a",
        status="READY",
        machine_type="a2-highgpu-1g",
        gpus=(ReservedGpu("nvidia-tesla-a100", 1),),
        count=4,
        in_use_count=1,
    )
    return dataclasses.replace(base, **changes)


def _with_empty_second_pool() -> CustomJob:
    job = reserved_job(replicas=1)
    job.job_spec.worker_pool_specs.append(WorkerPoolSpec())
    return job


# (case id, job, reservation as read, expected [(rule, field, kind)]): a missing, not READY or
# full reservation is unavailable (UNAV); one of another machine, or smaller than the job,
# can never take it (UNSUIT).
UNAV, UNSUIT = ViolationKind.UNAVAILABLE, ViolationKind.UNSUITABLE
RESERVATION_CASES = [
    ("fits", reserved_job(), reservation(), []),
    ("fits exactly the free VMs", reserved_job(workers=2), reservation(), []),
    ("an empty later pool takes no VM", _with_empty_second_pool(), reservation(in_use_count=3),
     []),
    ("built-in GPUs need not be listed", reserved_job(), reservation(gpus=()), []),
    ("CPU-only machine", reserved_job("n2-standard-8", "ACCELERATOR_TYPE_UNSPECIFIED", 0),
     reservation(machine_type="n2-standard-8", gpus=()), []),
    ("attached GPUs", reserved_job("n1-standard-8", "NVIDIA_TESLA_T4", 2),
     reservation(machine_type="n1-standard-8", gpus=(ReservedGpu("nvidia-tesla-t4", 2),)), []),
    ("use not readable: capacity not judged", reserved_job(replicas=9),
     reservation(in_use_count=None), []),
    ("missing", reserved_job(), None, [(Rule.RESERVATION_EXISTS, AFFINITY, UNAV)]),
    ("still creating", reserved_job(), reservation(status="CREATING"),
     [(Rule.RESERVATION_READY, AFFINITY, UNAV)]),
    ("other machine type", reserved_job("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2), reservation(),
     [(Rule.RESERVATION_MACHINE, f"{POOL0}.machineSpec", UNSUIT)]),
    ("other GPU", reserved_job("a3-highgpu-1g", "NVIDIA_H100_80GB", 1),
     reservation(machine_type="a3-highgpu-1g", gpus=(ReservedGpu("nvidia-h100-80gb", 2),)),
     [(Rule.RESERVATION_MACHINE, f"{POOL0}.machineSpec", UNSUIT)]),
    ("attached GPU count differs", reserved_job("n1-standard-8", "NVIDIA_TESLA_T4", 1),
     reservation(machine_type="n1-standard-8", gpus=(ReservedGpu("nvidia-tesla-t4", 2),)),
     [(Rule.RESERVATION_MACHINE, f"{POOL0}.machineSpec", UNSUIT)]),
    ("GPUs on a CPU reservation", reserved_job("n1-standard-8", "NVIDIA_TESLA_T4", 1),
     reservation(machine_type="n1-standard-8", gpus=()),
     [(Rule.RESERVATION_MACHINE, f"{POOL0}.machineSpec", UNSUIT)]),
    ("not enough free VMs", reserved_job(workers=3), reservation(),
     [(Rule.RESERVATION_CAPACITY, f"{POOL1}.replicaCount", UNAV)]),
    ("all in use", reserved_job(), reservation(in_use_count=4),
     [(Rule.RESERVATION_CAPACITY, f"{POOL0}.replicaCount", UNAV)]),
    ("larger than the reservation", reserved_job(workers=4), reservation(in_use_count=0),
     [(Rule.RESERVATION_CAPACITY, f"{POOL1}.replicaCount", UNSUIT)]),
    ("wrong machine and full: both said", reserved_job("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2),
     reservation(in_use_count=4),
     [(Rule.RESERVATION_MACHINE, f"{POOL0}.machineSpec", UNSUIT),
      (Rule.RESERVATION_CAPACITY, f"{POOL0}.replicaCount", UNAV)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("job", "found", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in RESERVATION_CASES],
)
def test_reservation_rules(
    job: CustomJob, found: Reservation | None, expected: list[tuple[Rule, str, ViolationKind]]
) -> None:
    violations = check_reservation(job, PLACEMENT, found)

    assert [(v.rule, v.field, v.kind) for v in violations] == expected, violations


# (case id, reservation, what the message must say)
MESSAGES = [
    ("missing", None, f"reservation {NAME} was not found"),
    ("machine", reservation(machine_type="a2-highgpu-2g", gpus=()),
     "holds a2-highgpu-2g with 2 x NVIDIA_TESLA_A100; give the placement that machine"),
    ("full", reservation(in_use_count=4), "has 0 free (4 of 4 in use)"),
    ("too small", reservation(count=0, in_use_count=0), "holds 0; lower the replicas or grow"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("found", "text"), [pytest.param(*case[1:], id=case[0]) for case in MESSAGES]
)
def test_each_message_says_what_the_reservation_lacks(found: Reservation | None, text: str) -> None:
    (violation,) = check_reservation(reserved_job(), PLACEMENT, found)
    assert text in violation.message


def test_validate_job_adds_the_reservation_rules_for_a_named_reservation() -> None:
    violations = validate_job(
        reserved_job(),
        PLACEMENT,
        Guards(),
        region=REGION,
        reservation=reservation(count=1),
        tuning=None,
        pipeline=None,
    )
    assert Rule.RESERVATION_CAPACITY in {v.rule for v in violations}


def test_validate_job_reads_nothing_for_any_reservation() -> None:
    violations = validate_job(
        reserved_job(),
        ReservationPlacement(),
        Guards(),
        region=REGION,
        reservation=None,
        tuning=None,
        pipeline=None,
    )
    assert not [v for v in violations if v.rule.startswith("reservation-")]


@pytest.mark.parametrize(
    ("compute_name", "vertex_name"),
    [
        ("nvidia-tesla-a100", "NVIDIA_TESLA_A100"),
        ("nvidia-a100-80gb", "NVIDIA_A100_80GB"),
        ("nvidia-h100-80gb", "NVIDIA_H100_80GB"),
        ("nvidia-h100-mega-80gb", "NVIDIA_H100_MEGA_80GB"),
        ("nvidia-h200-141gb", "NVIDIA_H200_141GB"),
        ("nvidia-b200", "NVIDIA_B200"),
        ("nvidia-l4", "NVIDIA_L4"),
        ("nvidia-tesla-t4", "NVIDIA_TESLA_T4"),
        (
            "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/"
            "acceleratorTypes/nvidia-tesla-v100",
            "NVIDIA_TESLA_V100",
        ),
    ],
)
def test_compute_gpu_names_read_as_vertex_ai_spells_them(
    compute_name: str, vertex_name: str
) -> None:
    assert vertex_accelerator_type(compute_name) == vertex_name


@pytest.mark.parametrize(
    ("count", "in_use", "free"), [(4, 1, 3), (4, 4, 0), (4, 5, 0), (None, 1, None), (4, None, None)]
)
def test_free_vms(count: int | None, in_use: int | None, free: int | None) -> None:
    assert reservation(count=count, in_use_count=in_use).free_vms == free
