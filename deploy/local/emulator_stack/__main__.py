"""``python -m emulator_stack``: run local emulators until interrupted, printing their env.

Prints one ``export NAME=VALUE`` line per variable (so the output can be ``eval``-ed by a shell),
then the start-up time of each emulator on stderr, and stops them all on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from emulator_stack.environment import LOCAL_PROJECT
from emulator_stack.errors import EmulatorStackError
from emulator_stack.stack import LAUNCHERS, start_emulators


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    unknown = sorted(set(arguments.emulators) - set(LAUNCHERS))
    if unknown:
        parser.error(f"unknown emulators {unknown}; choose from {', '.join(LAUNCHERS)}")
    log_dir = arguments.log_dir or Path(tempfile.mkdtemp(prefix="emulator-stack-"))
    try:
        stack = start_emulators(arguments.emulators or list(LAUNCHERS), log_dir)
    except EmulatorStackError as error:
        print(f"emulator-stack: {error}", file=sys.stderr)
        return 1
    with stack:
        for name, value in {"GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT, **stack.env}.items():
            print(f"export {name}={shlex.quote(value)}", flush=True)
        for name, emulator in stack.emulators.items():
            print(
                f"emulator-stack: {name} ready on {emulator.address} in "
                f"{emulator.startup_seconds:.2f} s",
                file=sys.stderr,
            )
        print(f"emulator-stack: logs in {log_dir}; Ctrl-C stops", file=sys.stderr, flush=True)
        _wait_for_termination()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m emulator_stack", description=__doc__)
    parser.add_argument(
        "emulators",
        nargs="*",
        help=f"which emulators to start: {', '.join(LAUNCHERS)} (default: all)",
    )
    parser.add_argument("--log-dir", type=Path, help="where the emulators' logs go")
    return parser


def _wait_for_termination() -> None:
    stopping = threading.Event()

    def request_stop(_signal_number: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    stopping.wait()


if __name__ == "__main__":
    sys.exit(main())
