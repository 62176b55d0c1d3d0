"""The ``vertex-dispatch`` command line: one entry point, one subcommand per task.

Subcommands import what they need inside their handler, so ``vertex-dispatch --help`` stays fast and
a subcommand never pays for another's dependencies.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from shared import __version__

if TYPE_CHECKING:
    from datetime import datetime

    from shared.config.model import Config
    from shared.ledger import Ledger, Run
    from shared.planning import PlacementPlan, Plan
    from shared.validation import TemplateProblem, Violation

Handler = Callable[[argparse.Namespace], int]

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1  # the config, the event or the job breaks a rule
EXIT_USAGE: Final = 2  # argparse's own code for a bad command line
EXIT_NO_ROUTE: Final = 3

# planning.Verdict value -> exit status of `plan`.
PLAN_EXIT_CODES: Final[Mapping[str, int]] = {
    "valid": EXIT_OK,
    "invalid": EXIT_PROBLEMS,
    "rejected": EXIT_PROBLEMS,
    "no_route": EXIT_NO_ROUTE,
    "not_routed": EXIT_USAGE,
}

CONFIG_HELP: Final = "the config file: a local path or gs://BUCKET/path/config.yaml"

VALIDATE_EPILOG: Final = """\
examples:
  vertex-dispatch validate --config examples/config.yaml
  vertex-dispatch validate --config gs://acme-config/vertex-dispatch.yaml --json

Each problem is printed as  WHERE: FIELD: RULE: MESSAGE,  e.g.
  templates.resnet-a100.placement[1]: jobSpec.scheduling.timeout: flex-start-timeout: ...
Persistent resources are not read: their state, pools and free replicas are checked live by
dispatch. Exit status: 0 clean, 1 problems (or a config that does not load), 2 usage error.
"""

PLAN_EPILOG: Final = """\
examples:
  vertex-dispatch plan --config examples/config.yaml --event success-marker.json
  vertex-dispatch plan --config examples/config.yaml --event push.json \\
      --topic projects/acme-ml/topics/training-requests --placement 1 --json

EVENT.json is a structured-mode CloudEvent, e.g.
  {"specversion": "1.0", "type": "google.cloud.storage.object.v1.finalized",
   "source": "//storage.googleapis.com/projects/_/buckets/acme-datasets",
   "subject": "objects/imagenet/2026-12-01/_SUCCESS", "id": "1",
   "data": {"bucket": "acme-datasets", "name": "imagenet/2026-12-01/_SUCCESS",
            "generation": "1733100000000000", "metageneration": "1", "size": "0"}}
or a plain Pub/Sub push body {"message": {"data": ..., "messageId": ...}, "subscription": ...},
converted as functions-framework converts it (--topic stands for the push URL's path).

Nothing is written or created: no ledger entry, no Vertex AI or Pub/Sub call. Persistent
resources and manifests are not read (live checks skipped). Exit status: 0 the first placement
planned is valid, 1 the event is rejected or the job is invalid, 2 usage error (or a retry
message, which only the ledger can plan), 3 the event matches no route.
"""


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
    _add_validate(commands)
    _add_plan(commands)
    _add_operator_commands(commands)
    _add_deploy_plan(commands)
    return parser


def _add_validate(commands: argparse._SubParsersAction) -> None:
    validate = commands.add_parser(
        "validate",
        help="lint a config: every template rendered on every placement and checked",
        description=(
            "Load the config, render every template on every placement of its chain with\n"
            "sample parameters, and check each job against the FLEX_START, machine, label\n"
            "and guard rules."
        ),
        epilog=VALIDATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    validate.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    validate.add_argument("--json", action="store_true", help="print one JSON verdict")
    validate.set_defaults(handler=_run_validate)


def _add_plan(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser(
        "plan",
        help="show the CustomJob an event would create, and its verdict, without side effects",
        description=(
            "Decode an event, route it, render the job of attempt 1 for each placement of the\n"
            "template's chain and validate it offline. Prints the route, the run key and id,\n"
            "the parameters, each CustomJob as REST JSON with its parent, and the violations."
        ),
        epilog=PLAN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    plan.add_argument(
        "--event",
        required=True,
        type=Path,
        metavar="EVENT.json",
        help="a structured-mode CloudEvent or a plain Pub/Sub push body, as JSON",
    )
    plan.add_argument(
        "--topic",
        metavar="projects/P/topics/T",
        help="the topic of a plain Pub/Sub push body (functions-framework reads it from the URL)",
    )
    plan.add_argument(
        "--placement",
        type=_placement_index,
        metavar="N",
        help="plan only placement N of the chain (0 is the first); default: every placement",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON document")
    plan.set_defaults(handler=_run_plan)


def _placement_index(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a placement index; give 0 for the first placement, 1 for the next..."
        )
    return int(text)


# --- validate --------------------------------------------------------------------------------


def _run_validate(args: argparse.Namespace) -> int:
    from shared import validation

    config = _load_config_or_report(args.config, "validate", as_json=args.json)
    if config is None:
        return EXIT_PROBLEMS
    problems = validation.check_templates(config)
    if args.json:
        _print_json(
            {
                "ok": not problems,
                "config": args.config,
                "routes": len(config.routes),
                "templates": len(config.templates),
                "problems": [_problem_document(problem) for problem in problems],
            }
        )
    else:
        for problem in problems:
            print(f"{problem.where}: {_violation_line(problem.violation)}")
        print(_validate_summary(config, len(problems)))
    return EXIT_PROBLEMS if problems else EXIT_OK


def _validate_summary(config: Config, problem_count: int) -> str:
    if problem_count:
        noun = "problem" if problem_count == 1 else "problems"
        return f"config {config.source}: {problem_count} {noun}"
    return f"config OK: {len(config.routes)} routes, {len(config.templates)} templates"


def _problem_document(problem: TemplateProblem) -> dict[str, str]:
    return {"where": problem.where, **_violation_document(problem.violation)}


def _load_config_or_report(source: str, command: str, *, as_json: bool) -> Config | None:
    """The config, or None after reporting why it does not load (it names file and key paths)."""
    from shared.config.loader import load_config
    from shared.config.problems import InvalidConfig
    from shared.errors import DispatchError

    try:
        return load_config(source)
    except DispatchError as error:  # ConfigError, or Cloud Storage unavailable for gs://
        if as_json:
            listed = error.problems if isinstance(error, InvalidConfig) else ()
            _print_json(
                {
                    "ok": False,
                    "config": source,
                    "error": str(error),
                    "config_problems": [{"path": p.path, "message": p.message} for p in listed],
                }
            )
        else:
            _fail(command, str(error))
        return None


# --- plan ------------------------------------------------------------------------------------


def _run_plan(args: argparse.Namespace) -> int:
    from shared import planning
    from shared.errors import ConfigError

    try:
        text = args.event.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        _fail("plan", f"cannot read --event {args.event} ({error}); give a UTF-8 JSON file")
        return EXIT_USAGE
    config = _load_config_or_report(args.config, "plan", as_json=args.json)
    if config is None:
        return EXIT_PROBLEMS
    try:
        plan = planning.plan_event_json(
            config, text, topic=args.topic, placement_index=args.placement
        )
    except planning.PlanUsageError as error:
        _fail("plan", str(error))
        return EXIT_USAGE
    except ConfigError as error:  # a route the loader let through fails on this event
        _fail("plan", str(error))
        return EXIT_PROBLEMS
    if args.json:
        _print_json(_plan_document(plan))
    else:
        print(_plan_text(plan))
    return PLAN_EXIT_CODES[plan.verdict.value]


def _plan_text(plan: Plan) -> str:
    lines = [f"event: {plan.trigger}"] if plan.trigger else []
    if not plan.route:
        lines.append(f"verdict: {plan.verdict.value}: {plan.reason}")
        return "\n".join(lines)
    lines += [
        f"route: {plan.route}",
        f"template: {plan.template}",
        f"run key: {plan.run_key}",
        f"run id: {plan.run_id}",
        "params:",
        *(f"  {name} = {value}" for name, value in sorted(plan.params.items())),
    ]
    if plan.manifest_uri:
        lines.append(
            f"manifest: {plan.manifest_uri} (not read: dispatch checks that every file it lists "
            "exists before creating the job)"
        )
    for placement in plan.placements:
        lines += ["", *_placement_text(placement)]
    lines += ["", f"verdict: {plan.verdict.value}: {_plan_conclusion(plan)}"]
    return "\n".join(lines)


def _placement_text(placement: PlacementPlan) -> list[str]:
    lines = [f"placement[{placement.index}]: {placement.placement}"]
    if placement.job_json is not None:
        lines += [f"parent: {placement.parent}", placement.job_json]
    if placement.violations:
        count = len(placement.violations)
        lines.append(f"invalid: {count} violation{'s' if count > 1 else ''}")
        lines += [f"  {_violation_line(violation)}" for violation in placement.violations]
    else:
        lines.append("valid (offline rules)")
    lines.append(placement.skipped_checks)
    return lines


def _plan_conclusion(plan: Plan) -> str:
    first = plan.placements[0] if plan.placements else None
    if first is None:
        return "the template has no placement"
    if first.valid:
        return f"dispatch would create the job on placement[{first.index}] if its live checks pass"
    return (
        f"the job on placement[{first.index}] breaks the rules above: dispatch would reject the "
        "run and alert"
    )


def _plan_document(plan: Plan) -> dict[str, Any]:
    return {
        "verdict": plan.verdict.value,
        "reason": plan.reason,
        "trigger": plan.trigger,
        "route": plan.route,
        "template": plan.template,
        "run_key": plan.run_key,
        "run_id": plan.run_id,
        "params": dict(plan.params),
        "manifest_uri": plan.manifest_uri,
        "placements": [
            {
                "index": placement.index,
                "placement": placement.placement,
                "parent": placement.parent,
                "custom_job": json.loads(placement.job_json) if placement.job_json else None,
                "valid": placement.valid,
                "violations": [_violation_document(v) for v in placement.violations],
                "skipped_checks": placement.skipped_checks,
            }
            for placement in plan.placements
        ],
    }


# --- operator: status, retry, cancel ---------------------------------------------------------

CONFIG_ENV: Final = "VERTEX_DISPATCH_CONFIG"
OPERATOR_CONFIG_HELP: Final = f"{CONFIG_HELP} (default: ${CONFIG_ENV})"
STATUS_LIMIT: Final = 500
STATUS_COLUMNS: Final = (
    "RUN",
    "STATUS",
    "TEMPLATE",
    "ATTEMPT",
    "PLACEMENT",
    "STATE",
    "NEXT RETRY",
    "ALERTS",
    "JOB",
)


def _add_operator_commands(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status",
        help="list runs: their attempts, job states and next retry",
        description="List the runs in the ledger, newest first: active runs unless --all.",
    )
    status.add_argument("--config", metavar="FILE", help=OPERATOR_CONFIG_HELP)
    status.add_argument("--json", action="store_true", help="print the runs as JSON")
    status.add_argument("--all", action="store_true", help="include finished runs")
    status.add_argument(
        "--limit", type=int, default=STATUS_LIMIT, help="at most this many runs (%(default)s)"
    )
    status.set_defaults(handler=_run_status)
    retry = commands.add_parser(
        "retry",
        help="start the next attempt of a run, from the first placement",
        description=(
            "Publish a retry message for RUN's next attempt (placement 0, reason 'operator') on "
            "the config's requests_topic; dispatch validates and submits it like any request."
        ),
    )
    retry.add_argument("run_id", metavar="RUN", help="the run id, r- and 24 hex digits")
    retry.add_argument("--config", metavar="FILE", help=OPERATOR_CONFIG_HELP)
    retry.set_defaults(handler=_run_retry)
    cancel = commands.add_parser(
        "cancel",
        help="cancel the job of a run's last attempt",
        description=(
            "Ask Vertex AI to cancel RUN's last job; the job-state function then records it "
            "CANCELLED (a cancelled run is never retried)."
        ),
    )
    cancel.add_argument("run_id", metavar="RUN", help="the run id, r- and 24 hex digits")
    cancel.add_argument("--config", metavar="FILE", help=OPERATOR_CONFIG_HELP)
    cancel.set_defaults(handler=_run_cancel)


def _operator_config(args: argparse.Namespace) -> Config | None:
    import os

    source = args.config or os.environ.get(CONFIG_ENV)
    if not source:
        _fail(args.command, f"no config: pass --config FILE or set {CONFIG_ENV}")
        return None
    return _load_config_or_report(source, args.command, as_json=False)


def _operator_ledger(config: Config) -> Ledger:
    from shared.ledger import default_ledger

    return default_ledger(config.project)


def _run_status(args: argparse.Namespace) -> int:
    from shared.errors import DispatchError
    from shared.ledger import RunStatus, utc_now

    config = _operator_config(args)
    if config is None:
        return EXIT_PROBLEMS
    statuses = list(RunStatus) if args.all else [s for s in RunStatus if not s.is_terminal()]
    try:
        snapshots = _operator_ledger(config).list_runs(statuses, limit=args.limit)
    except DispatchError as error:
        _fail("status", str(error))
        return EXIT_PROBLEMS
    runs = sorted((s.run for s in snapshots), key=_created_key, reverse=True)
    if args.json:
        _print_json({"runs": [run_document(run) for run in runs]})
    else:
        print(status_table(runs, utc_now()))
    return EXIT_OK


def _created_key(run: Run) -> str:
    return run.created_at.isoformat() if run.created_at else ""


def status_table(runs: Sequence[Run], now: datetime) -> str:
    """The runs as an aligned text table, one line per run (its last attempt shown)."""
    rows = [STATUS_COLUMNS, *(_status_row(run, now) for run in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(STATUS_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    footer = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    return "\n".join([*(line.rstrip() for line in lines), footer])


def _status_row(run: Run, now: datetime) -> tuple[str, ...]:
    last = run.last_attempt
    retry = run.next_retry
    next_retry = "-"
    if retry is not None:
        wait = int((retry.at - now).total_seconds())
        when = f"in {wait}s" if wait > 0 else "due"
        next_retry = f"#{retry.attempt} {when} ({retry.reason})"
    return (
        run.run_id,
        run.status.value,
        run.template or "-",
        str(last.number) if last else "-",
        _placement_text_of(last.placement) if last else "-",
        last.state.removeprefix("JOB_STATE_") if last else "-",
        next_retry,
        ",".join(run.alerts) or "-",
        last.job_name.rsplit("/", 1)[-1] if last and last.job_name else "-",
    )


def _placement_text_of(record: Mapping[str, Any]) -> str:
    flex = record.get("flex_start")
    if flex is not None:
        return f"flex_start {flex.get('max_wait', '')}".strip() + (
            f" {flex['region']}" if flex.get("region") else ""
        )
    return f"pool {record.get('persistent_resource', '?')}"


def run_document(run: Run) -> dict[str, Any]:
    """A run as `status --json` prints it: the ledger document, timestamps as RFC 3339."""
    from shared.ledger import run_to_document

    return json.loads(json.dumps(run_to_document(run), default=_json_default))


def _json_default(value: object) -> str:
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


def _run_retry(args: argparse.Namespace) -> int:
    from shared import retries
    from shared.errors import DispatchError
    from shared.ledger import REOPENABLE_STATUSES, RetryPlan, utc_now

    config = _operator_config(args)
    if config is None:
        return EXIT_PROBLEMS
    if config.requests_topic is None:
        _fail("retry", f"config {config.source} has no requests_topic to publish the retry on")
        return EXIT_PROBLEMS
    try:
        snapshot = _operator_ledger(config).get_run(args.run_id)
        if snapshot is None:
            _fail("retry", f"run {args.run_id} is not in the ledger; `status --all` lists runs")
            return EXIT_PROBLEMS
        run = snapshot.run
        last = run.last_attempt
        if run.status.is_terminal() and run.status not in REOPENABLE_STATUSES:
            _fail("retry", f"run {run.run_id} is {run.status.value}: there is nothing to retry")
            return EXIT_PROBLEMS
        plan = RetryPlan(utc_now(), last.number + 1 if last else 1, 0, retries.OPERATOR_REASON)
        message_id = retries.publish_retry(run.run_id, plan, config.requests_topic)
    except DispatchError as error:
        _fail("retry", str(error))
        return EXIT_PROBLEMS
    print(
        f"retry of run {run.run_id} published (message {message_id}): attempt {plan.attempt} "
        f"from placement 0 on {config.requests_topic}"
    )
    return EXIT_OK


def _run_cancel(args: argparse.Namespace) -> int:
    from shared.errors import DispatchError

    config = _operator_config(args)
    if config is None:
        return EXIT_PROBLEMS
    try:
        snapshot = _operator_ledger(config).get_run(args.run_id)
        last = snapshot.run.last_attempt if snapshot else None
        if last is None or last.job_name is None:
            _fail("cancel", f"run {args.run_id} has no job to cancel; `status --all` lists runs")
            return EXIT_PROBLEMS
        from shared import vertex

        vertex.cancel_custom_job(last.job_name)
    except DispatchError as error:
        _fail("cancel", str(error))
        return EXIT_PROBLEMS
    print(f"cancel requested for {last.job_name} (run {args.run_id}, attempt {last.number})")
    return EXIT_OK


# --- deploy-plan -----------------------------------------------------------------------------

DEFAULT_SOURCE_ZIP: Final = Path("build/vertex-dispatch-source.zip")


def _add_deploy_plan(commands: argparse._SubParsersAction) -> None:
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
    import yaml

    from shared import deployplan

    config = _load_config_or_report(args.config, "deploy-plan", as_json=args.json)
    if config is None:
        return EXIT_PROBLEMS
    plan = deployplan.deploy_plan(config, prefix=args.prefix)
    if args.json:
        _print_json(deployplan.plan_document(plan))
    else:
        print(deployplan.plan_text(plan))
    if not plan.deployable:
        return EXIT_PROBLEMS
    if args.tfvars is not None:
        config_file = Path(args.config)
        raw = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        variables = deployplan.tfvars(
            plan,
            config_file=config_file,
            source_zip=args.source_zip,
            extra_files=deployplan.referenced_files(raw),
        )
        args.tfvars.write_text(json.dumps(variables, indent=2) + "\n", encoding="utf-8")
        print(f"Terraform variables written to {args.tfvars}", file=sys.stderr)
    return EXIT_OK


# --- output ----------------------------------------------------------------------------------


def _violation_line(violation: Violation) -> str:
    return f"{violation.field}: {violation.rule}: {violation.message}"


def _violation_document(violation: Violation) -> dict[str, str]:
    return {
        "field": violation.field,
        "rule": str(violation.rule),
        "kind": str(violation.kind),
        "message": violation.message,
    }


def _print_json(document: Mapping[str, Any]) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False))


def _fail(command: str, message: str) -> None:
    print(f"vertex-dispatch {command}: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
