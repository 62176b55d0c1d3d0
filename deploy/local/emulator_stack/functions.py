"""The Cloud Functions, each served by functions-framework as its own HTTP server (as Cloud Run).

One subprocess per entry point of ``functions/main.py``, on a free loopback port, with the
emulators' environment and the dispatch config. It is ready when its port accepts connections;
the first event then pays the imports, as a cold start would in production.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emulator_stack.launch import DEFAULT_START_TIMEOUT_SECONDS, start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.process import ManagedProcess
from emulator_stack.readiness import tcp_open

REPOSITORY_ROOT = Path(__file__).resolve().parents[3]
FUNCTIONS_SOURCE = REPOSITORY_ROOT / "functions" / "main.py"

OBJECT_FINALIZED = "on_object_finalized"
REQUEST = "on_request"
JOB_EVENT = "on_job_event"
RECONCILE = "reconcile"
TARGETS = (OBJECT_FINALIZED, REQUEST, JOB_EVENT, RECONCILE)
"""Every entry point the local stack serves, in the order they are listed to a person."""


@dataclass(frozen=True)
class FunctionServer:
    """One entry point served over HTTP; ``url`` is where Eventarc or a push subscription posts."""

    target: str
    host: str
    port: int
    process: ManagedProcess
    startup_seconds: float

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def is_running(self) -> bool:
        return self.process.is_running()

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        """SIGKILL the whole process group at once, as a crashed instance: no handler runs."""
        self.process.kill()


def start_function_server(
    target: str,
    log_dir: Path,
    env: Mapping[str, str],
    host: str = LOOPBACK,
    timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS,
    port: int | None = None,
    instance: int = 1,
) -> FunctionServer:
    """Serve ``target`` under functions-framework on ``port`` (a free one by default); its log
    is function-TARGET.log, or function-TARGET-INSTANCE.log for a later ``instance``."""
    port = port or free_port(host)
    command = [
        sys.executable,
        "-m",
        "functions_framework",
        f"--source={FUNCTIONS_SOURCE}",
        f"--target={target}",
        f"--host={host}",
        f"--port={port}",
    ]
    started = start_and_wait(
        f"function-{target}" if instance == 1 else f"function-{target}-{instance}",
        command,
        tcp_open(host, port),
        log_dir,
        timeout_seconds,
        # The stand-in source lives outside the repository root: make `shared` importable.
        extra_env={**env, "PYTHONPATH": str(REPOSITORY_ROOT)},
    )
    return FunctionServer(target, host, port, started.process, started.startup_seconds)
