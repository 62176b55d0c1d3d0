"""``vertex-dispatch validate`` and ``plan``: lint a config, or show the job an event would create.

Both run offline: nothing is written or created, persistent resources and manifests are not read.
``validate`` reports the problems of loading the config and those of the jobs its templates
render in one format (``PATH: RULE: MESSAGE``, the path as the user wrote it) on stdout, or in
one JSON document.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from shared.model.job_kinds import JobKind
from tooling.common import (
    CONFIG_HELP,
    EXIT_NO_ROUTE,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    fail,
    load_config_or_report,
    no_credentials,
    print_json,
)

if TYPE_CHECKING:
    from shared.config.model import Config
    from shared.config.problems import Problem as ConfigProblem
    from shared.model.runs import Run
    from shared.validation import TemplateProblem, Violation
    from tooling.planning import PlacementPlan, Plan

# planning.PlanVerdict value -> exit status of `plan`.
PLAN_EXIT_CODES: Final[Mapping[str, int]] = {
    "valid": EXIT_OK,
    "invalid": EXIT_PROBLEMS,
    "rejected": EXIT_PROBLEMS,
    "no_route": EXIT_NO_ROUTE,
    "not_routed": EXIT_USAGE,
}

VALIDATE_EPILOG: Final = """\
examples:
  vertex-dispatch validate --config examples/config.yaml
  vertex-dispatch validate --config gs://acme-config/vertex-dispatch.yaml --json

The report goes to stdout: one line per problem,  PATH: RULE: MESSAGE,  then a summary.
PATH is the key as written in the config (inside a referenced file: KEY(FILE).field...):
  templates.resnet-a100.worker_pools[0].replica: config: unknown key 'replica'; did you ...
  templates.resnet-a100.worker_pools[0].accelerator.type: flex-start-gpu: ... (on placement[1])
RULE is "config" (or a guard-* or spot-gpu rule) for a problem found while loading the file;
the jobs of a config that does not load are checked once it does. Otherwise RULE is the rule the
job rendered for a placement breaks; "(on placement[N])" ends a problem that only some
placements have. --json prints the same problems in one document. Persistent resources are not
read: their state, pools and free replicas are checked live by dispatch.
Exit status: 0 clean, 1 problems (or a config that cannot be read at all, said on stderr),
2 usage error,
141 the output's reader left before all of it was written (`| head`), whatever the verdict.
"""

PLAN_EPILOG: Final = """\
examples (from the repository's root; examples/events/ holds one event of each kind):
  vertex-dispatch plan --config examples/config.yaml --event examples/events/success-marker.json
  vertex-dispatch plan --config examples/config.yaml --event examples/events/job-request.json \\
      --topic projects/acme-ml/topics/training-requests --placement 1 --json

EVENT.json is a structured-mode CloudEvent, e.g.
  {"specversion": "1.0", "type": "google.cloud.storage.object.v1.finalized",
   "source": "//storage.googleapis.com/projects/_/buckets/acme-datasets",
   "subject": "objects/imagenet/2026-12-01/_SUCCESS", "id": "1",
   "data": {"bucket": "acme-datasets", "name": "imagenet/2026-12-01/_SUCCESS",
            "generation": "1796172000123456", "metageneration": "1", "size": "0"}}
or a plain Pub/Sub push body {"message": {"data": ..., "messageId": ...}, "subscription": ...},
converted as functions-framework converts it (--topic stands for the push URL's path).
The shipped events: success-marker.json (valid, exit 0), shard.json (a shard beside the
marker: no route, exit 3), job-request.json and scheduler-tick.json (push bodies: valid, 0).

Nothing is written or created: no ledger entry, no Vertex AI or Pub/Sub call. Persistent
resources and manifests are not read (live checks skipped). The placements are listed in the
order dispatch would try them, with why; for a template with placement_order: learned,
--history-from-ledger reads (never writes) the template's recent runs in the ledger to learn it,
and without it, or when the ledger cannot be read, the chain is shown as written.
Exit status: 0 the first placement planned is valid, 1 the event is rejected or the job is
invalid, 2 usage error (or a retry message, which only the ledger can plan), 3 the event matches
no route, 141 the output's reader left before all of it was written (`| head`), whatever
the verdict.
"""


def add_validate(commands: argparse._SubParsersAction) -> None:
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


def add_plan(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser(
        "plan",
        help="show the job an event would create, and its verdict, without side effects",
        description=(
            "Decode an event, route it, render the job of attempt 1 for each placement of the\n"
            "template's chain and validate it offline. Prints the route, the run key and id,\n"
            "the parameters, each job (CustomJob, HyperparameterTuningJob or TrainingPipeline)\n"
            "as REST JSON with its parent, and the violations."
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
    plan.add_argument(
        "--history-from-ledger",
        action="store_true",
        help=(
            "for a placement_order: learned template, order the chain from the template's recent "
            "runs in the ledger (read only); default, or when the ledger cannot be read: as written"
        ),
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
    """The report: one line (or JSON entry) per problem, load problems and rule problems alike."""
    from shared import validation
    from shared.config.problems import InvalidConfig

    try:
        config = _load(args.config)
    except InvalidConfig as error:  # the config does not load: its problems are the report
        report = [_LintLine.from_config(problem) for problem in error.problems]
        return _report(args, report, config=None)
    except _Unreadable as error:  # no report to give: the file could not be read at all
        if args.json:
            print_json(_validate_document(args.config, None, [], error=str(error)))
        else:
            fail("validate", str(error))
        return EXIT_PROBLEMS
    report = [_LintLine.from_template(problem) for problem in validation.check_templates(config)]
    return _report(args, report, config=config)


class _Unreadable(Exception):
    """The config could not be read (no file, no credentials): a command error, not a report."""


def _load(source: str) -> Config:
    from google.auth.exceptions import GoogleAuthError

    from shared.adapters.config_source import load_config
    from shared.config.problems import InvalidConfig
    from shared.model.errors import DispatchError

    try:
        return load_config(source)
    except InvalidConfig:
        raise
    except GoogleAuthError as error:  # a gs:// config without credentials
        raise _Unreadable(no_credentials(f"read the config {source}", error)) from error
    except DispatchError as error:  # ConfigError: the file is missing or unreadable
        raise _Unreadable(str(error)) from error


@dataclass(frozen=True)
class _LintLine:
    """One problem of the report, whichever check found it: ``PATH: RULE: MESSAGE``."""

    path: str  # the config key path the user wrote; "" for the document itself
    rule: str  # "config" for a problem found while loading, else a validation rule id
    message: str
    kind: str = "invalid"
    field: str | None = None  # the rendered job's REST field, for a rule checked on the job
    placements: tuple[int, ...] = ()  # the placements of the chain it holds on, if rendered

    @classmethod
    def from_config(cls, problem: ConfigProblem) -> _LintLine:
        return cls(problem.path, problem.rule, problem.message)

    @classmethod
    def from_template(cls, problem: TemplateProblem) -> _LintLine:
        violation = problem.violation
        return cls(
            problem.path,
            problem.rule,
            problem.message,
            kind=str(violation.kind),
            field=violation.field,
            placements=problem.placements,
        )

    def __str__(self) -> str:
        return f"{self.path or '(top level)'}: {self.rule}: {self.message}"


def _report(args: argparse.Namespace, report: list[_LintLine], *, config: Config | None) -> int:
    if args.json:
        print_json(_validate_document(args.config, config, report))
    else:
        for line in report:
            print(line)
        print(_validate_summary(args.config, config, len(report)))
    return EXIT_PROBLEMS if report or config is None else EXIT_OK


def _validate_summary(source: str, config: Config | None, problem_count: int) -> str:
    noun = "problem" if problem_count == 1 else "problems"
    if config is None:
        return (
            f"config {source}: {problem_count} {noun}; it does not load, so the jobs its "
            "templates render were not checked yet"
        )
    if problem_count:
        return f"config {source}: {problem_count} {noun}"
    return f"config OK: {len(config.routes)} routes, {len(config.templates)} templates"


def _validate_document(
    source: str, config: Config | None, report: list[_LintLine], *, error: str | None = None
) -> dict[str, Any]:
    """The --json verdict: the same problems as the text, and the same shape whatever failed."""
    return {
        "ok": config is not None and not report,
        "config": source,
        "loaded": config is not None,
        "routes": len(config.routes) if config is not None else None,
        "templates": len(config.templates) if config is not None else None,
        "error": error,
        "problems": [
            {
                "path": line.path,
                "rule": line.rule,
                "message": line.message,
                "kind": line.kind,
                "field": line.field,
                "placements": list(line.placements),
            }
            for line in report
        ],
    }


# --- plan ------------------------------------------------------------------------------------


def _run_plan(args: argparse.Namespace) -> int:
    from shared.model.errors import ConfigError
    from tooling import planning

    try:
        text = args.event.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        fail("plan", f"cannot read --event {args.event} ({error}); give a UTF-8 JSON file")
        return EXIT_USAGE
    config = load_config_or_report(args.config, "plan", as_json=args.json)
    if config is None:
        return EXIT_PROBLEMS
    history = _ledger_history(config) if args.history_from_ledger else None
    try:
        plan = planning.plan_event_json(
            config, text, topic=args.topic, placement_index=args.placement, history=history
        )
    except planning.PlanUsageError as error:
        fail("plan", str(error))
        return EXIT_USAGE
    except ConfigError as error:  # a route the loader let through fails on this event
        fail("plan", str(error))
        return EXIT_PROBLEMS
    if args.json:
        print_json(_plan_document(plan))
    else:
        print(_plan_text(plan))
    return PLAN_EXIT_CODES[plan.verdict.value]


def _ledger_history(config: Config) -> Callable[[str], Sequence[Run]]:
    """A reader of a template's recent runs in the config's ledger, for ``--history-from-ledger``;
    what stops it (no credentials, no ledger reachable) is ``HistoryUnavailable``."""
    from tooling import planning

    def read(template: str) -> Sequence[Run]:
        from google.auth.exceptions import GoogleAuthError

        from shared.adapters.ledger import default_ledger
        from shared.model.errors import DispatchError

        try:
            return [
                snapshot.run for snapshot in default_ledger(config.project).recent_runs(template)
            ]
        except GoogleAuthError as error:
            raise planning.HistoryUnavailable(no_credentials("read the ledger", error)) from error
        except DispatchError as error:
            raise planning.HistoryUnavailable(str(error)) from error

    return read


def _order_text(plan: Plan) -> list[str]:
    order = plan.placement_order
    if order is None:
        return []
    head = ", ".join(str(index) for index in order.order)
    lines = [f"placement order: {head} ({order.source})"]
    if order.learned:  # as written, every placement gives the same reason: the line says it
        lines += [f"  placement[{index}]: {order.reasons[index]}" for index in order.order]
    return lines


def _order_document(plan: Plan) -> dict[str, Any] | None:
    order = plan.placement_order
    if order is None:
        return None
    return {
        "order": list(order.order),
        "learned": order.learned,
        "source": order.source,
        "explored": order.explored,
        "reasons": {str(index): order.reasons[index] for index in order.order},
    }


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
        *_order_text(plan),
    ]
    if plan.manifest_uri:
        lines.append(
            f"manifest: {plan.manifest_uri} (not read: dispatch checks that every file it lists "
            "exists before creating the job)"
        )
    if plan.quiet:
        captures = ", ".join(
            f"{name} = {value}" for name, value in sorted(plan.quiet.captures.items())
        )
        lines += [
            f"dataset: {plan.quiet.dataset_uri}" + (f" ({captures})" if captures else ""),
            f"waits: {plan.quiet.waiting_text()}",
        ]
    for placement in plan.placements:
        lines += ["", *_placement_text(placement)]
    lines += ["", f"verdict: {plan.verdict.value}: {_plan_conclusion(plan)}"]
    return "\n".join(lines)


def _placement_text(placement: PlacementPlan) -> list[str]:
    lines = [f"placement[{placement.index}]: {placement.placement}"]
    if placement.job_json is not None:
        lines += [f"parent: {placement.parent}", f"kind: {placement.kind.resource}"]
        lines.append(placement.job_json)
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
    if first.valid and plan.quiet:
        return (
            f"dispatch would record the dataset as waiting; once it is quiet, the job on "
            f"placement[{first.index}] would be created if its live checks pass"
        )
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
        "quiet": _quiet_document(plan),
        "placement_order": _order_document(plan),
        "placements": [
            {
                "index": placement.index,
                "placement": placement.placement,
                "parent": placement.parent,
                "job_kind": placement.kind.value,
                "job": json.loads(placement.job_json) if placement.job_json else None,
                # Kept for readers of CustomJob plans: the same job, for that kind only.
                "custom_job": (
                    json.loads(placement.job_json)
                    if placement.job_json and placement.kind is JobKind.CUSTOM_JOB
                    else None
                ),
                "valid": placement.valid,
                "violations": [_violation_document(v) for v in placement.violations],
                "skipped_checks": placement.skipped_checks,
            }
            for placement in plan.placements
        ],
    }


def _quiet_document(plan: Plan) -> dict[str, Any] | None:
    if plan.quiet is None:
        return None
    return {
        "dataset_uri": plan.quiet.dataset_uri,
        "captures": dict(plan.quiet.captures),
        "quiet_for": plan.quiet.quiet_for,
        "min_objects": plan.quiet.min_objects,
        "after_start": plan.quiet.after_start,
        "waiting": plan.quiet.waiting_text(),
    }


def _violation_line(violation: Violation) -> str:
    return f"{violation.field}: {violation.rule}: {violation.message}"


def _violation_document(violation: Violation) -> dict[str, str]:
    return {
        "field": violation.field,
        "rule": str(violation.rule),
        "kind": str(violation.kind),
        "message": violation.message,
    }
