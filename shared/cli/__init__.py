"""The ``vertex-dispatch`` command line: one entry point, one subcommand per task.

This package owns the entry point (``main``) and the parser; each group of subcommands lives in a
module of its own: ``demo``, ``linting`` (validate, plan), ``operator`` (status, retry, cancel) and
``deploy`` (deploy-plan), with what they share in ``common``. Subcommands import what they need
inside their handler, so ``vertex-dispatch --help`` stays fast and a subcommand never pays for
another's dependencies.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from shared import __version__
from shared.cli.common import EXIT_NO_ROUTE, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from shared.cli.demo import add_demo
from shared.cli.deploy import add_deploy_plan
from shared.cli.linting import add_plan, add_validate
from shared.cli.operator import add_operator_commands, run_document, status_table

__all__ = [
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
    return handler(args)
