"""The configuration text (YAML) to a validated ``Config``.

- ``parse_config``: text to ``Config``, every rule checked, every problem reported at once in one
  ``InvalidConfig`` (a ``ConfigError``) naming the file, each key path, the rule and the fix;
- ``read_file_beside``: how templates' files are read when the caller gives no reader.

Reading the config from a path or a ``gs://`` URI, once per process, is the adapter
``shared.adapters.config_source``.

The sections are read by their own modules (``routes``, ``templates``, ``guards``, ...); this one
reads the top level and runs the checks that span sections. Nothing here imports a Google Cloud
client: an event that matches no route must stay cheap (docs/architecture.md, "Costs").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from shared.config.budgets import read_budget
from shared.config.crosschecks import check_routes, check_waiting_routes_have_a_requests_topic
from shared.config.fields import read_list, read_mapping, read_text
from shared.config.guards import check_template, read_guards
from shared.config.model import DEFAULT_JOB_EVENTS_TOPIC_ID, Config, GcsRoute, Route, Template
from shared.config.placements import REGION, REGION_RULE
from shared.config.problems import Problems, child, item
from shared.config.routes import read_route
from shared.config.spot import check_spot_gpus
from shared.config.templates import TemplateContext, read_template
from shared.config.watching import (
    check_no_placement_limits,
    read_alert_webhook,
    read_data_timeout,
    read_no_placement_limits,
    read_reconcile_max_runs,
    read_top_cooldown,
    read_watchdog_grace,
)
from shared.config.yamlfile import parse_yaml

TOP_LEVEL_KEYS = frozenset(
    {"project", "region", "alerts_topic", "requests_topic", "completions_topic"}
    | {"job_events_topic", "watchdog_grace", "reconcile_max_runs", "alert_webhook"}
    | {"no_placement_alert", "no_placement_give_up"}
    | {"cooldown", "data_timeout", "budget"}
    | {"guards", "routes", "templates"}
)
FileReader = Callable[[str], str]  # a reference as written in the config -> the file's text

TOPIC_KEYS = ("alerts_topic", "requests_topic", "completions_topic", "job_events_topic")

PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
PROJECT_RULE = "a project ID: 6 to 30 lowercase letters, digits and -, starting with a letter"
TOPIC_ID = r"(?!goog)[A-Za-z][A-Za-z0-9._~+%-]{2,254}"
TOPIC = re.compile(rf"(projects/[a-z][a-z0-9-]{{4,28}}[a-z0-9]/topics/)?{TOPIC_ID}")
TOPIC_RULE = "a topic ID such as training-alerts, or projects/PROJECT/topics/TOPIC"


def parse_config(
    text: str,
    source: str,
    base_dir: Path | None = None,
    *,
    read_file: FileReader | None = None,
) -> Config:
    """Validate config ``text``; ``source`` names it in messages, ``base_dir`` anchors its files.

    ``read_file`` reads the files templates refer to; by default from ``base_dir`` (or the
    current directory). Raises ``InvalidConfig`` listing every problem found.
    """
    top = _top_level(text, source)
    problems = Problems()
    project = (
        read_text(top.get("project"), "project", problems, pattern=PROJECT, rule=PROJECT_RULE) or ""
    )
    region = (
        read_text(top.get("region"), "region", problems, pattern=REGION, rule=REGION_RULE) or ""
    )
    topics = {key: _topic(top.get(key), key, project, problems) for key in TOPIC_KEYS}
    watchdog_grace = read_watchdog_grace(top.get("watchdog_grace"), "watchdog_grace", problems)
    max_runs = read_reconcile_max_runs(
        top.get("reconcile_max_runs"), "reconcile_max_runs", problems
    )
    alert_webhook = read_alert_webhook(top.get("alert_webhook"), "alert_webhook", problems)
    no_placement_alert, no_placement_give_up = read_no_placement_limits(top, problems)
    cooldown = read_top_cooldown(top.get("cooldown"), "cooldown", problems)
    data_timeout = read_data_timeout(top.get("data_timeout"), "data_timeout", problems)
    guards = read_guards(top.get("guards"), "guards", problems)
    budget = read_budget(top.get("budget"), "budget", problems)
    context = TemplateContext(
        project=project, region=region, read_file=read_file or read_file_beside(base_dir)
    )
    templates = _templates(top.get("templates"), problems, context)
    for name, template in templates.items():
        check_template(template, guards, region, child("templates", name), problems)
        check_spot_gpus(template, problems)
    check_no_placement_limits(no_placement_alert, no_placement_give_up, templates, problems)
    routes = _routes(top.get("routes"), problems)
    declared = top.get("templates")
    check_routes(routes, templates, declared if isinstance(declared, Mapping) else {}, problems)
    if any(isinstance(route, GcsRoute) and route.quiet for route in routes.values()):
        from shared.config.quiet import check_quiet_against_data_timeout

        check_quiet_against_data_timeout(routes, data_timeout, problems)
    check_waiting_routes_have_a_requests_topic(routes, topics["requests_topic"], problems)
    problems.raise_if_any(source)
    return Config(
        project=project,
        region=region,
        source=source,
        alerts_topic=topics["alerts_topic"] or "",
        requests_topic=topics["requests_topic"],
        completions_topic=topics["completions_topic"],
        job_events_topic=topics["job_events_topic"]
        or f"projects/{project}/topics/{DEFAULT_JOB_EVENTS_TOPIC_ID}",
        watchdog_grace=watchdog_grace,
        reconcile_max_runs=max_runs,
        no_placement_alert=no_placement_alert,
        no_placement_give_up=no_placement_give_up,
        cooldown=cooldown,
        data_timeout=data_timeout,
        alert_webhook=alert_webhook,
        guards=guards,
        budget=budget,
        routes=tuple(routes.values()),
        templates=templates,
    )


def _top_level(text: str, source: str) -> Mapping[str, object]:
    """The document's top-level mapping; without one nothing else can be checked."""
    problems = Problems()
    try:
        document = parse_yaml(text)
    except ValueError as error:
        problems.add("", str(error))
        problems.raise_if_any(source)
    top = read_mapping(
        document,
        "",
        problems,
        allowed=TOP_LEVEL_KEYS,
        required=["project", "region", "alerts_topic"],
    )
    problems.raise_if_any(source)
    return top or {}


def _topic(value: object, key: str, project: str, problems: Problems) -> str | None:
    """A full topic name; a bare topic ID is taken to be in the config's project."""
    topic = read_text(value, key, problems, pattern=TOPIC, rule=TOPIC_RULE)
    if topic is None or topic.startswith("projects/"):
        return topic
    return f"projects/{project}/topics/{topic}"


def _templates(value: object, problems: Problems, context: TemplateContext) -> dict[str, Template]:
    if value is None:
        problems.add("templates", "is required: define at least one template")
        return {}
    if not isinstance(value, Mapping):
        problems.add("templates", "expected a mapping of template names to templates")
        return {}
    templates: dict[str, Template] = {}
    for name, spec in value.items():
        path = child("templates", str(name))
        template = read_template(str(name), spec, path, problems, context)
        if template is not None:
            templates[str(name)] = template
    return templates


def _routes(value: object, problems: Problems) -> dict[int, Route]:
    """Each route read, keyed by its index in the list (for messages about it later)."""
    if value is None or value == []:
        problems.add("routes", "is required: list at least one route, or nothing will run")
        return {}
    entries = read_list(value, "routes", problems) or []
    routes = {
        index: read_route(entry, item("routes", index), problems)
        for index, entry in enumerate(entries)
    }
    return {index: route for index, route in routes.items() if route is not None}


def read_file_beside(base_dir: Path | None) -> FileReader:
    """Reads the files a config refers to relative to ``base_dir`` (or the current directory)."""

    def read(reference: str) -> str:
        return ((base_dir or Path.cwd()) / reference).read_text(encoding="utf-8")

    return read
