"""The start sequence every launcher shares: pick a log file, start, wait, time it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from emulator_stack.process import ManagedProcess
from emulator_stack.readiness import ReadinessProbe

DEFAULT_START_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class StartedProcess:
    """A process that passed its readiness probe, and how long that took from launch."""

    process: ManagedProcess
    startup_seconds: float


def start_and_wait(
    name: str,
    command: Sequence[str],
    probe: ReadinessProbe,
    log_dir: Path,
    timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
) -> StartedProcess:
    """Start ``command`` logging to ``log_dir/<name>.log`` and wait until ``probe`` passes."""
    process = ManagedProcess(name, command, log_dir / f"{name}.log", extra_env)
    started_at = time.monotonic()
    process.start()
    process.wait_until_ready(probe, timeout_seconds)
    return StartedProcess(process, time.monotonic() - started_at)
