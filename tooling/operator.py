"""``vertex-dispatch status``, ``retry`` and ``cancel``: the operator's view of runs, and actions.

``status RUN --history`` shows each attempt's timeline instead of the table
(``tooling.history_view``: the job states with their times, time to start, how it ended).

``status --placements`` shows the placements cooling down after a capacity failure instead of the
runs (``shared.policy.cooldown``): new attempts try them after the other placements of their chain.

They read the ledger (Firestore) named by the config; ``retry`` publishes on the requests topic and
``cancel`` asks Vertex AI, so dispatch and the job-state function do the rest. A run id is checked
for its shape before any client is built (a usage error, exit 2), and each command refuses, with
what to do instead, what the ledger shows cannot work: retrying a run refused before any template
was chosen or whose template the config lost, cancelling a run that has already ended.

Under a run WAITING_DATA, ``status`` says what data it waits for and when it will have it
(``tooling.data_status``: a quiet dataset is counted live in Cloud Storage, since the ledger keeps
no per-shard count); ``--waiting`` lists only those runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from shared.model.runkeys import RUN_ID_HEX_DIGITS, RUN_ID_PREFIX, is_run_id
from tooling.common import (
    CONFIG_HELP,
    EXIT_OK,
    EXIT_PROBLEMS,
    fail,
    load_config_or_report,
    no_credentials,
    print_json,
)

if TYPE_CHECKING:
    from datetime import datetime

    from shared.adapters.ledger import Ledger, Run, RunSnapshot
    from shared.config.model import Config
    from shared.model.cooldowns import Cooldown
    from tooling.data_status import WaitView

CONFIG_ENV: Final = "VERTEX_DISPATCH_CONFIG"
OPERATOR_CONFIG_HELP: Final = f"{CONFIG_HELP} (default: ${CONFIG_ENV})"
STATUS_LIMIT: Final = 500
RUN_ID_SHAPE: Final = f"{RUN_ID_PREFIX} and {RUN_ID_HEX_DIGITS} lowercase hex digits"
RUN_ID_EXAMPLE: Final = RUN_ID_PREFIX + ("0123456789abcdef" * 2)[:RUN_ID_HEX_DIGITS]
RUN_HELP: Final = f"the run id, {RUN_ID_SHAPE}, as `status` lists it"
STATUS_COLUMNS: Final = (
    "RUN",
    "STATUS",
    "TEMPLATE",
    "ATTEMPT",
    "PLACEMENT",
    "STATE",
    "NEXT RETRY",
    "ALERTS",
    "KIND",
    "JOB",
)
PLACEMENT_COLUMNS: Final = (
    "KIND",
    "REGION",
    "MACHINE",
    "COOLING UNTIL",
    "LEFT",
    "SINCE",
    "RUN",
    "REASON",
)
REASON_CELL_CHARS: Final = 80


def add_operator_commands(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status",
        help="list runs: their attempts, job states and next retry",
        description=(
            "List the runs in the ledger, newest first: active runs unless --all, or the runs "
            "named, whatever their status. With --history, the runs named are shown as each "
            "attempt's timeline instead: what it ran on, every job state with its time, how "
            "long it waited to start and how it ended."
        ),
    )
    status.add_argument(
        "run_ids", nargs="*", type=run_id_argument, metavar="RUN", help="only these runs"
    )
    status.add_argument("--config", metavar="FILE", help=OPERATOR_CONFIG_HELP)
    status.add_argument("--json", action="store_true", help="print the runs as JSON")
    status.add_argument(
        "--all",
        action="store_true",
        help="include finished runs (with --placements: cooldowns that ended too)",
    )
    status.add_argument(
        "--waiting",
        action="store_true",
        help=(
            "only the runs waiting for their data (WAITING_DATA): a quiet dataset (counted live "
            "in Cloud Storage) or a manifest's missing files"
        ),
    )
    status.add_argument(
        "--placements",
        action="store_true",
        help=(
            "list the placements cooling down after a capacity failure (tried after the "
            "others by new attempts), and until when, instead of runs"
        ),
    )
    status.add_argument(
        "--history",
        action="store_true",
        help=(
            "with RUN ids: each attempt's timeline instead of the table: placement kind, "
            "region, machine, GPUs, every job state with its time, time to start and how it "
            "ended (with --json: each attempt's readings under 'history')"
        ),
    )
    status.add_argument(
        "--limit",
        type=int,
        default=STATUS_LIMIT,
        help="at most this many runs, the newest (%(default)s)",
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
    retry.add_argument("run_id", type=run_id_argument, metavar="RUN", help=RUN_HELP)
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
    cancel.add_argument("run_id", type=run_id_argument, metavar="RUN", help=RUN_HELP)
    cancel.add_argument("--config", metavar="FILE", help=OPERATOR_CONFIG_HELP)
    cancel.set_defaults(handler=_run_cancel)


def run_id_argument(text: str) -> str:
    """``text`` if it has a run id's shape; else argparse reports a usage error (exit 2)."""
    if not is_run_id(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a run id: expected {RUN_ID_SHAPE}, e.g. {RUN_ID_EXAMPLE} "
            "(`vertex-dispatch status --all` lists the runs)"
        )
    return text


# What each command could not do without credentials, for its one-line report.
_NEEDS_CREDENTIALS_TO: Final[Mapping[str, str]] = {
    "status": "read the run ledger (Firestore)",
    "retry": "read the run ledger (Firestore) or publish the retry (Pub/Sub)",
    "cancel": "read the run ledger (Firestore) or cancel the job (Vertex AI)",
}


def _operator_failure(command: str, error: Exception) -> int:
    """Report a DispatchError or a GoogleAuthError met while talking to Google Cloud."""
    from google.auth.exceptions import GoogleAuthError

    if isinstance(error, GoogleAuthError):
        fail(command, no_credentials(_NEEDS_CREDENTIALS_TO[command], error))
    else:
        fail(command, str(error))
    return EXIT_PROBLEMS


def _operator_config(args: argparse.Namespace) -> Config | None:
    import os

    source = args.config or os.environ.get(CONFIG_ENV)
    if not source:
        fail(args.command, f"no config: pass --config FILE or set {CONFIG_ENV}")
        return None
    return load_config_or_report(source, args.command, as_json=False)


def _operator_ledger(config: Config) -> Ledger:
    from shared.adapters.ledger import default_ledger

    return default_ledger(config.project)


def _run_status(args: argparse.Namespace) -> int:
    from google.auth.exceptions import GoogleAuthError

    from shared.adapters.ledger import RunStatus, utc_now
    from shared.model.errors import DispatchError

    config = _operator_config(args)
    if config is None:
        return EXIT_PROBLEMS
    if args.placements:
        return _placements_status(args, config)
    if args.waiting and args.all:
        fail("status", "--waiting lists the runs waiting for data: leave out --all")
        return EXIT_PROBLEMS
    if args.history and not args.run_ids:
        fail(
            "status",
            "--history shows the timelines of the runs named: pass one or more RUN ids "
            "(`vertex-dispatch status --all` lists them)",
        )
        return EXIT_PROBLEMS
    statuses = list(RunStatus) if args.all else [s for s in RunStatus if not s.is_terminal()]
    if args.waiting:
        statuses = [RunStatus.WAITING_DATA]
    missing: list[str] = []
    try:
        ledger = _operator_ledger(config)
        if args.run_ids:
            found = {run_id: ledger.get_run(run_id) for run_id in dict.fromkeys(args.run_ids)}
            snapshots = [snapshot for snapshot in found.values() if snapshot is not None]
            missing = [run_id for run_id, snapshot in found.items() if snapshot is None]
        else:
            snapshots = ledger.list_runs(statuses, limit=args.limit, newest_first=True)
    except (DispatchError, GoogleAuthError) as error:
        return _operator_failure("status", error)
    runs = sorted((s.run for s in snapshots), key=_created_key, reverse=True)
    if args.waiting:  # runs named by id are shown only if they wait too
        runs = [run for run in runs if run.status is RunStatus.WAITING_DATA]
    now = utc_now()
    waits = data_waits_of(config, ledger, runs, now)
    from tooling.history_view import history_text, with_history_documents

    if args.json:
        documents = [run_document(run, waits.get(run.run_id)) for run in runs]
        if args.history:
            documents = [
                with_history_documents(document, run, now)
                for document, run in zip(documents, runs, strict=True)
            ]
        print_json({"runs": documents})
    elif args.history:
        print(history_text(runs, now))
    else:
        print(status_table(runs, now, waits))
    for run_id in missing:
        fail("status", f"run {run_id} is not in the ledger; `status --all` lists runs")
    return EXIT_PROBLEMS if missing else EXIT_OK


def _placements_status(args: argparse.Namespace, config: Config) -> int:
    """``status --placements``: the placement cooldowns in the ledger, latest end first."""
    from google.auth.exceptions import GoogleAuthError

    from shared.adapters.ledger import utc_now
    from shared.model.errors import DispatchError

    if args.run_ids:
        fail("status", "--placements lists placements, not runs: leave out the run ids")
        return EXIT_PROBLEMS
    try:
        cooldowns = list(_operator_ledger(config).placement_cooldowns().values())
    except (DispatchError, GoogleAuthError) as error:
        return _operator_failure("status", error)
    now = utc_now()
    shown = sorted(
        (c for c in cooldowns if args.all or c.until > now), key=lambda c: c.until, reverse=True
    )
    if args.json:
        print_json({"placements": [cooldown_document(c, now) for c in shown]})
    else:
        print(placements_table(shown, now))
    return EXIT_OK


def cooldown_document(cooldown: Cooldown, now: datetime) -> dict[str, Any]:
    """A placement cooldown as `status --placements --json` prints it."""
    from shared.model.cooldowns import cooldown_to_document

    document = {"key": cooldown.key, **cooldown_to_document(cooldown)}
    document["cooling"] = cooldown.until > now
    return json.loads(json.dumps(document, default=_json_default))


def placements_table(cooldowns: Sequence[Cooldown], now: datetime) -> str:
    """The placement cooldowns as an aligned text table, one line each."""
    rows = [PLACEMENT_COLUMNS, *(_placement_row(c, now) for c in cooldowns)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(PLACEMENT_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    cooling = sum(1 for c in cooldowns if c.until > now)
    footer = (
        f"{cooling} placement{'s' if cooling != 1 else ''} cooling down (a template with its "
        "own cooldown measures it from SINCE)"
    )
    return "\n".join([*(line.rstrip() for line in lines), footer])


def _placement_row(cooldown: Cooldown, now: datetime) -> tuple[str, ...]:
    left = int((cooldown.until - now).total_seconds())
    reason = " ".join(cooldown.reason.split())
    if len(reason) > REASON_CELL_CHARS:
        reason = reason[: REASON_CELL_CHARS - 1] + "…"
    return (
        cooldown.kind or "-",
        cooldown.region or "-",
        cooldown.machine or "-",
        _rfc3339(cooldown.until),
        f"{left // 60}m{left % 60:02d}s" if left > 0 else "ended",
        _rfc3339(cooldown.since),
        cooldown.run_id or "-",
        reason or "-",
    )


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _created_key(run: Run) -> str:
    return run.created_at.isoformat() if run.created_at else ""


def data_waits_of(
    config: Config, ledger: Ledger, runs: Sequence[Run], now: datetime
) -> dict[str, WaitView]:
    """What each run of ``runs`` WAITING_DATA waits for, its quiet datasets listed live in Cloud
    Storage (``tooling.data_status``)."""
    from tooling.data_status import quiet_rule_of, read_listings, wait_view

    listings = read_listings(config, ledger, runs)
    views: dict[str, WaitView] = {}
    for run in runs:
        route, _ = quiet_rule_of(config, run.route)
        rule = route.quiet if route is not None else None
        view = wait_view(run, rule, listings.get(run.run_id), now, config.data_timeout)
        if view is not None:
            views[run.run_id] = view
    return views


def status_table(
    runs: Sequence[Run], now: datetime, waits: Mapping[str, WaitView] | None = None
) -> str:
    """The runs as an aligned text table, one line per run (its last attempt shown); under a
    run waiting for data, indented lines saying what it waits for (``waits``, by run id)."""
    waits = waits or {}
    rows = [STATUS_COLUMNS, *(_status_row(run, now) for run in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(STATUS_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    shown = [lines[0].rstrip()]
    for run, line in zip(runs, lines[1:], strict=True):
        shown.append(line.rstrip())
        view = waits.get(run.run_id)
        shown.extend(f"  {detail}" for detail in (view.lines if view else ()))
    footer = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    waiting = sum(1 for run in runs if run.status.value == "WAITING_DATA")
    if waiting:
        footer += f", {waiting} waiting for data"
    return "\n".join([*shown, footer])


def _status_row(run: Run, now: datetime) -> tuple[str, ...]:
    from shared.policy.watchdogs import claim_reason

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
        ",".join(dict.fromkeys(claim_reason(claim) for claim in run.alerts)) or "-",
        # The kind the attempt creates (known from its intent on): a job id alone does not say
        # which collection (customJobs, hyperparameterTuningJobs, trainingPipelines) it is in.
        last.job_kind.resource if last else "-",
        last.job_name.rsplit("/", 1)[-1] if last and last.job_name else "-",
    )


def _placement_text_of(record: Mapping[str, Any]) -> str:
    flex = record.get("flex_start")
    if flex is not None:
        return f"flex_start {flex.get('max_wait', '')}".strip() + (
            f" {flex['region']}" if flex.get("region") else ""
        )
    for kind in ("spot", "on_demand", "reservation"):
        fields = record.get(kind)
        if fields is not None:
            # a reservation by its short name: the region says where it is
            name = str(fields.get("name", "")).rsplit("/", 1)[-1]
            return " ".join(part for part in (kind, name, fields.get("region", "")) if part)
    return f"pool {record.get('persistent_resource', '?')}"


def run_document(run: Run, wait: WaitView | None = None) -> dict[str, Any]:
    """A run as `status --json` prints it: the ledger document, timestamps as RFC 3339; a run
    waiting for data has ``waiting_for`` too (``tooling.data_status``: counted live)."""
    from shared.adapters.ledger import run_to_document

    document = run_to_document(run)
    if wait is not None:
        document["waiting_for"] = dict(wait.document)
    return json.loads(json.dumps(document, default=_json_default))


def _json_default(value: object) -> str:
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


def _run_retry(args: argparse.Namespace) -> int:
    from google.auth.exceptions import GoogleAuthError

    from shared.adapters import retry_messages
    from shared.adapters.ledger import (
        LIVE_STATUSES,
        REOPENABLE_STATUSES,
        RetryPlan,
        RunStatus,
        utc_now,
    )
    from shared.model.data_waits import QuietWait
    from shared.model.errors import DispatchError
    from shared.policy.placement_order import start_of_order

    config = _operator_config(args)
    if config is None:
        return EXIT_PROBLEMS
    if config.requests_topic is None:
        fail("retry", f"config {config.source} has no requests_topic to publish the retry on")
        return EXIT_PROBLEMS
    try:
        ledger = _operator_ledger(config)
        snapshot = _known_run(ledger, "retry", args.run_id)
        if snapshot is None:
            return EXIT_PROBLEMS
        run = snapshot.run
        last = run.last_attempt
        if run.status.is_terminal() and run.status not in REOPENABLE_STATUSES:
            fail("retry", f"run {run.run_id} is {run.status.value}: there is nothing to retry")
            return EXIT_PROBLEMS
        refusal = _template_refusal(run, config)
        if refusal:  # dispatch would only reject the retry again
            fail("retry", refusal)
            return EXIT_PROBLEMS
        if run.status in LIVE_STATUSES:  # dispatch would acknowledge the retry and do nothing
            job = f"job {last.job_name}" if last and last.job_name else "a job being created"
            fail(
                "retry",
                f"run {run.run_id} is {run.status.value} with {job}: a second attempt would run "
                f"beside it. Cancel it first (`vertex-dispatch cancel {run.run_id}`), wait until "
                f"`vertex-dispatch status {run.run_id}` shows it ended, then retry",
            )
            return EXIT_PROBLEMS
        if run.status is RunStatus.WAITING_DATA:  # its data is not complete yet
            fail(
                "retry",
                f"run {run.run_id} is WAITING_DATA: it starts by itself once its data is "
                f"complete (`vertex-dispatch status {run.run_id}` says what it waits for and "
                "when). A retry now would train on part of the data; to give up on it, "
                f"`vertex-dispatch cancel {run.run_id}`",
            )
            return EXIT_PROBLEMS
        if isinstance(run.data_wait, QuietWait) and not run.data_wait.complete:
            # Its objects belong to the dataset's next version (policy.arrivals): a job on them
            # here would leave that version to train on them a second time, or never.
            fail(
                "retry",
                f"run {run.run_id} is a version of the dataset {run.data_wait.dataset_uri} that "
                "never completed: it is not retried. Write an object under the dataset: it opens "
                "a new version, which starts once the dataset has been quiet",
            )
            return EXIT_PROBLEMS
        # A run with a learned order starts over from the first placement of its order.
        first = start_of_order(run, config.templates[run.template])
        plan = RetryPlan(
            utc_now(), last.number + 1 if last else 1, first, retry_messages.OPERATOR_REASON
        )
        ledger.grant_operator_attempt(run.run_id, plan.attempt)
        message_id = retry_messages.publish_retry(run.run_id, plan, config.requests_topic)
    except (DispatchError, GoogleAuthError) as error:
        return _operator_failure("retry", error)
    print(
        f"retry of run {run.run_id} published (message {message_id}): attempt {plan.attempt} "
        f"from placement {plan.placement_index} on {config.requests_topic}"
    )
    return EXIT_OK


def _template_refusal(run: Run, config: Config) -> str | None:
    """Why a retry of ``run`` cannot succeed with ``config``'s templates; None if it can."""
    if not run.template:  # refused while decoding or routing: no template was ever chosen
        return (
            f"run {run.run_id} is {run.status.value}: its event was refused before any template "
            "was chosen, so a retry has nothing to run. Fix the sender (the alert and "
            f"`vertex-dispatch status --json {run.run_id}` say what was wrong) and send the event "
            "again"
        )
    if run.template not in config.templates:
        return (
            f"run {run.run_id} runs template {run.template!r}, which config {config.source} does "
            f"not define: restore template {run.template!r} in the config first (and deploy it), "
            "then retry"
        )
    return None


def _run_cancel(args: argparse.Namespace) -> int:
    from google.auth.exceptions import GoogleAuthError

    from shared.adapters.ledger import WAITING_STATUSES, CancelReason
    from shared.model.errors import DispatchError

    config = _operator_config(args)
    if config is None:
        return EXIT_PROBLEMS
    try:
        ledger = _operator_ledger(config)
        snapshot = _known_run(ledger, "cancel", args.run_id)
        if snapshot is None:
            return EXIT_PROBLEMS
        run = snapshot.run
        last = run.last_attempt
        if run.status in WAITING_STATUSES:
            ledger.cancel_waiting(snapshot)
            due = f" (due {run.next_retry.at.isoformat()})" if run.next_retry else ""
            print(
                f"run {run.run_id} was {run.status.value}: cancelled; its next attempt{due} will "
                f"not start (`vertex-dispatch retry {run.run_id}` reopens it)"
            )
            return EXIT_OK
        refusal = _cancel_refusal(run)
        if refusal or last is None or last.job_name is None:
            fail("cancel", refusal or f"run {run.run_id} has no job to cancel")
            return EXIT_PROBLEMS
        from shared.adapters import vertex

        # Noted before the call: a job that exits non-zero on SIGTERM could otherwise be read
        # (by a quick hint) as a failure to retry, a new job after the operator's cancel. If
        # the call then fails, the operator is told and cancels again; the note stands.
        ledger.record_cancel_requested(run.run_id, last.number, CancelReason.OPERATOR)
        vertex.cancel_job(last.job_name)  # of the kind its name's collection names
    except (DispatchError, GoogleAuthError) as error:
        return _operator_failure("cancel", error)
    print(f"cancel requested for {last.job_name} (run {run.run_id}, attempt {last.number})")
    return EXIT_OK


def _known_run(ledger: Ledger, command: str, run_id: str) -> RunSnapshot | None:
    """The run ``run_id`` from the ledger; None, said to the operator, when it is not there."""
    snapshot = ledger.get_run(run_id)
    if snapshot is None:
        fail(command, f"run {run_id} is not in the ledger; `status --all` lists runs")
    return snapshot


def _cancel_refusal(run: Run) -> str | None:
    """Why ``run`` has no job to cancel now, from the ledger alone; None if it has one."""
    status = run.status.value
    last = run.last_attempt
    if run.status.is_terminal():
        return f"run {run.run_id} is {status}: nothing to cancel"
    if last is None or last.job_name is None:
        return (
            f"run {run.run_id} is {status} and has no job yet; once `vertex-dispatch status "
            f"{run.run_id}` names its job, cancel again"
        )
    return None
