"""What Vertex AI machine types carry: their GPUs, their boot disks, the quota they draw on.

Pure tables (docs/architecture.md, "The Vertex AI rules") and lookups over them, keyed by the names
the REST API uses (``a2-highgpu-1g``, ``NVIDIA_TESLA_A100``), so no proto import is needed here. The
rules that use them live in ``shared.validation``; the job-state function names quota metrics in its
alerts. The GPUs FLEX_START and Spot serve are ``shared.model.accelerators``' (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeGuard

from shared.config.model import FlexStartPlacement, Placement, SpotPlacement

# The GPUs each strategy serves live in the model, where the config loader reads them too;
# re-exported here beside the machine tables for the rules in shared.validation.
from shared.model.accelerators import FLEX_START_GPUS as FLEX_START_GPUS
from shared.model.accelerators import SPOT_GPUS as SPOT_GPUS
from shared.model.accelerators import is_gpu as is_gpu


@dataclass(frozen=True)
class GpuShape:
    """The accelerators one machine comes with: ``count`` GPUs of ``accelerator_type``."""

    accelerator_type: str
    count: int


def _family(prefix: str, accelerator_type: str, counts: Mapping[str, int]) -> dict[str, GpuShape]:
    return {f"{prefix}{size}": GpuShape(accelerator_type, count) for size, count in counts.items()}


# Machine types whose name fixes the GPU: the job must ask for exactly this type and count.
FIXED_GPU_MACHINES: Final[Mapping[str, GpuShape]] = {
    **_family("a2-highgpu-", "NVIDIA_TESLA_A100", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    "a2-megagpu-16g": GpuShape("NVIDIA_TESLA_A100", 16),
    **_family("a2-ultragpu-", "NVIDIA_A100_80GB", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    **_family("a3-highgpu-", "NVIDIA_H100_80GB", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    "a3-megagpu-8g": GpuShape("NVIDIA_H100_MEGA_80GB", 8),
    "a3-ultragpu-8g": GpuShape("NVIDIA_H200_141GB", 8),
    "a4-highgpu-8g": GpuShape("NVIDIA_B200", 8),
    **_family(
        "g2-standard-",
        "NVIDIA_L4",
        {"4": 1, "8": 1, "12": 1, "16": 1, "32": 1, "24": 2, "48": 4, "96": 8},
    ),
}

# Families where every member is in FIXED_GPU_MACHINES: an unlisted member is a typo.
FIXED_GPU_FAMILIES: Final[frozenset[str]] = frozenset({"a2", "a3", "a4", "g2"})

# N1 is the one family GPUs are attached to rather than built in (the persistent-resource seed
# page uses n1-standard-4 with one NVIDIA_TESLA_K80).
ATTACHABLE_GPU_FAMILIES: Final[frozenset[str]] = frozenset({"n1"})
ATTACHABLE_GPUS: Final[frozenset[str]] = frozenset(
    {
        "NVIDIA_TESLA_K80",
        "NVIDIA_TESLA_P4",
        "NVIDIA_TESLA_P100",
        "NVIDIA_TESLA_T4",
        "NVIDIA_TESLA_V100",
    }
)
ATTACHABLE_GPU_COUNTS: Final[frozenset[int]] = frozenset({1, 2, 4, 8})

# CPU-only families Vertex AI trains on; any other family is left for the service to judge.
CPU_ONLY_FAMILIES: Final[frozenset[str]] = frozenset({"e2", "n2", "n2d", "c2", "c2d", "c3", "m1"})

# A3 Ultra and A4 boot from Hyperdisk Balanced only; Vertex's default boot disk (pd-ssd) fails.
HYPERDISK_ONLY_MACHINES: Final[frozenset[str]] = frozenset({"a3-ultragpu-8g", "a4-highgpu-8g"})
HYPERDISK_BOOT_DISK_TYPE: Final = "hyperdisk-balanced"

_QUOTA_SERVICE = "aiplatform.googleapis.com"

# FLEX_START jobs draw on the *preemptible* GPU quota (docs/architecture.md, "The Vertex AI
# rules"), and so do Spot jobs (their VMs are preemptible). The L4, A100, A100 80GB, H100 and H100
# Mega names are in public use; H200, B200 and the N1 GPUs (T4, V100, P100, P4) follow the same
# pattern, unconfirmed.
PREEMPTIBLE_QUOTA_METRICS: Final[Mapping[str, str]] = {
    gpu: f"{_QUOTA_SERVICE}/custom_model_training_preemptible_nvidia_{suffix}_gpus"
    for gpu, suffix in {
        "NVIDIA_L4": "l4",
        "NVIDIA_TESLA_A100": "a100",
        "NVIDIA_A100_80GB": "a100_80gb",
        "NVIDIA_H100_80GB": "h100",
        "NVIDIA_H100_MEGA_80GB": "h100_mega",
        "NVIDIA_H200_141GB": "h200",
        "NVIDIA_B200": "b200",
        "NVIDIA_TESLA_T4": "t4",
        "NVIDIA_TESLA_V100": "v100",
        "NVIDIA_TESLA_P100": "p100",
        "NVIDIA_TESLA_P4": "p4",
    }.items()
}


def machine_family(machine_type: str) -> str:
    """The family of a machine type: ``a2`` for ``a2-highgpu-1g``."""
    return machine_type.split("-", 1)[0]


def fixed_gpus(machine_type: str) -> GpuShape | None:
    """The GPUs a machine type is built with, or None when its GPUs are not fixed by name."""
    return FIXED_GPU_MACHINES.get(machine_type)


def preemptible_quota_metric(accelerator_type: str) -> str | None:
    """The quota metric FLEX_START and Spot jobs on this GPU draw on; None for a GPU neither
    serves."""
    return PREEMPTIBLE_QUOTA_METRICS.get(accelerator_type)


def draws_preemptible_quota(
    placement: Placement | None,
) -> TypeGuard[FlexStartPlacement | SpotPlacement]:
    """Whether a job on ``placement`` counts against the region's preemptible GPU quota:
    FLEX_START (docs/architecture.md, "The Vertex AI rules") and Spot do; on demand, a
    reservation and a persistent resource do not."""
    return isinstance(placement, FlexStartPlacement | SpotPlacement)


def machines_with(accelerator_type: str) -> tuple[str, ...]:
    """Machine types built with this GPU, for messages that suggest a fix."""
    return tuple(
        name
        for name, shape in FIXED_GPU_MACHINES.items()
        if shape.accelerator_type == accelerator_type
    )
