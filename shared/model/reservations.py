"""A Compute Engine reservation as dispatch reads it, and what its name says: plain data, no client.

``shared.adapters.compute`` builds a ``Reservation`` from Compute Engine's (REST JSON:
``specificReservation{count, inUseCount, instanceProperties{machineType, guestAccelerators}}``,
``status``); ``shared.validation.reservation`` checks a job against it. The fields keep Compute's
spelling (``nvidia-tesla-a100``); ``vertex_accelerator_type`` gives Vertex AI's
(``NVIDIA_TESLA_A100``), so the rules compare like with like.

What a reservation's name says (its pattern, zone and region) is ``shared.model.reservation_names``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

READY: Final = "READY"  # the one status in which a reservation's VMs can be consumed


@dataclass(frozen=True)
class ReservedGpu:
    """GPUs attached to each reserved VM, as Compute Engine names them."""

    accelerator_type: str  # e.g. nvidia-tesla-a100, nvidia-h100-80gb
    count: int


@dataclass(frozen=True)
class Reservation:
    """A specific reservation of ``count`` VMs of one machine shape in one zone."""

    name: str  # projects/P/zones/Z/reservations/N
    zone: str  # us-central1-a
    status: str  # READY, CREATING, UPDATING, DELETING, INVALID ("" when not said)
    machine_type: str  # a2-highgpu-1g
    gpus: tuple[ReservedGpu, ...]  # empty: none listed (an a2/a3/g2 machine's GPUs are built in)
    count: int | None  # VMs reserved; None when the answer did not say
    in_use_count: int | None  # VMs consumed now; None when the answer did not say

    @property
    def free_vms(self) -> int | None:
        """VMs left for a new job; None when the reservation's use cannot be read."""
        if self.count is None or self.in_use_count is None:
            return None
        return max(self.count - self.in_use_count, 0)


def vertex_accelerator_type(compute_name: str) -> str:
    """Compute Engine's GPU name as Vertex AI spells it: ``nvidia-tesla-a100`` ->
    ``NVIDIA_TESLA_A100``, ``nvidia-h100-80gb`` -> ``NVIDIA_H100_80GB``.

    The two APIs name every GPU alike but for case and separator (L4, T4, V100, P100, P4, K80,
    A100, A100 80GB, H100 80GB, H100 Mega 80GB, H200 141GB, B200). A full URL
    (``.../acceleratorTypes/nvidia-l4``) is read by its last segment.
    """
    return compute_name.rsplit("/", 1)[-1].strip().upper().replace("-", "_")


def short_name(value: str) -> str:
    """The last segment of a Compute Engine URL or name (``.../zones/us-central1-a`` ->
    ``us-central1-a``); a plain name is returned as it is."""
    return value.rstrip("/").rsplit("/", 1)[-1]
