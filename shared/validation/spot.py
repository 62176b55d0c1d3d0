"""The Spot rules: the GPUs a Spot placement (``scheduling.strategy = SPOT``) may ask for.

``shared.model.accelerators.SPOT_GPUS`` holds the set and says where it comes from.
A config that loads has passed the same rule already (``shared.config.spot``, at the user's key);
this one checks the rendered job, so that a template built in code (which never passes through
the loader) is held to it too before anything is created.
``shared.validation.compose`` runs these rules only for a ``spot`` placement; a Spot job without
GPUs (a CPU-only pool) breaks none of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from shared.policy import machines
from shared.validation.subject import _accelerator, _pool_field, _Subject, _used_pools
from shared.validation.violations import Rule, Violation


def check_spot_gpu(subject: _Subject) -> Iterator[Violation]:
    allowed = ", ".join(sorted(machines.SPOT_GPUS))
    for index, pool in _used_pools(subject.job):
        accelerator = _accelerator(pool.machine_spec)
        if machines.is_gpu(accelerator) and accelerator not in machines.SPOT_GPUS:
            yield Violation(
                _pool_field(index, "machineSpec.acceleratorType"),
                Rule.SPOT_GPU,
                f"Spot VMs for Vertex AI training are known for these GPUs only: {allowed}; this "
                f"pool asks for {accelerator}: pick one of those GPUs and a machine type built "
                f"with it (or give the spot placement a machine override), or place the job "
                f"on demand",
            )
