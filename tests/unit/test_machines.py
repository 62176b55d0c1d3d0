"""The machine table: GPUs per machine type, the FLEX_START set, hyperdisk and quota metrics."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shared.policy import machines
from shared.policy.machines import GpuShape


@pytest.mark.parametrize(
    ("machine_type", "accelerator_type", "count"),
    [
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),  # the FLEX_START seed page's machine
        ("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8),
        ("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16),
        ("a2-ultragpu-2g", "NVIDIA_A100_80GB", 2),
        ("a3-highgpu-4g", "NVIDIA_H100_80GB", 4),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
        ("a4-highgpu-8g", "NVIDIA_B200", 8),
        ("g2-standard-4", "NVIDIA_L4", 1),
        ("g2-standard-32", "NVIDIA_L4", 1),
        ("g2-standard-24", "NVIDIA_L4", 2),
        ("g2-standard-48", "NVIDIA_L4", 4),
        ("g2-standard-96", "NVIDIA_L4", 8),
    ],
)
def test_fixed_gpus(machine_type: str, accelerator_type: str, count: int) -> None:
    assert machines.fixed_gpus(machine_type) == GpuShape(accelerator_type, count)


@pytest.mark.parametrize("machine_type", ["n1-standard-4", "a2-highgpu-3g", "e2-standard-4", ""])
def test_machines_without_fixed_gpus(machine_type: str) -> None:
    assert machines.fixed_gpus(machine_type) is None


def test_table_has_every_size_of_every_family() -> None:
    assert len(machines.FIXED_GPU_MACHINES) == 4 + 1 + 4 + 4 + 1 + 1 + 1 + 8
    families = {machines.machine_family(name) for name in machines.FIXED_GPU_MACHINES}
    assert families == machines.FIXED_GPU_FAMILIES


def test_every_gpu_name_is_a_vertex_accelerator_type() -> None:
    from google.cloud.aiplatform_v1 import AcceleratorType

    names = (
        {shape.accelerator_type for shape in machines.FIXED_GPU_MACHINES.values()}
        | machines.FLEX_START_GPUS
        | machines.SPOT_GPUS
        | machines.ATTACHABLE_GPUS
        | set(machines.PREEMPTIBLE_QUOTA_METRICS)
    )
    assert names <= set(AcceleratorType.__members__)


def test_every_flex_start_and_spot_gpu_has_a_preemptible_quota_metric() -> None:
    assert set(machines.PREEMPTIBLE_QUOTA_METRICS) == machines.FLEX_START_GPUS | machines.SPOT_GPUS


def test_spot_gpus_are_the_known_training_gpus_but_k80() -> None:
    # Every GPU a machine type of these tables carries, built in or attached, but the K80 (end
    # of support); GB200 and RTX PRO 6000 have no machine type here (see machines.SPOT_GPUS).
    known = {shape.accelerator_type for shape in machines.FIXED_GPU_MACHINES.values()}
    known |= machines.ATTACHABLE_GPUS
    assert known - {"NVIDIA_TESLA_K80"} == machines.SPOT_GPUS
    assert machines.FLEX_START_GPUS < machines.SPOT_GPUS


QUOTA = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_"


@pytest.mark.parametrize(
    ("accelerator_type", "metric"),
    [
        ("NVIDIA_H100_80GB", f"{QUOTA}h100_gpus"),  # the seed page's own example
        ("NVIDIA_A100_80GB", f"{QUOTA}a100_80gb_gpus"),
        ("NVIDIA_L4", f"{QUOTA}l4_gpus"),
        ("NVIDIA_TESLA_T4", f"{QUOTA}t4_gpus"),  # Spot serves it, FLEX_START does not
        ("NVIDIA_TESLA_K80", None),
        ("TPU_V3", None),
    ],
)
def test_preemptible_quota_metric(accelerator_type: str, metric: str | None) -> None:
    assert machines.preemptible_quota_metric(accelerator_type) == metric


def test_hyperdisk_only_machines_are_a3_ultra_and_a4() -> None:
    assert sorted(machines.HYPERDISK_ONLY_MACHINES) == ["a3-ultragpu-8g", "a4-highgpu-8g"]
    assert machines.HYPERDISK_BOOT_DISK_TYPE == "hyperdisk-balanced"


@pytest.mark.parametrize(
    ("accelerator_type", "expected"),
    [
        ("NVIDIA_H200_141GB", ("a3-ultragpu-8g",)),
        ("NVIDIA_L4", tuple(f"g2-standard-{n}" for n in (4, 8, 12, 16, 32, 24, 48, 96))),
        ("NVIDIA_TESLA_T4", ()),
    ],
)
def test_machines_with(accelerator_type: str, expected: tuple[str, ...]) -> None:
    assert machines.machines_with(accelerator_type) == expected


@pytest.mark.parametrize(
    ("name", "is_gpu"),
    [("NVIDIA_L4", True), ("TPU_V3", False), ("ACCELERATOR_TYPE_UNSPECIFIED", False)],
)
def test_is_gpu(name: str, is_gpu: bool) -> None:
    assert machines.is_gpu(name) is is_gpu


def test_importing_the_table_loads_no_cloud_client() -> None:
    # The interpreter preloads the bare ``google.cloud`` namespace; nothing below it may load.
    probe = (
        "import sys, shared.policy.machines; "
        "print(sorted(m for m in sys.modules if m.startswith(('google.', 'proto'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['google.cloud']"
