"""The rules of a named Compute Engine reservation, read live (docs/architecture.md, "The Vertex
AI rules"): ``check_reservation``.

A ``reservation`` placement with a ``name`` renders every used worker pool with
``reservationAffinity`` SPECIFIC_RESERVATION on that reservation, so each of the job's VMs (one
per replica) must come from it. The reservation must exist and be READY, its VMs must be exactly
the job's machine (machine type, GPU type and count), and it must have a free VM for every
replica when Compute Engine says how many are in use.

No broken rule here rejects the run: this placement cannot take the job, and the chain moves on.
A missing, not READY or full reservation is ``unavailable`` (it may take the job later). A
reservation of another machine, or one smaller than the job, is ``unsuitable``: a reservation is
bought capacity, not part of the template, and a template whose machine differs from the
reservation's is right for the chain's other placements (Spot, on-demand, a FLEX_START fallback),
so the run goes there instead of being rejected; but when no placement can take the job and
every reason is of this kind, submission rejects the run at once. Each message says what would
make the reservation take the job.
A reservation without a name (ANY_RESERVATION) is not read: Vertex AI picks one or falls back to
on-demand capacity itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from shared.aiplatform import CustomJob, MachineSpec
from shared.config.model import ReservationPlacement
from shared.model.reservations import READY, Reservation, vertex_accelerator_type
from shared.policy import machines
from shared.validation.subject import (
    NO_ACCELERATOR,
    _accelerator,
    _machine_text,
    _pool_field,
    _used_pools,
)
from shared.validation.violations import Rule, Violation, ViolationKind

AFFINITY_FIELD = "jobSpec.workerPoolSpecs[*].machineSpec.reservationAffinity.values"

GpuKey = tuple[tuple[str, int], ...]


def check_reservation(
    job: CustomJob, placement: ReservationPlacement, reservation: Reservation | None
) -> list[Violation]:
    """The live rules of the placement's named reservation; ``reservation`` is what was just
    read (None: not found)."""
    name = placement.name or ""
    if reservation is None:
        return [
            _unavailable(
                AFFINITY_FIELD,
                Rule.RESERVATION_EXISTS,
                f"reservation {name} was not found; create it (or share it with this project), "
                "fix the placement's reservation.name, or remove the placement from the chain",
            )
        ]
    if reservation.status and reservation.status != READY:
        return [
            _unavailable(
                AFFINITY_FIELD,
                Rule.RESERVATION_READY,
                f"reservation {name} is {reservation.status}, not {READY}; the next placement "
                "is tried (or wait until it is READY)",
            )
        ]
    return [*_machine_matches(job, reservation), *_capacity(job, reservation)]


def _unavailable(field: str, rule: Rule, message: str) -> Violation:
    return Violation(field, rule, message, ViolationKind.UNAVAILABLE)


def _unsuitable(field: str, rule: Rule, message: str) -> Violation:
    return Violation(field, rule, message, ViolationKind.UNSUITABLE)


def _job_gpus(spec: MachineSpec) -> GpuKey:
    accelerator = _accelerator(spec)
    if accelerator == NO_ACCELERATOR or spec.accelerator_count == 0:
        return ()
    return ((accelerator, spec.accelerator_count),)


def _reserved_gpus(reservation: Reservation) -> GpuKey:
    """The GPUs of each reserved VM in Vertex AI's spelling. A reservation of an A2, A3, A4 or
    G2 machine may list none: those machines are built with theirs (``policy.machines``)."""
    listed: Counter[str] = Counter()
    for gpu in reservation.gpus:
        listed[vertex_accelerator_type(gpu.accelerator_type)] += gpu.count
    if not listed:
        built_in = machines.fixed_gpus(reservation.machine_type)
        return ((built_in.accelerator_type, built_in.count),) if built_in else ()
    return tuple(sorted(listed.items()))


def _reserved_text(reservation: Reservation) -> str:
    gpus = _reserved_gpus(reservation)
    machine = reservation.machine_type or "no specific machine type"
    if not gpus:
        return f"{machine} without GPUs"
    return f"{machine} with " + " and ".join(f"{count} x {gpu}" for gpu, count in gpus)


def _machine_matches(job: CustomJob, reservation: Reservation) -> Iterator[Violation]:
    wanted = (reservation.machine_type, _reserved_gpus(reservation))
    for index, pool in _used_pools(job):
        spec = pool.machine_spec
        if (spec.machine_type, _job_gpus(spec)) == wanted:
            continue
        yield _unsuitable(
            _pool_field(index, "machineSpec"),
            Rule.RESERVATION_MACHINE,
            f"worker pool {index} runs on {_machine_text(spec)}, but reservation "
            f"{reservation.name} holds {_reserved_text(reservation)}; give the placement that "
            "machine (its machine: override) or reserve the job's machine; the next placement "
            "is tried",
        )


def _capacity(job: CustomJob, reservation: Reservation) -> Iterator[Violation]:
    free = reservation.free_vms
    if free is None:
        return  # Compute Engine did not say how many VMs are in use: Vertex AI will find out
    pools = _used_pools(job)
    replicas = sum(pool.replica_count for _, pool in pools)
    field = _pool_field(pools[-1][0], "replicaCount") if pools else "jobSpec.workerPoolSpecs"
    if reservation.count is not None and replicas > reservation.count:
        yield _unsuitable(
            field,
            Rule.RESERVATION_CAPACITY,
            f"the job needs {replicas} VM(s), one per replica, and reservation {reservation.name} "
            f"holds {reservation.count}; lower the replicas or grow the reservation; the next "
            "placement is tried",
        )
    elif replicas > free:
        yield _unavailable(
            field,
            Rule.RESERVATION_CAPACITY,
            f"the job needs {replicas} VM(s), one per replica, and reservation {reservation.name} "
            f"has {free} free ({reservation.in_use_count} of {reservation.count} in use); the "
            "next placement is tried",
        )
