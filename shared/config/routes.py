"""The ``routes`` list: which trigger starts which template, with which parameters.

Each route has a ``name`` and exactly one trigger kind::

    - name: imagenet-daily
      gcs: {bucket: acme-datasets, match: "imagenet/*/_SUCCESS", completion: marker}
      template: resnet-a100
      params: {dataset_uri: "gs://{bucket}/{dirname}/"}
    - name: exports                                  # no marker: complete once quiet for 10m
      gcs: {bucket: acme-exports, match: "exports/*/**", completion: quiet,
            dataset: "exports/{date}/", quiet_for: 10m, min_objects: 100}
      template: resnet-a100
    - name: on-request
      pubsub: {attributes: {kind: train}}            # the request body names the template
    - name: nightly
      schedule: {name: nightly-retrain, cron: "0 3 * * *"}   # or just  schedule: nightly-retrain
      template: resnet-a100

Glob and matching semantics are ``shared.decode.routing``'s; this module checks shapes and names.
The keys of ``completion: quiet`` and its ``dataset`` pattern are ``quiet``'s. The checks that
need the templates too are in ``crosschecks``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.config.fields import (
    read_mapping,
    read_text,
    read_text_map,
)
from shared.config.model import (
    QUIET_KEYS,
    Completion,
    GcsRoute,
    PubSubRoute,
    Route,
    ScheduleRoute,
)
from shared.config.placeholders import (
    FIELDS_BY_ROUTE_KIND,
    PARAM_NAME,
    PARAM_NAME_RULE,
    RENDER_FIELDS,
    SHARD_FIELDS,
    placeholder_names,
    route_fields,
)
from shared.config.problems import Problems, child

ROUTE_KINDS = ("gcs", "pubsub", "schedule")
ROUTE_KEYS = frozenset({"name", "template", "params", *ROUTE_KINDS})
GCS_KEYS = frozenset({"bucket", "match", "completion", *QUIET_KEYS})
PUBSUB_KEYS = frozenset({"attributes", "body_field", "body_value"})
SCHEDULE_KEYS = frozenset({"name", "cron"})
COMPLETIONS = {completion.value: completion for completion in Completion}

ROUTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
ROUTE_NAME_RULE = "letters, digits, _, . and -, at most 63 characters"
BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
BUCKET_RULE = "a bucket name only (no gs:// and no path): lowercase letters, digits, -, _ and ."
ATTRIBUTE_NAME = re.compile(r"(?!goog)[A-Za-z0-9_.~+%-]{1,256}")
ATTRIBUTE_RULE = "Pub/Sub attribute keys are up to 256 characters and cannot start with goog"
BODY_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
BODY_FIELD_RULE = 'a dotted path into the JSON body such as "kind" or "job.kind"'
CRON = re.compile(r"\S+( \S+){4}")
CRON_RULE = 'five fields of a unix-cron schedule, e.g. "0 3 * * *"'


def read_route(value: object, path: str, problems: Problems) -> Route | None:
    """One route entry, or ``None`` when it is too broken to build."""
    route = read_mapping(value, path, problems, allowed=ROUTE_KEYS, required=["name"])
    if route is None:
        return None
    name = read_text(
        route.get("name"), child(path, "name"), problems, pattern=ROUTE_NAME, rule=ROUTE_NAME_RULE
    )
    kinds = [kind for kind in ROUTE_KINDS if route.get(kind) is not None]
    if len(kinds) != 1:
        problems.add(
            path,
            "set exactly one trigger kind: gcs (objects landing in a bucket), "
            "pubsub (job requests) or schedule (Cloud Scheduler ticks)",
        )
        return None
    kind = kinds[0]
    template = read_text(
        route.get("template"), child(path, "template"), problems, required=kind != "pubsub"
    )
    params_path = child(path, "params")
    params = _route_params(route.get("params"), params_path, problems)
    kind_path = child(path, kind)
    built: Route | None
    named, fixed = name or "", template or ""  # a route without them is dropped below
    if kind == "gcs":
        built = _gcs_route(route[kind], kind_path, problems, named, fixed, params)
    elif kind == "pubsub":
        built = _pubsub_route(route[kind], kind_path, problems, named, template, params)
    else:
        built = _schedule_route(route[kind], kind_path, problems, named, fixed, params)
    _check_param_placeholders(params, params_path, kind, built, problems)
    if name is None or (template is None and kind != "pubsub"):
        return None
    return built


def _gcs_route(
    value: object, path: str, problems: Problems, name: str, template: str, params: dict[str, str]
) -> GcsRoute | None:
    gcs = read_mapping(value, path, problems, allowed=GCS_KEYS, required=["bucket", "match"])
    if gcs is None:
        return None
    bucket = read_text(
        gcs.get("bucket"), child(path, "bucket"), problems, pattern=BUCKET, rule=BUCKET_RULE
    )
    match = read_text(gcs.get("match"), child(path, "match"), problems)
    completion_name = read_text(
        gcs.get("completion", Completion.MARKER.value), child(path, "completion"), problems
    )
    completion = COMPLETIONS.get(completion_name or "")
    if completion_name is not None and completion is None:
        problems.add(
            child(path, "completion"),
            f"{completion_name!r} is not a completion rule; use one of {', '.join(COMPLETIONS)}",
        )
    if match is not None and match.startswith("/"):
        problems.add(child(path, "match"), "object names have no leading /; remove it")
    quiet = None
    if completion is Completion.QUIET or any(key in gcs for key in QUIET_KEYS):
        # config.quiet is imported only for a route that uses its keys: a config without one
        # (the common case) does not pay its import on every cold start
        from shared.config.quiet import read_quiet_rule

        quiet = read_quiet_rule(
            gcs, path, problems, quiet=completion is Completion.QUIET, match=match
        )
    if bucket is None or match is None or completion is None:
        return None
    if completion is Completion.QUIET and quiet is None:
        return None
    return GcsRoute(
        name=name,
        bucket=bucket,
        match=match,
        template=template,
        completion=completion,
        params=params,
        quiet=quiet,
    )


def _pubsub_route(
    value: object,
    path: str,
    problems: Problems,
    name: str,
    template: str | None,
    params: dict[str, str],
) -> PubSubRoute | None:
    pubsub = read_mapping(value, path, problems, allowed=PUBSUB_KEYS)
    if pubsub is None:
        return None
    attributes = read_text_map(
        pubsub.get("attributes"),
        child(path, "attributes"),
        problems,
        key_pattern=ATTRIBUTE_NAME,
        key_rule=ATTRIBUTE_RULE,
    )
    body_field = read_text(
        pubsub.get("body_field"),
        child(path, "body_field"),
        problems,
        pattern=BODY_FIELD,
        rule=BODY_FIELD_RULE,
    )
    body_value = read_text(pubsub.get("body_value"), child(path, "body_value"), problems)
    if body_value is not None and pubsub.get("body_field") is None:
        problems.add(
            child(path, "body_value"), "needs body_field: name the field it is compared with"
        )
    return PubSubRoute(
        name=name,
        attributes=attributes or {},
        body_field=body_field,
        body_value=body_value,
        template=template,
        params=params,
    )


def _schedule_route(
    value: object, path: str, problems: Problems, name: str, template: str, params: dict[str, str]
) -> ScheduleRoute | None:
    schedule: Mapping[str, Any] | None
    if isinstance(value, str):
        schedule = {"name": value}
    else:
        schedule = read_mapping(value, path, problems, allowed=SCHEDULE_KEYS, required=["name"])
    if schedule is None:
        return None
    schedule_name = read_text(schedule.get("name"), child(path, "name"), problems)
    cron = read_text(
        schedule.get("cron"), child(path, "cron"), problems, pattern=CRON, rule=CRON_RULE
    )
    if schedule_name is None:
        return None
    return ScheduleRoute(
        name=name, schedule=schedule_name, template=template, cron=cron, params=params
    )


def _route_params(value: object, path: str, problems: Problems) -> dict[str, str]:
    """``param: pattern``; the names dispatch fills itself cannot be set."""
    if value is None:
        return {}
    params = (
        read_text_map(value, path, problems, key_pattern=PARAM_NAME, key_rule=PARAM_NAME_RULE) or {}
    )
    for param in params:
        if param in RENDER_FIELDS:
            problems.add(
                child(path, param),
                f"{param!r} is filled by dispatch on every run and "
                "cannot be set by a route; choose another name",
            )
    return params


def _check_param_placeholders(
    params: dict[str, str], path: str, kind: str, built: Route | None, problems: Problems
) -> None:
    """A parameter's pattern may use only the fields its trigger carries (``route_fields``)."""
    if kind == "gcs" and not isinstance(built, GcsRoute):
        return  # too broken to tell a quiet route from another: its own problems say why
    available = route_fields(built) if built is not None else FIELDS_BY_ROUTE_KIND[kind]
    available |= {"run_id"}
    for param, pattern in params.items():
        for name in placeholder_names(pattern):
            if name in available:
                continue
            if isinstance(built, GcsRoute) and built.quiet is not None and name in SHARD_FIELDS:
                problems.add(
                    child(path, param),
                    f"{{{name}}} is not a field of a completion: quiet route: its run starts "
                    "when a whole directory is quiet, and one object's (the first shard's) "
                    f"{name} would mean nothing; use one of {', '.join(sorted(available))}",
                )
            else:
                problems.add(
                    child(path, param),
                    f"{{{name}}} is not a field of a {kind} "
                    f"trigger; use one of {', '.join(sorted(available))}",
                )
