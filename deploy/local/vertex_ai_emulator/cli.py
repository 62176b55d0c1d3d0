"""The `vertex-ai-emulator` command: serve a local Vertex AI (REST and gRPC) until told to stop.

When both ports are serving it prints exactly one line to stdout, which scripts wait for::

    vertex-ai-emulator: REST on http://127.0.0.1:8090, gRPC on 127.0.0.1:8091

SIGTERM and SIGINT stop it cleanly (exit status 0). `run` is the process entry point: it skips
the interpreter's teardown of the aiplatform_v1 modules, which alone takes about a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from vertex_ai_emulator.config import EmulatorConfig, load_config, timings_from_dict
from vertex_ai_emulator.server import DEFAULT_HOST, EmulatorServer

DEFAULT_REST_PORT = 8090
LOG_LEVELS = ("debug", "info", "warning", "error")

_DESCRIPTION = """\
A local Vertex AI (aiplatform v1) for tests and demos: CustomJobs with FLEX_START (Dynamic Workload
Scheduler) queueing and persistent resources, served to the real google-cloud-aiplatform clients
over REST and gRPC, with simulated time and an admin API under /emulator/v1/ on the REST port.
"""
_EPILOG = """\
Point the clients at it with VERTEX_AI_EMULATOR_HOST=HOST:PORT (REST) and
VERTEX_AI_EMULATOR_GRPC_HOST=HOST:GRPC_PORT. Ready when it prints its one line, or when
GET http://HOST:PORT/emulator/v1/health answers 200. See docs/vertex-ai-emulator.md.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vertex-ai-emulator",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_REST_PORT,
        help="REST and admin API port; 0 picks a free port (default: %(default)s)",
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        default=None,
        help="gRPC port; 0 picks a free port (default: PORT+1, or a free port when PORT is 0)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="YAML or JSON file: projects, capacity, persistent resources, outcome rules, faults "
        "(default: the built-in defaults)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        metavar="X",
        help="simulated seconds per real second, e.g. 60 to run an hour in a minute, 0 to move "
        "time only by POST /emulator/v1/clock:advance (default: from the config, else 1)",
    )
    parser.add_argument(
        "--timing",
        action="append",
        default=[],
        metavar="NAME=DURATION",
        help="override one of the config's timings, kept across resets; repeatable, e.g. "
        "--timing error_delay=60s (names: provisioning, persistent_start, cancel, error_delay)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="debug logs one JSON line per API call to stderr (default: %(default)s)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    logging.basicConfig(level=options.log_level.upper(), stream=sys.stderr, format="%(message)s")
    stop_requested = threading.Event()
    _stop_on_signals(stop_requested)
    try:
        server = EmulatorServer(
            _with_timings(_load_config(options.config), options.timing),
            host=options.host,
            rest_port=options.port,
            grpc_port=_grpc_port(options.port, options.grpc_port),
            time_scale=options.time_scale,
        ).start()
    except (OSError, ValueError) as error:  # unreadable config, bad rule, port in use
        parser.error(str(error))
    try:
        print(
            f"vertex-ai-emulator: REST on {server.rest_url}, gRPC on {server.grpc_target}",
            flush=True,
        )
        stop_requested.wait()
    finally:
        server.stop()
    return 0


def run() -> NoReturn:
    """Run `main` as a whole process, and leave as soon as it has stopped serving."""
    status = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Both servers are stopped and every output flushed; what remains is the interpreter
    # freeing thousands of protobuf modules, which nobody waits for.
    os._exit(status)


def _grpc_port(rest_port: int, grpc_port: int | None) -> int:
    if grpc_port is not None:
        return grpc_port
    return rest_port + 1 if rest_port else 0


def _load_config(path: str | None) -> EmulatorConfig | None:
    return load_config(path) if path is not None else None


def _with_timings(config: EmulatorConfig | None, overrides: Sequence[str]) -> EmulatorConfig | None:
    """The config with the `--timing NAME=DURATION` overrides applied (ConfigError if bad)."""
    if not overrides:
        return config
    base = config or EmulatorConfig.default()
    changes: dict[str, str] = {}
    for override in overrides:
        name, equals, duration = override.partition("=")
        if not equals:
            raise ValueError(f"--timing: expected NAME=DURATION, got {override!r}")
        changes[name.strip()] = duration.strip()
    return dataclasses.replace(base, timings=timings_from_dict(changes, base=base.timings))


def _stop_on_signals(stop_requested: threading.Event) -> None:
    def request_stop(signal_number: int, frame: FrameType | None) -> None:
        stop_requested.set()

    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, request_stop)
