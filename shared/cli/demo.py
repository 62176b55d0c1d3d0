"""``vertex-dispatch demo``: the local emulator stack and a short story played against it."""

from __future__ import annotations

import argparse


def add_demo(commands: argparse._SubParsersAction) -> None:
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


def _run_demo(args: argparse.Namespace) -> int:
    from shared.demo import run_demo

    return run_demo(time_scale=args.time_scale, keep_running=args.keep_running)
