"""``vertex-dispatch demo``: the local emulator stack and eleven scenarios played against it."""

from __future__ import annotations

import argparse


def add_demo(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="run the local emulator stack and play eleven scenarios on it",
        description=(
            "Start the local emulators (Pub/Sub, Firestore, Cloud Storage, Vertex AI), each\n"
            "Cloud Function under functions-framework and the production wiring on free\n"
            "loopback ports, then play eleven scenarios, each checked, and print a summary:\n"
            "  1. a dataset lands (shards + _SUCCESS): one FLEX_START job waits for GPUs, runs\n"
            "     when capacity appears, succeeds; its completion is published\n"
            "  2. a request on Pub/Sub runs on the persistent resource at once\n"
            "  3. the persistent resource is full: the next request falls through to FLEX_START\n"
            "  4. a FLEX_START wait expires: resubmitted to the next placement (another region)\n"
            "  5. a job fails in user code: retried once per policy, then alerted\n"
            "  6. an invalid request is rejected with its reasons and alerted; nothing is created\n"
            "  7. the config's scheduled retrain fires\n"
            "  8. the reservation is full, Spot is preempted, the run lands elsewhere: the walk\n"
            "     skips the full reservation, the Spot job is preempted, on demand succeeds\n"
            "  9. a sweep (hyperparameter tuning job): its FLEX_START trials wait for GPUs,\n"
            "     run when capacity appears; the completion names the best trial\n"
            " 10. a training pipeline runs on a persistent resource; its model is uploaded\n"
            " 11. a nightly export without a marker: one job once it has been quiet a minute\n"
            "Exit status: 0 every scenario ended as expected, 1 one did not, 2 the stack\n"
            "could not start; stopped by a signal before the end: 128 + its number."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        help=(
            "keep the stack running after the scenarios, printing its variables, until Ctrl-C "
            "or SIGTERM"
        ),
    )
    demo.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from tooling.demo_story import run_demo

    return run_demo(time_scale=args.time_scale, keep_running=args.keep_running)
