"""The official Pub/Sub emulator, run from its own start script (no gcloud wrapper).

Running ``<sdk>/platform/pubsub-emulator/bin/cloud-pubsub-emulator`` directly is about a second
faster than ``gcloud beta emulators pubsub start`` and leaves no wrapper process whose death
would orphan the Java server. gcloud itself runs this same script, so when the script is missing
gcloud could not start the emulator either: there is no gcloud fallback, only a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from emulator_stack.handle import EmulatorHandle
from emulator_stack.launch import DEFAULT_START_TIMEOUT_SECONDS, start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.prerequisites import require_java, require_sdk_file
from emulator_stack.readiness import http_ok

HOST_VARIABLE = "PUBSUB_EMULATOR_HOST"


@dataclass(frozen=True)
class PubSubEmulator(EmulatorHandle):
    """A running Pub/Sub emulator. Every project and topic name is accepted; state is in memory."""

    @property
    def env(self) -> dict[str, str]:
        return {HOST_VARIABLE: self.address}


def start_pubsub_emulator(
    log_dir: Path,
    host: str = LOOPBACK,
    port: int | None = None,
    sdk_root: Path | None = None,
    timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS,
) -> PubSubEmulator:
    """Start the Pub/Sub emulator on ``host:port`` (a free port by default) and wait for it."""
    script = require_sdk_file("pubsub-emulator", "bin/cloud-pubsub-emulator", sdk_root)
    require_java()
    port = port or free_port(host)
    started = start_and_wait(
        "pubsub",
        [str(script), f"--host={host}", f"--port={port}"],
        http_ok(f"http://{host}:{port}/"),
        log_dir,
        timeout_seconds,
    )
    return PubSubEmulator("pubsub", host, port, started.process, started.startup_seconds)
