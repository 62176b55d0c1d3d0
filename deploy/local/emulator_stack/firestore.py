"""The official Firestore emulator (native mode), run from its start script.

``gcloud emulators firestore start`` only wraps ``<sdk>/platform/cloud-firestore-emulator/
cloud_firestore_emulator start``; calling the script directly saves gcloud's own start-up (about
half a second) and a wrapper process.

The emulator keeps its data in memory, so a plain restart wipes it, which production Firestore
never does. ``FirestoreEmulator.stop_keeping_data`` and ``start_again`` give the faithful fault, an
outage with the data intact: an export through the emulator's REST endpoint, a stop, and a start
on the same ``host:port`` that imports the export (``--import-data``). ``--export-on-exit`` is
not used because it does not work (emulator 1.19.9): the emulator exports only when its server
ends normally, which a SIGTERM of its process group (``ManagedProcess.stop``) never is, and even
then (ended by ``POST /shutdown``) the export fails on the ``(default)`` database ("Database name
projects/P/databases/ has invalid trailing /").
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from emulator_stack.environment import LOCAL_PROJECT
from emulator_stack.handle import EmulatorHandle
from emulator_stack.launch import DEFAULT_START_TIMEOUT_SECONDS, start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.prerequisites import require_java, require_sdk_file
from emulator_stack.readiness import all_of, http_ok

HOST_VARIABLE = "FIRESTORE_EMULATOR_HOST"
EXPORT_NAME = "kept-data"
# A first export of a cold emulator on a loaded 2-core machine took 13 s; later ones about 1 s.
_EXPORT_TIMEOUT_SECONDS = 60.0
_IMPORT_FLAG = "--import-data="


@dataclass(frozen=True)
class FirestoreEmulator(EmulatorHandle):
    """A running Firestore emulator; ``reset`` empties a project's default database."""

    @property
    def env(self) -> dict[str, str]:
        return {HOST_VARIABLE: self.address}

    def reset(self, project: str = LOCAL_PROJECT) -> None:
        """Delete every document of ``project``'s ``(default)`` database."""
        self._admin_call("DELETE", f"/emulator/v1/projects/{project}/databases/(default)/documents")

    def export(self, directory: Path, project: str = LOCAL_PROJECT) -> Path:
        """Write ``project``'s ``(default)`` database under ``directory``; its metadata file.

        The metadata file is what ``--import-data`` (and ``start_again``) takes. An earlier export
        to the same ``directory`` is replaced.
        """
        directory.mkdir(parents=True, exist_ok=True)  # the emulator refuses a missing directory
        body = {
            "database": f"projects/{project}/databases/(default)",
            "export_directory": str(directory.resolve()),
            "export_name": EXPORT_NAME,
        }
        request = urllib.request.Request(
            f"http://{self.address}/emulator/v1/projects/{project}:export",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=_EXPORT_TIMEOUT_SECONDS):
            pass  # raises HTTPError on a non-2xx answer
        metadata = directory.resolve() / EXPORT_NAME / f"{EXPORT_NAME}.overall_export_metadata"
        if not metadata.is_file():
            raise RuntimeError(f"the Firestore emulator's export left no {metadata}")
        return metadata

    def stop_keeping_data(self, directory: Path, project: str = LOCAL_PROJECT) -> Path:
        """Export ``project``'s database to ``directory``, then stop; returns the export.

        A write that lands between the export and the stop is lost, as in no real outage: call it
        while no write is in flight (the fault tests stop it while the functions wait on
        something else, or between deliveries).
        """
        metadata = self.export(directory, project)
        self.stop()
        return metadata

    def start_again(
        self, kept_data: Path, timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS
    ) -> FirestoreEmulator:
        """Start a stopped emulator again on the same ``host:port`` with ``kept_data`` imported.

        ``kept_data`` is the metadata file ``stop_keeping_data`` returned. Every document comes
        back with its fields, but with the import time as its ``update_time``: a compare-and-set
        computed before the outage fails once (``FailedPrecondition``), as after any other write.
        Returns the new handle, once it serves a read; its log is ``<name>-again-<n>.log`` next
        to the first one.
        """
        if self.process.is_running():
            raise RuntimeError(f"{self.name} is still running: stop it first")
        command = [arg for arg in self.process.command if not arg.startswith(_IMPORT_FLAG)]
        log_dir = self.process.log_path.parent
        again = 1 + len(list(log_dir.glob(f"{self.name}-again-*.log")))
        # Ready means serving documents: a restarted emulator answers "/" at once but took 7.5 s
        # (cold JIT, loaded machine) over its first read, which would be counted as the outage's
        # tail on the clients' side instead of as the restart.
        serving = http_ok(
            f"http://{self.host}:{self.port}/v1/projects/{LOCAL_PROJECT}/databases/(default)"
            "/documents/readiness-probe?pageSize=1"
        )
        started = start_and_wait(
            f"{self.name}-again-{again}",
            [*command, f"{_IMPORT_FLAG}{kept_data}"],
            all_of(http_ok(f"http://{self.host}:{self.port}/"), serving),
            log_dir,
            timeout_seconds,
        )
        return FirestoreEmulator(
            self.name, self.host, self.port, started.process, started.startup_seconds
        )


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
