"""Cloud Storage, served by ``gcp-storage-emulator`` (PyPI) as a subprocess, in memory.

Google ships no Cloud Storage emulator. This one covers objects and listing by prefix but ignores
preconditions (``ifGenerationMatch``...) and has no notifications (docs/architecture.md, "Exactly
once"), so no correctness may rest on it beyond that. It runs under the current interpreter, so it
needs only the project's dev dependencies.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from emulator_stack.errors import PrerequisiteMissing
from emulator_stack.handle import EmulatorHandle
from emulator_stack.launch import DEFAULT_START_TIMEOUT_SECONDS, start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.readiness import http_ok

HOST_VARIABLE = "STORAGE_EMULATOR_HOST"


@dataclass(frozen=True)
class StorageEmulator(EmulatorHandle):
    """A running Cloud Storage emulator; ``wipe`` deletes every bucket and object."""

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def env(self) -> dict[str, str]:
        # Unlike the other emulators, the storage client wants a URL here, scheme included.
        return {HOST_VARIABLE: self.url}

    def wipe(self, keep_buckets: bool = False) -> None:
        """Delete every object, and every bucket unless ``keep_buckets``."""
        self._admin_call("GET", "/wipe?keep-buckets=1" if keep_buckets else "/wipe")


def start_storage_emulator(
    log_dir: Path,
    host: str = LOOPBACK,
    port: int | None = None,
    timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS,
) -> StorageEmulator:
    """Start the Cloud Storage emulator on ``host:port`` (a free port by default), in memory."""
    if importlib.util.find_spec("gcp_storage_emulator") is None:
        raise PrerequisiteMissing(
            "the Cloud Storage emulator (PyPI package gcp-storage-emulator) is not installed in "
            f"{sys.prefix}: run `./dev setup` (it installs the project's dev extras)"
        )
    port = port or free_port(host)
    started = start_and_wait(
        "storage",
        [
            sys.executable,
            "-m",
            "gcp_storage_emulator",
            "start",
            f"--host={host}",
            f"--port={port}",
            "--in-memory",
            "--quiet",
        ],
        http_ok(f"http://{host}:{port}/"),
        log_dir,
        timeout_seconds,
    )
    return StorageEmulator("storage", host, port, started.process, started.startup_seconds)
