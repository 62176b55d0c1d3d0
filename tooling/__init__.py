"""The ``vertex-dispatch`` command line: one entry point, one subcommand per task.

This package owns the entry point (``main``) and the parser; each group of subcommands lives in a
module of its own: ``demo``, ``linting`` (validate, plan), ``operator`` (status, retry, cancel) and
``deploy`` (deploy-plan), with what they share in ``common``. Subcommands import what they need
inside their handler, so ``vertex-dispatch --help`` stays fast and a subcommand never pays for
another's dependencies. ``main`` also ends quietly when its reader goes away (``status | head``),
with status 141 (128 + SIGPIPE, as a shell shows for a command a closed pipe killed), never with
a command's verdict; and it turns missing Google Cloud credentials, wherever a handler meets
them, into one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from shared import __version__
from tooling.common import (
    EXIT_CLOSED_PIPE,
    EXIT_NO_ROUTE,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    fail,
    no_credentials,
)
from tooling.demo import add_demo
from tooling.deploy import add_deploy_plan
from tooling.linting import add_plan, add_validate
from tooling.operator import add_operator_commands, run_document, status_table

__all__ = [
    "EXIT_CLOSED_PIPE",
    "EXIT_NO_ROUTE",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "run_document",
    "status_table",
]

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vertex-dispatch",
        description=(
            "Start GPU training on Vertex AI from bucket arrivals, Pub/Sub requests and "
            "scheduler ticks, exactly once."
        ),
        epilog=(
            f"Every command exits with status {EXIT_CLOSED_PIPE} when the reader of its output "
            "leaves before all of it was written (`... | head`): 128 + SIGPIPE, as for any "
            "command a closed pipe stops, never a verdict."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    add_demo(commands)
    add_validate(commands)
    add_plan(commands)
    add_operator_commands(commands)
    add_deploy_plan(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        status = handler(args)
        sys.stdout.flush()  # a closed pipe must fail here, not in the interpreter's exit
    except BrokenPipeError:
        # The reader left (`status --all | head`): say nothing more. Python's documented way:
        # point stdout at /dev/null so that the interpreter's own flush at exit cannot fail too.
        # The status says the output was cut, not what the command decided (1 is a verdict).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    except Exception as error:
        from google.auth.exceptions import GoogleAuthError

        if not isinstance(error, GoogleAuthError):
            raise
        # The handlers report what they were doing; this catches any path they do not cover.
        fail(args.command, no_credentials("reach Google Cloud", error))
        return EXIT_PROBLEMS
    return status
