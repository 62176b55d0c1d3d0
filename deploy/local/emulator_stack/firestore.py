"""The official Firestore emulator (native mode), run from its start script.

``gcloud emulators firestore start`` only wraps ``<sdk>/platform/cloud-firestore-emulator/
cloud_firestore_emulator start``; calling the script directly saves gcloud's own start-up (about
half a second) and a wrapper process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from emulator_stack.environment import LOCAL_PROJECT
from emulator_stack.handle import EmulatorHandle
from emulator_stack.launch import DEFAULT_START_TIMEOUT_SECONDS, start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.prerequisites import require_java, require_sdk_file
from emulator_stack.readiness import http_ok

HOST_VARIABLE = "FIRESTORE_EMULATOR_HOST"


@dataclass(frozen=True)
class FirestoreEmulator(EmulatorHandle):
    """A running Firestore emulator; ``reset`` empties a project's default database."""

    @property
    def env(self) -> dict[str, str]:
        return {HOST_VARIABLE: self.address}

    def reset(self, project: str = LOCAL_PROJECT) -> None:
        """Delete every document of ``project``'s ``(default)`` database."""
        self._admin_call("DELETE", f"/emulator/v1/projects/{project}/databases/(default)/documents")


def start_firestore_emulator(
    log_dir: Path,
    host: str = LOOPBACK,
    port: int | None = None,
    sdk_root: Path | None = None,
    timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS,
) -> FirestoreEmulator:
    """Start the Firestore emulator on ``host:port`` (a free port by default) and wait for it."""
    script = require_sdk_file("cloud-firestore-emulator", "cloud_firestore_emulator", sdk_root)
    require_java()
    port = port or free_port(host)
    started = start_and_wait(
        "firestore",
        [
            str(script),
            "start",
            f"--host={host}",
            f"--port={port}",
            "--database-mode=firestore-native",
        ],
        http_ok(f"http://{host}:{port}/"),
        log_dir,
        timeout_seconds,
    )
    return FirestoreEmulator("firestore", host, port, started.process, started.startup_seconds)
