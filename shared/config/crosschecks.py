"""Checks that need routes and templates together: names, and parameters that can be filled.

- route names are unique, and no two schedule routes answer the same schedule;
- every route names a template that exists (a pubsub route may leave it to the request);
- every parameter a route fills is one its template declares;
- a route whose runs wait for their data (``completion: manifest`` or ``quiet``) needs
  ``requests_topic``: the reconciler starts such a run by publishing its first attempt there;
- for routes whose trigger cannot bring parameters of its own (gcs, schedule), every placeholder
  the template uses is filled by dispatch, the trigger or the route: a run never starts only to
  fail rendering.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from shared.config.model import (
    Completion,
    GcsRoute,
    PubSubRoute,
    Route,
    ScheduleRoute,
    Template,
)
from shared.config.placeholders import (
    RENDER_FIELDS,
    SHARD_FIELDS,
    TRIGGER_FIELDS,
    placeholder_names,
    placeholders_in,
    route_fields,
)
from shared.config.problems import Problems, child, item

KIND_BY_ROUTE_TYPE: Mapping[type, str] = {
    GcsRoute: "gcs",
    PubSubRoute: "pubsub",
    ScheduleRoute: "schedule",
}


def check_routes(
    routes: Mapping[int, Route],
    templates: Mapping[str, Template],
    declared: Collection[str],
    problems: Problems,
) -> None:
    """``routes`` maps each route's index in the ``routes`` list to the route read from it.

    ``declared`` names every template in the file, including those too broken to build: a route
    naming one of them is not reported again (the template's own problems say what to fix).
    """
    first_index_by_name: dict[str, int] = {}
    first_index_by_schedule: dict[str, int] = {}
    for index, route in routes.items():
        path = item("routes", index)
        if route.name in first_index_by_name:
            problems.add(
                child(path, "name"),
                f"{route.name!r} is already the name of "
                f"routes[{first_index_by_name[route.name]}]; route names must be "
                "unique: rename one",
            )
        first_index_by_name.setdefault(route.name, index)
        if isinstance(route, ScheduleRoute):
            if route.schedule in first_index_by_schedule:
                problems.add(
                    child(path, "schedule"),
                    f"schedule {route.schedule!r} is already "
                    f"routed by routes[{first_index_by_schedule[route.schedule]}]; one "
                    "tick starts one run: remove one of the two",
                )
            first_index_by_schedule.setdefault(route.schedule, index)
        _check_route_template(route, templates, declared, path, problems)


def _check_route_template(
    route: Route,
    templates: Mapping[str, Template],
    declared: Collection[str],
    path: str,
    problems: Problems,
) -> None:
    if route.template is None:
        return
    template = templates.get(route.template)
    if template is None and route.template in declared:
        return
    if template is None:
        known = ", ".join(sorted(templates)) or "none are defined"
        problems.add(
            child(path, "template"),
            f"template {route.template!r} is not defined; "
            f"use one of: {known}, or define it under templates",
        )
        return
    for param in route.params:
        if param not in template.params:
            problems.add(
                child(child(path, "params"), param),
                f"template {template.name!r} does "
                f"not declare {param!r}; add it to templates.{template.name}.params "
                "or remove it here",
            )
    if isinstance(route, PubSubRoute):
        return  # the request may fill the template's declared params
    kind = KIND_BY_ROUTE_TYPE[type(route)]
    available = RENDER_FIELDS | route_fields(route) | set(route.params)
    used = set(placeholder_names(template.display_name))
    used |= {name for _, name in placeholders_in(template.job_spec)}
    fillable = set(template.params) | TRIGGER_FIELDS  # other names: the template's own problem
    for name in sorted((used & fillable) - available):
        if isinstance(route, GcsRoute) and route.quiet is not None and name in SHARD_FIELDS:
            problems.add(
                child(path, "template"),
                f"template {template.name!r} uses {{{name}}}, which a completion: quiet route "
                "does not carry: its run starts when a whole directory is quiet, and one "
                f"object's {name} would mean nothing; use {{dataset_uri}} or {{dirname}}, or "
                "another template",
            )
            continue
        problems.add(
            child(path, "params"),
            f"template {template.name!r} uses {{{name}}}, which "
            f"a {kind} trigger does not carry; fill it here, e.g. params: {{{name}: "
            '"..."}',
        )


WAITING_COMPLETIONS = frozenset({Completion.MANIFEST, Completion.QUIET})


def check_waiting_routes_have_a_requests_topic(
    routes: Mapping[int, Route], requests_topic: str | None, problems: Problems
) -> None:
    """A run that waits for its data is started by the reconciler through ``requests_topic``:
    without one it would wait for ever, complete but never submitted."""
    if requests_topic:
        return
    for index, route in routes.items():
        if isinstance(route, GcsRoute) and route.completion in WAITING_COMPLETIONS:
            problems.add(
                child(child(item("routes", index), "gcs"), "completion"),
                f"completion: {route.completion.value} runs wait for their data and are started "
                "by the reconciler through requests_topic, which this config does not set; set "
                "requests_topic to the topic dispatch's on_request function listens to",
            )
