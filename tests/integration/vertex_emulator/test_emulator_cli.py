"""The `vertex-ai-emulator` command, run as a real process: ready line, calls, clean SIGTERM."""

from __future__ import annotations

import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from emulator_test_support import PARENT, AdminApi, build_clients, flex_start_job
from google.api_core import exceptions

from emulator_stack.local_stack import StackSettings
from emulator_stack.vertex_ai import start_vertex_ai_emulator
from vertex_ai_emulator.server import EmulatorServer

pytestmark = pytest.mark.integration

READY_LINE = re.compile(
    r"^vertex-ai-emulator: REST on (?P<rest_url>http://127\.0\.0\.1:\d+), "
    r"gRPC on (?P<grpc_target>127\.0\.0\.1:\d+)$"
)
START_TIMEOUT_SECONDS = 30  # importing aiplatform_v1 alone takes a few seconds on 2 cores
STOP_TIMEOUT_SECONDS = 2
EXAMPLE_CONFIG = (
    Path(__file__).parents[3] / "deploy" / "local" / "vertex_ai_emulator" / "example-config.yaml"
)


def _read_line(process: subprocess.Popen[str], timeout_seconds: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_seconds):
            raise TimeoutError(f"no line from the emulator within {timeout_seconds} s")
    return process.stdout.readline().rstrip("\n")


@pytest.fixture
def emulator_process() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vertex_ai_emulator",
            "--port",
            "0",
            "--time-scale",
            "0",
            "--config",
            str(EXAMPLE_CONFIG),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_the_cli_announces_itself_serves_and_stops_on_sigterm(emulator_process):
    ready = READY_LINE.match(_read_line(emulator_process, START_TIMEOUT_SECONDS))
    assert ready, "the first line must announce both ports"

    for transport in ("rest", "grpc"):
        job_client, _ = build_clients(transport, ready["rest_url"], ready["grpc_target"])
        assert list(job_client.list_custom_jobs(parent=PARENT, retry=None, timeout=10)) == []
    with pytest.raises(exceptions.ServiceUnavailable):  # the example config's one fault
        job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job(), retry=None)

    started = time.monotonic()
    emulator_process.send_signal(signal.SIGTERM)
    assert emulator_process.wait(timeout=STOP_TIMEOUT_SECONDS) == 0
    assert time.monotonic() - started < STOP_TIMEOUT_SECONDS
    assert emulator_process.stdout.read() == ""


@pytest.mark.parametrize("busy", ["rest_port", "grpc_port"])
def test_a_busy_port_fails_the_start_with_os_error(busy):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            EmulatorServer(**{busy: taken.getsockname()[1]}).start()


def test_timing_flags_from_the_stack_launcher_override_the_config_and_survive_reset(tmp_path):
    # The local stack (demo, e2e, soak) starts its emulator this way, with Google's late error.
    error_delay = StackSettings(tmp_path / "dispatch.yaml").vertex_error_delay
    assert error_delay == "60s"
    with start_vertex_ai_emulator(
        tmp_path, config=EXAMPLE_CONFIG, time_scale=0, timings={"error_delay": error_delay}
    ) as emulator:
        admin = AdminApi(f"http://{emulator.address}")
        assert admin.call("GET", "timings")["error_delay"] == 60.0
        admin.call("PUT", "timings", {"error_delay": "0s"})
        emulator.reset()
        assert admin.call("GET", "timings") == {
            "provisioning": 120.0,
            "persistent_start": 5.0,
            "cancel": 5.0,
            "error_delay": 60.0,
        }


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("boot=1s", "timings: unknown key(s) boot"),
        ("error_delay", "--timing: expected NAME=DURATION"),
        ("error_delay=soon", "timings.error_delay"),
    ],
)
def test_a_bad_timing_flag_exits_2_naming_it(flag, message):
    finished = subprocess.run(
        [sys.executable, "-m", "vertex_ai_emulator", "--port", "0", "--timing", flag],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_SECONDS,
    )
    assert finished.returncode == 2
    assert message in finished.stderr
