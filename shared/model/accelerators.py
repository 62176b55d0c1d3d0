"""Which GPUs each scheduling strategy serves: the sets FLEX_START and Spot placements may ask for.

Plain data (docs/architecture.md, "The Vertex AI rules"), keyed by the names the REST API uses
(``NVIDIA_TESLA_A100``), with ``is_gpu`` to tell a GPU from a TPU. It sits in the model so that
both the config loader (``shared.config.spot`` refuses a Spot placement on another GPU when the
config loads) and the rendered job's rules (``shared.validation``, through
``shared.policy.machines``, which re-exports these names beside its machine tables) read one
copy: the config layer may not import the policy layer. The emulator keeps its own copy
(deploy/local/vertex_ai_emulator/checks.py), held equal by tests/unit/emulator/test_core_checks.py.
"""

from __future__ import annotations

from typing import Final

# Dynamic Workload Scheduler serves L4, A100, H100, H200 and B200 GPUs only.
FLEX_START_GPUS: Final[frozenset[str]] = frozenset(
    {
        "NVIDIA_L4",
        "NVIDIA_TESLA_A100",
        "NVIDIA_A100_80GB",
        "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB",
        "NVIDIA_H200_141GB",
        "NVIDIA_B200",
    }
)

# The GPUs a Spot placement (scheduling.strategy SPOT) may ask for. Google's "Use Spot VMs with
# training" page (cloud.google.com/vertex-ai/docs/training/use-spot-vms) lists no GPU of its own:
# "All Spot VMs limitations apply", TPU Pods are not supported; and Compute Engine's "About GPUs"
# page ("GPUs on Spot VMs") adds GPUs to Spot VMs at spot prices without excluding a model. So the
# set is every GPU Vertex AI training runs on with a machine type shared.policy.machines knows,
# except:
# - NVIDIA_TESLA_K80: end of support (AcceleratorType marks it deprecated; no Spot VM gets one);
# - NVIDIA_GB200 and NVIDIA_RTX_PRO_6000: newer than the machine tables (no machine type there
#   carries them), and no page found says training offers them on Spot. Unconfirmed, so refused
#   until a page says otherwise; add them here (and to the emulator's copy) when one does.
SPOT_GPUS: Final[frozenset[str]] = frozenset(
    {
        "NVIDIA_TESLA_P4",
        "NVIDIA_TESLA_P100",
        "NVIDIA_TESLA_T4",
        "NVIDIA_TESLA_V100",
        "NVIDIA_L4",
        "NVIDIA_TESLA_A100",
        "NVIDIA_A100_80GB",
        "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB",
        "NVIDIA_H200_141GB",
        "NVIDIA_B200",
    }
)


def is_gpu(accelerator_type: str) -> bool:
    """Whether an accelerator name is a GPU (TPUs count towards no GPU rule or guard)."""
    return accelerator_type.startswith("NVIDIA_")
