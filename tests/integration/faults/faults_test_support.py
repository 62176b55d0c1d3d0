"""Killable function servers, redelivery loops and the figures each fault test reports.

The events, deliveries and Vertex AI admin calls come from the dispatch tests' support module
(tests/integration/dispatch/dispatch_test_support.py, put on ``sys.path`` by this folder's
conftest); what is here is what fault injection adds: a functions-framework server that can be
SIGKILLed as a whole process group and started again on the same port, a bounded "deliver until
acknowledged" loop that tolerates a dead server, and a one-line figures report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import requests

from emulator_stack import LOCAL_PROJECT
from emulator_stack.launch import start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.process import ManagedProcess
from emulator_stack.readiness import tcp_open

DISPATCH_TESTS = Path(__file__).parents[1] / "dispatch"
DISPATCH_CONFIG = DISPATCH_TESTS / "configs" / "dispatch.yaml"
FUNCTIONS_SOURCE = Path(__file__).parents[3] / "functions" / "main.py"
REDELIVERY_PAUSE_SECONDS = 0.05


@dataclass
class FunctionServer:
    """One Cloud Function under functions-framework, in its own process group, on a fixed port."""

    target: str
    log_dir: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    config: Path = DISPATCH_CONFIG
    port: int = field(default_factory=free_port)
    process: ManagedProcess | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        """Start (or start again after a kill) on the same port, and wait until it listens."""
        self.starts += 1
        command = [
            sys.executable,
            "-m",
            "functions_framework",
            f"--source={FUNCTIONS_SOURCE}",
            f"--target={self.target}",
            f"--host={LOOPBACK}",
            f"--port={self.port}",
        ]
        started = start_and_wait(
            f"{self.target}-{self.starts}",
            command,
            tcp_open(LOOPBACK, self.port),
            self.log_dir,
            extra_env={
                "VERTEX_DISPATCH_CONFIG": str(self.config),
                "GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT,
                **self.extra_env,
            },
        )
        self.process = started.process

    def kill(self) -> None:
        """SIGKILL the whole process group at once: no handler, no flush, no goodbye."""
        if self.process is None:
            return
        self.process.kill()
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def log_text(self) -> str:
        return "\n".join(
            path.read_text(errors="replace") for path in sorted(self.log_dir.glob("*.log"))
        )


def deliver_until_acknowledged(
    deliver: Callable[[], int], attempts: int = 30, pause_seconds: float = REDELIVERY_PAUSE_SECONDS
) -> list[int]:
    """Deliver again after each non-2xx answer (or a dead connection), as Pub/Sub does.

    Bounded: a trigger still unacknowledged after ``attempts`` deliveries shows up in the
    returned statuses (the last is not 200) rather than as an endless loop. A connection that
    fails counts as status 0.
    """
    statuses: list[int] = []
    while len(statuses) < attempts:
        try:
            statuses.append(deliver())
        except requests.ConnectionError:
            statuses.append(0)
        if statuses[-1] == 200:
            break
        time.sleep(pause_seconds)
    return statuses


WAIT_SECONDS = 30.0  # the first request of a fresh server imports aiplatform_v1


def wait_for(condition: Callable[[], bool], what: str, seconds: float = WAIT_SECONDS) -> None:
    """Poll ``condition`` until it holds; fail the test if it does not within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.05)


def report(title: str, **figures: object) -> str:
    """Print one line of figures (seen with ``pytest -s`` and in the captured output)."""
    line = f"FIGURES {title}: " + ", ".join(f"{name}={value}" for name, value in figures.items())
    print(line)
    return line
