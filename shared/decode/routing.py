"""Trigger + Config → RouteMatch: which route a trigger takes, its run key and its parameters.

Pure: no I/O and no Google Cloud client, so an event that matches nothing is dropped for the cost
of a few regex matches. Routes are tried in config order; the first match wins.

- A Cloud Storage object matches a ``GcsRoute`` by bucket and glob on the full object name.
  In globs ``*`` and ``?`` stay within one path segment, ``**`` crosses ``/`` (``**/`` also matches
  no directory at all), ``[abc]``/``[!abc]`` are character classes, everything else is literal.
  So ``imagenet/*/_SUCCESS`` matches ``imagenet/2026-12-01/_SUCCESS`` but none of its shards.
  On a ``completion: quiet`` route an object names no run of its own: it belongs to the dataset
  directory the route's ``dataset`` pattern finds (``shared.decode.datasets``), and the
  dataset's versions are the runs (``dataset_version_match``); an object that ``match`` takes
  but that lies under no dataset directory is refused (``DatasetNotFound``).
- A job request matches a ``PubSubRoute`` when every attribute the route names is equal and, if
  the route names a body field, that field equals ``body_value`` (or is present and not null when
  ``body_value`` is None).
- A schedule tick matches the ``ScheduleRoute`` with its schedule name.
- A ``RetryRequest`` is never routed: dispatch continues the run it names from the ledger, so
  passing one here is a programming error (``TypeError``).

Parameters are built-ins of the trigger, then the route's ``params`` (patterns over the
built-ins), then, for a job request, the body's ``params``, which may fill only what the template
declares and nothing the route, the trigger or dispatch (``RENDER_FIELDS``) sets. A request body
that names a field of the job itself (``max_trials``, ``parameters``, ``metrics``, ``worker_pools``,
``placement``, ... or their REST names: ``REQUEST_REFUSED_KEYS``) is refused, not ignored: its
sender believes it changed the job, and it cannot (a route may still match on such a key with
``body_field``). A request's ``start_by`` may shorten its template's deadline, never lengthen it
(``requested_start_by``). Placeholders are
``{name}`` only (``shared.config.placeholders``), filled in one pass: a value containing ``{x}`` is
never expanded again.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from shared.config.durations import describe_duration, parse_duration
from shared.config.model import (
    Completion,
    Config,
    GcsRoute,
    PubSubRoute,
    QuietRule,
    Route,
    ScheduleRoute,
    Template,
)
from shared.config.placeholders import PLACEHOLDER, RENDER_FIELDS
from shared.config.tuning import TUNING_KEYS
from shared.model.errors import ConfigError, PermanentError
from shared.model.runkeys import (
    dataset_run_key,
    dataset_version_run_key,
    object_run_key,
    request_run_key,
    rfc3339,
    run_id,
    schedule_run_key,
)
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger


class RequestRejected(PermanentError):
    """A job request asks for something its route, template or the guards do not allow."""

    headline = "the job request was refused"


class DatasetNotFound(ConfigError):
    """An object a quiet route's ``match`` takes lies under no directory its ``dataset``
    pattern names: the route's two keys disagree (the loader refuses such a config; a config
    built by hand may not)."""

    headline = "the object belongs to no dataset of its route"


@dataclass(frozen=True)
class QuietDataset:
    """The dataset a quiet route's object belongs to: enough to name any version's run."""

    route: GcsRoute  # its ``quiet`` is set
    bucket: str
    prefix: str  # the dataset's directory, ending in "/"
    captures: Mapping[str, str]

    @property
    def rule(self) -> QuietRule:
        assert self.route.quiet is not None  # a QuietDataset is made only for quiet routes
        return self.route.quiet

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class RouteMatch:
    """What a trigger starts: a template, its parameters, and the run's identity."""

    route: str
    template: str
    params: Mapping[str, str]
    run_key: str
    run_id: str
    manifest_uri: str | None = None  # gs:// URI of the manifest to verify (manifest completion)
    # completion: quiet: the dataset the object belongs to; the fields above are its version 1
    dataset: QuietDataset | None = None
    # A job request's body.start_by, checked against its template's (never longer); None: the
    # template's start_by applies (``policy.deadlines.start_deadline``).
    start_by: timedelta | None = None


MAX_PARAM_VALUE_CHARS = 1024

# Body keys that name a part of the job, which only the template sets: its keys, the sweep's and
# the pipeline's, and the REST fields a user may think of. "template" and "params" are the only
# keys a request acts with (docs/messages.md).
REQUEST_REFUSED_KEYS = frozenset(
    TUNING_KEYS
    | {"hyperparameter_tuning", "training_pipeline", "trials", "model"}
    | {"parameter", "metric", "hyperparameters", "study", "study_spec"}
    | {"studySpec", "trialJobSpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount"}
    | {"trainingTaskDefinition", "trainingTaskInputs", "modelToUpload"}
)
"""The body keys that would set a part of a sweep or a pipeline: refused, naming each."""

_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_GLOB_TOKEN = re.compile(r"\*\*/|\*\*|\*|\?|\[!?\]?[^\]]*\]")
_GLOB_TOKEN_REGEX = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}


def route(trigger: Trigger, config: Config) -> RouteMatch | None:
    """The first route of ``config`` that ``trigger`` matches, or None to drop the trigger."""
    if isinstance(trigger, ObjectFinalized):
        return _route_object(trigger, config)
    if isinstance(trigger, JobRequest):
        return _route_request(trigger, config)
    if isinstance(trigger, ScheduleTick):
        return _route_tick(trigger, config)
    if isinstance(trigger, RetryRequest):
        raise TypeError("a RetryRequest is not routed: dispatch continues its run from the ledger")
    raise TypeError(f"not a trigger: {type(trigger).__name__}")


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regex for a route's object-name glob (semantics in the module docstring)."""
    parts: list[str] = []
    position = 0
    for token in _GLOB_TOKEN.finditer(pattern):
        parts.append(re.escape(pattern[position : token.start()]))
        parts.append(_GLOB_TOKEN_REGEX.get(token.group()) or _character_class(token.group()))
        position = token.end()
    parts.append(re.escape(pattern[position:]))
    try:
        return re.compile("".join(parts), re.DOTALL)
    except re.error as error:
        raise ConfigError(
            f"glob {pattern!r} is invalid ({error}); fix its [...] character class"
        ) from None


def fill_placeholders(text: str, params: Mapping[str, str], *, where: str) -> str:
    """``text`` with each ``{name}`` replaced by ``params[name]``, in one pass.

    An unknown name is a ``ConfigError`` naming ``where`` (the config key that holds ``text``).
    """

    def value_of(placeholder: re.Match[str]) -> str:
        name = placeholder.group(1)
        if name not in params:
            known = ", ".join(sorted(params))
            raise ConfigError(
                f"{where}: placeholder {{{name}}} names no parameter available here ({known}); "
                "fix the name or declare the parameter"
            )
        return params[name]

    return PLACEHOLDER.sub(value_of, text)


# --- Cloud Storage ---------------------------------------------------------------------------


def _route_object(trigger: ObjectFinalized, config: Config) -> RouteMatch | None:
    for candidate in config.routes:
        if (
            isinstance(candidate, GcsRoute)
            and candidate.bucket == trigger.bucket
            and glob_regex(candidate.match).fullmatch(trigger.name)
        ):
            if candidate.quiet is not None and trigger.name.endswith("/"):
                # decode.datasets.is_folder_object, inlined: an unmatched shard's cold start
                # does not import that module
                return None  # a "create folder" placeholder holds no data: nothing to wait for
            return _object_match(candidate, trigger, config)
    return None


def _object_match(gcs_route: GcsRoute, trigger: ObjectFinalized, config: Config) -> RouteMatch:
    if gcs_route.quiet is not None:
        return dataset_version_match(_quiet_dataset(gcs_route, trigger, config), 1, config)
    dirname, basename = posixpath.split(trigger.name)
    object_uri = f"gs://{trigger.bucket}/{trigger.name}"
    if gcs_route.completion is Completion.EVERY_OBJECT:
        # The object is a dataset of its own.
        run_key = object_run_key(trigger.bucket, trigger.name, trigger.generation)
        dataset_uri = object_uri
    else:
        # The marker or manifest completes its directory.
        run_key = dataset_run_key(trigger.bucket, dirname, trigger.generation)
        dataset_uri = f"gs://{trigger.bucket}/{dirname}/" if dirname else f"gs://{trigger.bucket}/"
    the_run_id = run_id(run_key)
    builtins = {
        "run_id": the_run_id,
        "bucket": trigger.bucket,
        "object": trigger.name,
        "dirname": dirname,
        "basename": basename,
        "generation": str(trigger.generation),
        "dataset_uri": dataset_uri,
    }
    return RouteMatch(
        route=gcs_route.name,
        template=gcs_route.template,
        params=_with_route_params(builtins, gcs_route, config),
        run_key=run_key,
        run_id=the_run_id,
        manifest_uri=object_uri if gcs_route.completion is Completion.MANIFEST else None,
    )


def _quiet_dataset(gcs_route: GcsRoute, trigger: ObjectFinalized, config: Config) -> QuietDataset:
    from shared.decode.datasets import dataset_of  # only a quiet route's objects need it

    assert gcs_route.quiet is not None
    found = dataset_of(gcs_route.quiet.dataset, trigger.name)
    if found is None:
        raise DatasetNotFound(
            f"{config.source}: route {gcs_route.name!r}: object gs://{trigger.bucket}/"
            f"{trigger.name} matches its match {gcs_route.match!r} but lies under no directory "
            f"its dataset {gcs_route.quiet.dataset!r} names; make dataset cover every object "
            "match can match (or narrow match)"
        )
    return QuietDataset(gcs_route, trigger.bucket, found.prefix, found.captures)


def dataset_version_match(dataset: QuietDataset, version: int, config: Config) -> RouteMatch:
    """The run of version ``version`` (1, 2, ...) of a quiet route's dataset.

    Its parameters are the pattern's captures, then the built-ins ``run_id``, ``bucket``,
    ``dirname`` (the directory without its trailing ``/``) and ``dataset_uri`` (with it), then
    the route's params over both. None names one object: a shard's name, basename or generation
    would be the first shard's, which means nothing for a dataset.
    """
    run_key = dataset_version_run_key(dataset.bucket, dataset.prefix, version)
    the_run_id = run_id(run_key)
    builtins = {
        **dataset.captures,
        "run_id": the_run_id,
        "bucket": dataset.bucket,
        "dirname": dataset.prefix.removesuffix("/"),
        "dataset_uri": dataset.uri,
    }
    return RouteMatch(
        route=dataset.route.name,
        template=dataset.route.template,
        params=_with_route_params(builtins, dataset.route, config),
        run_key=run_key,
        run_id=the_run_id,
        dataset=dataset,
    )


# --- Pub/Sub job requests --------------------------------------------------------------------


def _route_request(trigger: JobRequest, config: Config) -> RouteMatch | None:
    for candidate in config.routes:
        if isinstance(candidate, PubSubRoute) and _request_matches(candidate, trigger):
            return _request_match(candidate, trigger, config)
    return None


def _request_matches(pubsub_route: PubSubRoute, trigger: JobRequest) -> bool:
    if any(trigger.attributes.get(k) != v for k, v in pubsub_route.attributes.items()):
        return False
    if pubsub_route.body_field is None:
        return True
    value = _body_field(trigger.body, pubsub_route.body_field)
    if pubsub_route.body_value is None:
        return value is not None
    return value == pubsub_route.body_value


def _body_field(body: Mapping[str, Any], dotted_path: str) -> object:
    value: object = body
    for key in dotted_path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _request_match(pubsub_route: PubSubRoute, trigger: JobRequest, config: Config) -> RouteMatch:
    template = _requested_template(pubsub_route, trigger.body, config)
    _refuse_job_fields(trigger.body, pubsub_route, template)
    run_key = request_run_key(trigger.message_id, trigger.idempotency_key)
    the_run_id = run_id(run_key)
    builtins = {"run_id": the_run_id, "message_id": trigger.message_id}
    fixed = _with_route_params(builtins, pubsub_route, config)
    requested = _requested_params(trigger.body.get("params") or {}, template, fixed)
    return RouteMatch(
        route=pubsub_route.name,
        template=template.name,
        params={**fixed, **requested},
        run_key=run_key,
        run_id=the_run_id,
        start_by=requested_start_by(trigger.body.get(START_BY_KEY), template),
    )


START_BY_KEY = "start_by"
"""The request body key that sets the run's deadline: a duration from the request's publish
time, which may shorten the template's ``start_by``, never lengthen it (docs/messages.md)."""


def requested_start_by(value: object, template: Template) -> timedelta | None:
    """A request's ``body.start_by``, read and checked against ``template``'s: a duration longer
    than 0s and no longer than the template's ``start_by`` (a template without one takes any:
    the request is what sets a deadline then). None when the body sets none. ``RequestRejected``
    naming the key otherwise."""
    if value is None:
        return None
    where = f"job request body.{START_BY_KEY}"
    try:
        start_by = parse_duration(value)
    except ValueError as error:
        raise RequestRejected(
            f"{where}: {error}; it is how long after the request a job must be running, e.g. "
            '"2h", or leave it out for the template\'s deadline'
        ) from None
    if start_by <= timedelta(0):
        raise RequestRejected(
            f'{where}: must be longer than 0s, e.g. "2h"; leave it out for the template\'s deadline'
        )
    if template.start_by is not None and start_by > template.start_by:
        raise RequestRejected(
            f"{where}: {describe_duration(start_by)} is longer than template "
            f"{template.name!r}'s start_by ({describe_duration(template.start_by)}): a request "
            "may shorten the template's deadline, never lengthen it; send "
            f"{describe_duration(template.start_by)} or less, or leave it out"
        )
    return start_by


def _requested_template(
    pubsub_route: PubSubRoute, body: Mapping[str, Any], config: Config
) -> Template:
    named = body.get("template")
    if pubsub_route.template is not None:
        if named is not None and named != pubsub_route.template:
            raise RequestRejected(
                f"job request body.template {named!r}: route {pubsub_route.name!r} fixes the "
                f"template to {pubsub_route.template!r}; remove body.template or publish to a "
                "route that lets the request choose"
            )
        return _template(config, pubsub_route.template, pubsub_route)
    if named is None:
        raise RequestRejected(
            f"job request has no body.template and route {pubsub_route.name!r} fixes none; add "
            f'"template": "<name>" to the body (one of: {", ".join(sorted(config.templates))})'
        )
    template = config.templates.get(named)
    if template is None:
        raise RequestRejected(
            f"job request body.template {named!r} names no template; use one of: "
            f"{', '.join(sorted(config.templates))}"
        )
    return template


def _refuse_job_fields(
    body: Mapping[str, Any], pubsub_route: PubSubRoute, template: Template
) -> None:
    """A body key that names a part of a sweep or a pipeline is refused (a route may match on
    it)."""
    matched_on = (pubsub_route.body_field or "").split(".")[0]
    named = sorted(key for key in body if key in REQUEST_REFUSED_KEYS and key != matched_on)
    if named:
        declared = ", ".join(template.params) or "none"
        raise RequestRejected(
            f"job request body.{named[0]}: a request may fill only the template's declared "
            f"params (body.params; template {template.name!r} declares: {declared}); a "
            "sweep's trials, parameters and metrics and a pipeline's model are the template's: "
            "remove " + ", ".join(f"body.{key}" for key in named)
        )


def _requested_params(
    params: Mapping[str, object], template: Template, fixed: Mapping[str, str]
) -> dict[str, str]:
    accepted: dict[str, str] = {}
    tuning = template.hyperparameter_tuning
    tuned = {parameter.parameter_id for parameter in tuning.parameters} if tuning else set()
    for name, value in params.items():
        where = f"job request body.params.{name}"
        if name in fixed or name in RENDER_FIELDS:
            raise RequestRejected(
                f"{where}: the route, the trigger or dispatch sets this parameter and a request "
                "may not override it; remove it from the request"
            )
        if name in tuned and name not in template.params:
            raise RequestRejected(
                f"{where}: template {template.name!r} tunes this parameter: the sweep gives "
                "each trial its own value and a request may not set it; remove it from the "
                "request"
            )
        if name not in template.params:
            declared = ", ".join(template.params) or "none"
            raise RequestRejected(
                f"{where}: template {template.name!r} does not declare this parameter "
                f"(it declares: {declared}); remove it or declare it in the template's params"
            )
        accepted[name] = _checked_value(value, where)
    return accepted


def _checked_value(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise RequestRejected(
            f"{where}: values must be JSON strings, got {type(value).__name__}; quote it"
        )
    if len(value) > MAX_PARAM_VALUE_CHARS:
        raise RequestRejected(
            f"{where}: value is {len(value)} characters, over the limit of "
            f"{MAX_PARAM_VALUE_CHARS}; pass a reference such as a gs:// URI instead"
        )
    if _CONTROL_CHARACTER.search(value):
        raise RequestRejected(
            f"{where}: value contains a control character (newline, tab, NUL, ...), which job "
            "arguments must not carry; remove it"
        )
    return value


# --- Cloud Scheduler ticks -------------------------------------------------------------------


def _route_tick(trigger: ScheduleTick, config: Config) -> RouteMatch | None:
    for candidate in config.routes:
        if isinstance(candidate, ScheduleRoute) and candidate.schedule == trigger.schedule:
            run_key = schedule_run_key(trigger.schedule, trigger.tick_time)
            the_run_id = run_id(run_key)
            builtins = {
                "run_id": the_run_id,
                "message_id": trigger.message_id,
                "schedule": trigger.schedule,
                "schedule_time": rfc3339(trigger.tick_time),
            }
            return RouteMatch(
                route=candidate.name,
                template=candidate.template,
                params=_with_route_params(builtins, candidate, config),
                run_key=run_key,
                run_id=the_run_id,
            )
    return None


# --- shared ----------------------------------------------------------------------------------


def _with_route_params(builtins: dict[str, str], chosen: Route, config: Config) -> dict[str, str]:
    """The built-ins plus the route's params, each a pattern over the built-ins."""
    params = dict(builtins)
    for name, pattern in chosen.params.items():
        where = f"{config.source}: route {chosen.name!r} params.{name}"
        if name in RENDER_FIELDS:  # the loader refuses these too; a hand-built Config may not
            raise ConfigError(
                f"{where}: {name!r} is filled by dispatch on every run and cannot be set by a "
                "route; choose another parameter name"
            )
        params[name] = fill_placeholders(pattern, builtins, where=where)
    return params


def _template(config: Config, name: str, chosen: Route) -> Template:
    template = config.templates.get(name)
    if template is None:
        raise ConfigError(
            f"{config.source}: route {chosen.name!r} names template {name!r}, which is not "
            f"defined; define it under templates or fix the name"
        )
    return template


def _character_class(token: str) -> str:
    negated = token.startswith("[!")
    members = (token[2:-1] if negated else token[1:-1]).replace("\\", "\\\\")
    if not negated and members.startswith("^"):
        members = "\\" + members  # a literal caret, as in fnmatch
    # A negated class must not match "/" either: only ** crosses directories.
    return f"[^/{members}]" if negated else f"[{members}]"
