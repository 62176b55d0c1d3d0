"""The project's own Vertex AI emulator (``deploy/local/vertex_ai_emulator``), as a subprocess.

It serves the aiplatform v1 JobService and PersistentResourceService over REST and gRPC, Compute
Engine's reservations read over REST, and an admin API under ``/emulator/v1/`` on the REST port.
It is ready when its health endpoint answers and its gRPC port accepts connections.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emulator_stack.errors import PrerequisiteMissing
from emulator_stack.handle import EmulatorHandle
from emulator_stack.launch import DEFAULT_START_TIMEOUT_SECONDS, start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.readiness import all_of, http_ok, tcp_open

HOST_VARIABLE = "VERTEX_AI_EMULATOR_HOST"
GRPC_HOST_VARIABLE = "VERTEX_AI_EMULATOR_GRPC_HOST"
# The emulator also answers the one Compute Engine read dispatch makes (a named reservation,
# GET /compute/v1/projects/{p}/zones/{z}/reservations/{r}) on its REST port.
COMPUTE_HOST_VARIABLE = "COMPUTE_EMULATOR_HOST"
_MODULE = "vertex_ai_emulator"


@dataclass(frozen=True)
class VertexAIEmulator(EmulatorHandle):
    """A running Vertex AI emulator: REST and admin on ``port``, gRPC on ``grpc_port``."""

    grpc_port: int

    @property
    def grpc_address(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def admin_url(self) -> str:
        """Base URL of the admin API, ending in a slash (``.../emulator/v1/``)."""
        return f"http://{self.address}/emulator/v1/"

    @property
    def env(self) -> dict[str, str]:
        return {
            HOST_VARIABLE: self.address,
            GRPC_HOST_VARIABLE: self.grpc_address,
            COMPUTE_HOST_VARIABLE: self.address,
        }

    def reset(self) -> None:
        """Back to the state its config describes: no jobs, clock, rules, faults or request log."""
        self._admin_call("POST", "/emulator/v1/reset")


def vertex_ai_emulator_available() -> bool:
    """Whether the emulator's command-line entry point (``python -m vertex_ai_emulator``) exists."""
    try:
        return importlib.util.find_spec(f"{_MODULE}.__main__") is not None
    except ModuleNotFoundError:
        return False


def start_vertex_ai_emulator(
    log_dir: Path,
    host: str = LOOPBACK,
    port: int | None = None,
    grpc_port: int | None = None,
    config: Path | None = None,
    time_scale: float | None = None,
    timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS,
    timings: Mapping[str, str] | None = None,
) -> VertexAIEmulator:
    """Start the Vertex AI emulator (free ports by default) and wait until both ports serve.

    ``config`` seeds its state (capacity, persistent resources, outcome rules); ``time_scale``
    makes its simulated jobs run faster than real time; ``timings`` (``{"error_delay": "60s"}``)
    override the config's timings, also after a reset (``--timing NAME=DURATION``).
    """
    if not vertex_ai_emulator_available():
        raise PrerequisiteMissing(
            f"`{sys.executable} -m {_MODULE}` is not available: run `./dev setup` "
            "(the emulator is part of this project)"
        )
    port = port or free_port(host)
    grpc_port = grpc_port or free_port(host)
    command = [
        sys.executable,
        "-m",
        _MODULE,
        "--host",
        host,
        "--port",
        str(port),
        "--grpc-port",
        str(grpc_port),
    ]
    if config is not None:
        command += ["--config", str(config)]
    if time_scale is not None:
        command += ["--time-scale", str(time_scale)]
    for name, duration in (timings or {}).items():
        command += ["--timing", f"{name}={duration}"]
    started = start_and_wait(
        "vertex-ai",
        command,
        all_of(http_ok(f"http://{host}:{port}/emulator/v1/health"), tcp_open(host, grpc_port)),
        log_dir,
        timeout_seconds,
    )
    return VertexAIEmulator(
        "vertex-ai", host, port, started.process, started.startup_seconds, grpc_port
    )
