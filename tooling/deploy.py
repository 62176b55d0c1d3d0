"""``vertex-dispatch deploy-plan``: what deploying a config creates; its Terraform variables."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Final

from tooling.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    fail,
    load_config_or_report,
    print_json,
)

DEFAULT_SOURCE_ZIP: Final = Path("build/vertex-dispatch-source.zip")


def add_deploy_plan(commands: argparse._SubParsersAction) -> None:
    deploy_plan = commands.add_parser(
        "deploy-plan",
        help="print what a deployment of a config creates; write its Terraform variables",
        description=(
            "Print the topics, subscriptions, functions and triggers, scheduler jobs and service "
            "accounts with their roles that deploy/terraform creates for the config; nothing is "
            "created. Exit status: 0 deployable, 1 problems (or a config that does not load)."
        ),
    )
    deploy_plan.add_argument("--config", required=True, metavar="FILE", help="a local config")
    deploy_plan.add_argument("--prefix", default="vd", help="resource name prefix (%(default)s)")
    deploy_plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    deploy_plan.add_argument(
        "--tfvars", type=Path, metavar="OUT", help="write the Terraform variables to OUT (JSON)"
    )
    deploy_plan.add_argument(
        "--source-zip",
        type=Path,
        default=DEFAULT_SOURCE_ZIP,
        help="the bundle zip the tfvars name (default: %(default)s)",
    )
    deploy_plan.set_defaults(handler=_run_deploy_plan)


def _run_deploy_plan(args: argparse.Namespace) -> int:
    from tooling import deployplan

    if args.tfvars is not None and args.config.startswith("gs://"):
        # A deployment ships the config in its bundle (deploy/bundle.py --config), from a file.
        fail(
            "deploy-plan",
            "--tfvars needs a local config file (the bundle ships it): copy it here",
        )
        return EXIT_USAGE
    config = load_config_or_report(args.config, "deploy-plan", as_json=args.json)
    if config is None:
        return EXIT_PROBLEMS
    plan = deployplan.deploy_plan(config, prefix=args.prefix)
    if args.json:
        print_json(deployplan.plan_document(plan))
    else:
        print(deployplan.plan_text(plan))
    if not plan.deployable:
        return EXIT_PROBLEMS
    if args.tfvars is not None:
        variables = deployplan.tfvars(plan, source_zip=args.source_zip)
        args.tfvars.write_text(json.dumps(variables, indent=2) + "\n", encoding="utf-8")
        print(f"Terraform variables written to {args.tfvars}", file=sys.stderr)
    return EXIT_OK
