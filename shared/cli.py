"""The ``vertex-dispatch`` command line: one entry point, one subcommand per task.

Subcommands import what they need inside their handler, so ``vertex-dispatch --help`` stays fast and
a subcommand never pays for another's dependencies.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from shared import __version__

Handler = Callable[[argparse.Namespace], int]


def _run_demo(args: argparse.Namespace) -> int:
    from shared.demo import run_demo

    return run_demo(time_scale=args.time_scale, keep_running=args.keep_running)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vertex-dispatch",
        description=(
            "Start GPU training on Vertex AI from bucket arrivals, Pub/Sub requests and "
            "scheduler ticks, exactly once."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="run the local emulator stack and play a story against it",
        description=(
            "Start the local emulators (Pub/Sub, Firestore, Cloud Storage, Vertex AI) on free "
            "loopback ports and play a short story that shows a FLEX_START job waiting for GPUs, "
            "starting when capacity appears, and succeeding."
        ),
    )
    demo.add_argument(
        "--time-scale",
        type=float,
        default=600.0,
        help="simulated seconds per real second in the Vertex AI emulator (default: %(default)s)",
    )
    demo.add_argument(
        "--keep-running",
        action="store_true",
        help="keep the emulators running after the story, until Ctrl-C",
    )
    demo.set_defaults(handler=_run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
