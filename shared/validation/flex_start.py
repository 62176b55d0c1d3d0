"""The FLEX_START rules (docs/architecture.md, "The Vertex AI rules"): the GPUs DWS serves, the
7-day timeout, one machine configuration for every pool, and an explicit maxWaitDuration.

``shared.validation.compose`` runs them only for a ``flex_start`` placement.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Final

from shared.policy import machines
from shared.policy.jobspec import job_timeout
from shared.validation.subject import (
    _accelerator,
    _hours,
    _machine_text,
    _pool_field,
    _Subject,
    _used_pools,
)
from shared.validation.violations import Rule, Violation

FLEX_START_MAX_TIMEOUT: Final = timedelta(days=7)


def check_flex_start_gpu(subject: _Subject) -> Iterator[Violation]:
    allowed = ", ".join(sorted(machines.FLEX_START_GPUS))
    for index, pool in _used_pools(subject.job):
        accelerator = _accelerator(pool.machine_spec)
        if accelerator not in machines.FLEX_START_GPUS:
            yield Violation(
                _pool_field(index, "machineSpec.acceleratorType"),
                Rule.FLEX_START_GPU,
                f"FLEX_START serves only L4, A100, H100, H200 and B200 GPUs ({allowed}), and "
                f"this pool asks for {accelerator}; pick one of those GPUs and a machine type "
                f"built with it, or place the job on a persistent resource",
            )


def check_flex_start_timeout(subject: _Subject) -> Iterator[Violation]:
    timeout = job_timeout(subject.job)
    if timeout > FLEX_START_MAX_TIMEOUT:
        yield Violation(
            "jobSpec.scheduling.timeout",
            Rule.FLEX_START_TIMEOUT,
            f"FLEX_START jobs run for at most 7 days ({_hours(FLEX_START_MAX_TIMEOUT)}); the "
            f"timeout is {_hours(timeout)}: set the template's timeout to 7d or less",
        )


def check_flex_start_same_machine(subject: _Subject) -> Iterator[Violation]:
    pools = _used_pools(subject.job)
    if not pools:
        return
    first = pools[0][1].machine_spec
    for index, pool in pools[1:]:
        if pool.machine_spec != first:
            yield Violation(
                _pool_field(index, "machineSpec"),
                Rule.FLEX_START_SAME_MACHINE,
                f"FLEX_START needs every worker pool on the same machine configuration; pool 0 "
                f"uses {_machine_text(first)}, pool {index} uses "
                f"{_machine_text(pool.machine_spec)}: make them equal, or use a persistent "
                f"resource placement",
            )


def check_flex_start_max_wait(subject: _Subject) -> Iterator[Violation]:
    if "max_wait_duration" not in subject.job.job_spec.scheduling:
        yield Violation(
            "jobSpec.scheduling.maxWaitDuration",
            Rule.FLEX_START_MAX_WAIT,
            "FLEX_START without maxWaitDuration waits 1 day by Vertex AI's default; set the "
            "placement's max_wait explicitly (0 waits forever)",
        )
