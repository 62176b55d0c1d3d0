"""One template: the CustomJob to build, its parameters, placement chain and retry policy.

A template is written in the friendly form (``worker_pools``, see ``shorthand``) or points at a file
users already have (``gcloud_config`` or ``rest_body``, see ``importers``); the top-level keys
(``service_account``, ``timeout``, ``labels``, ``encryption_key``, ...) apply to both and override
the file's values.
The result is a ``model.Template`` whose ``job_spec`` is ``CustomJobSpec`` REST JSON.

A ``hyperparameter_tuning`` or ``training_pipeline`` block (or a file of that kind) makes the
template a sweep or a pipeline whose trial job / training task is that job spec (``tuning``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.config.encryption import read_encryption_key
from shared.config.fields import read_duration, read_mapping, read_text, read_text_list
from shared.config.importers import (
    ImportedJob,
    file_placements,
    import_gcloud_config,
    import_rest_body,
)
from shared.config.model import (
    DISPLAY_NAME_MAX,
    HyperparameterTuning,
    Placement,
    PlacementOrder,
    Template,
    TemplateForm,
    TrainingPipelineSpec,
)
from shared.config.origins import template_origin
from shared.config.placeholders import (
    BUILTIN_NAMES,
    FILLED_FIELDS_HINT,
    FILLED_SPEC_KEYS,
    FILLED_TEMPLATE_KEYS,
    OUTPUT_DIR_KEYS,
    PARAM_NAME,
    PARAM_NAME_RULE,
    PER_ATTEMPT_FIELDS,
    RENDER_FIELDS,
    placeholder_names,
    placeholders_in,
)
from shared.config.placements import read_placements
from shared.config.problems import Problems, child, item
from shared.config.retry import read_retry_policy
from shared.config.shorthand import GCS_URI, read_worker_pools
from shared.config.tuning import (
    KIND_KEYS,
    Fields,
    build_pipeline,
    build_tuning,
    read_pipeline_block,
    read_tuning_block,
)
from shared.config.watching import read_cooldown, read_start_by, read_watchdog_limit
from shared.config.yamlfile import parse_yaml
from shared.model.errors import ConfigError
from shared.model.job_kinds import JobKind

SPEC_SOURCES = ("worker_pools", "gcloud_config", "rest_body")
TEMPLATE_KEYS = frozenset(
    set(SPEC_SOURCES)
    | {"display_name", "params", "labels", "timeout", "service_account", "network"}
    | {"base_output_dir", "experiment", "experiment_run", "placement", "retry"}
    | {"max_queue", "no_placement_alert", "no_placement_give_up"}
    | {"encryption_key"}
    | {"cooldown", "placement_order"}
    | {"start_by"}
    | set(KIND_KEYS)
)
IMPORTERS: Mapping[str, Callable[[object, str, Problems], ImportedJob | None]] = {
    "gcloud_config": import_gcloud_config,
    "rest_body": import_rest_body,
}

TEMPLATE_NAME = re.compile(r"[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?")
TEMPLATE_NAME_RULE = (
    "lowercase letters, digits, - and _, at most 63 characters (it becomes a label)"
)
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
LABEL_RULE = "labels are lowercase letters, digits, _ and -, at most 63 characters"
RESERVED_LABEL_PREFIX = "vd-"  # vd-run, vd-attempt, vd-template: set by dispatch on every job
SERVICE_ACCOUNT = re.compile(r"[a-z][a-z0-9-]{4,29}@[a-z0-9.-]+\.iam\.gserviceaccount\.com")
SERVICE_ACCOUNT_RULE = "a service account email such as trainer@PROJECT.iam.gserviceaccount.com"

# the template keys whose text reaches the job, where a placeholder may be written
PLACEHOLDER_KEYS = frozenset(
    {"worker_pools", "display_name", "base_output_dir", "experiment_run", "experiment", "network"}
    | {"service_account"}
)


@dataclass(frozen=True)
class TemplateContext:
    """What reading a template needs from outside it."""

    project: str
    region: str
    read_file: Callable[[str], str]  # a path relative to the config file -> its text


def read_template(
    name: str, value: object, path: str, problems: Problems, context: TemplateContext
) -> Template | None:
    """The template called ``name``, or ``None`` when it is too broken to build."""
    if not TEMPLATE_NAME.fullmatch(name):
        problems.add(path, f"template name {name!r} is not valid: {TEMPLATE_NAME_RULE}")
    spec = read_mapping(value, path, problems, allowed=TEMPLATE_KEYS)
    if spec is None:
        return None
    imported = _job_source(spec, path, problems, context)
    if imported is None:
        return None
    job_spec = imported.job_spec
    _apply_friendly_fields(spec, job_spec, path, problems, context)
    params = _params(spec.get("params"), child(path, "params"), problems)
    display_name = (
        read_text(spec.get("display_name"), child(path, "display_name"), problems)
        or imported.display_name
        or f"{name}-{{run_id}}"
    )
    _check_display_name(display_name, child(path, "display_name"), problems)
    _check_placeholders(spec, imported, params, path, problems)
    tuning, pipeline, kind_fields = _job_kind(spec, imported, params, path, problems)
    file_labels = _labels(imported.labels or None, child(imported.origin, "labels"), problems)
    labels = {**file_labels, **_labels(spec.get("labels"), child(path, "labels"), problems)}
    timeout = read_duration(spec.get("timeout"), child(path, "timeout"), problems)
    timeout = timeout if timeout is not None else imported.timeout
    if timeout is not None and not timeout:
        problems.add(child(path, "timeout"), "must be longer than 0s; e.g. 48h, or leave it out")
    placements = _placements(spec, imported, path, problems)
    retry = read_retry_policy(spec.get("retry"), child(path, "retry"), problems)
    limits = {
        key: read_watchdog_limit(spec.get(key), child(path, key), problems)
        for key in ("max_queue", "no_placement_alert", "no_placement_give_up")
    }
    encryption_key = (
        read_encryption_key(spec.get("encryption_key"), child(path, "encryption_key"), problems)
        or imported.encryption_key
    )
    cooldown = read_cooldown(spec.get("cooldown"), child(path, "cooldown"), problems)
    placement_order = _placement_order(
        spec.get("placement_order"), child(path, "placement_order"), problems
    )
    start_by = read_start_by(spec.get("start_by"), child(path, "start_by"), problems)
    if placements is None:
        return None
    form = next(TemplateForm(key) for key in SPEC_SOURCES if spec.get(key) is not None)
    origin = template_origin(
        path,
        form,
        (key for key, written in spec.items() if written is not None),
        spec_path=imported.spec_origin,
        body_path=imported.origin if form is TemplateForm.REST_BODY else "",
        file_fields=imported.fields,
        kind_fields={key: written.path for key, written in kind_fields.items()},
    )
    return Template(
        name=name,
        display_name=display_name,
        job_spec=job_spec,
        placements=placements,
        params=params,
        labels=labels,
        timeout=timeout,
        retry=retry,
        max_queue=limits["max_queue"],
        no_placement_alert=limits["no_placement_alert"],
        no_placement_give_up=limits["no_placement_give_up"],
        encryption_key=encryption_key,
        cooldown=cooldown,
        placement_order=placement_order,
        start_by=start_by,
        hyperparameter_tuning=tuning,
        training_pipeline=pipeline,
        origin=origin,
    )


PLACEMENT_ORDER_NAMES = tuple(order.value for order in PlacementOrder)


def _placement_order(value: object, path: str, problems: Problems) -> PlacementOrder:
    """``placement_order``: ``as_written`` (the default) or ``learned``."""
    if value is None:
        return PlacementOrder.AS_WRITTEN
    if isinstance(value, str) and value in PLACEMENT_ORDER_NAMES:
        return PlacementOrder(value)
    problems.add(
        path,
        f"{value!r} is not a placement order: write learned (ordered by each placement's "
        "measured time-to-start) or as_written (the chain as written, the default)",
    )
    return PlacementOrder.AS_WRITTEN


def _job_kind(
    spec: Mapping[str, Any],
    imported: ImportedJob,
    params: tuple[str, ...],
    path: str,
    problems: Problems,
) -> tuple[HyperparameterTuning | None, TrainingPipelineSpec | None, Fields]:
    """The sweep or the pipeline the template (or its file) makes, and where its values were
    written; (None, None, {}) for a CustomJob."""
    own = [key for key in KIND_KEYS if key in spec]
    if len(own) > 1:
        problems.add(
            path,
            "set at most one of hyperparameter_tuning (a HyperparameterTuningJob whose trials "
            "run the job) or training_pipeline (a TrainingPipeline whose training task is the "
            "job): a job is of one kind",
        )
        return None, None, {}
    tuning_path = child(path, "hyperparameter_tuning")
    pipeline_path = child(path, "training_pipeline")
    file_kind = imported.kind
    if own and file_kind is not JobKind.CUSTOM_JOB and own[0] != _KIND_KEY[file_kind]:
        problems.add(
            child(path, own[0]),
            f"the template's file ({imported.origin}) is a {file_kind.resource}, and a job is "
            f"of one kind: remove {own[0]}, or point at a file of a CustomJob or of that kind",
        )
        return None, None, {}
    kind = JobKind.CUSTOM_JOB if not own else _KIND_OF_KEY[own[0]]
    kind = file_kind if file_kind is not JobKind.CUSTOM_JOB else kind
    file_fields = imported.kind_fields if file_kind is kind else {}
    if kind is JobKind.HYPERPARAMETER_TUNING_JOB:
        own_fields: Fields | None = {}
        if "hyperparameter_tuning" in spec:
            own_fields = read_tuning_block(spec["hyperparameter_tuning"], tuning_path, problems)
        if own_fields is None:
            return None, None, {}
        tuning, fields = build_tuning(
            file_fields, own_fields, tuning_path, problems, file_path=imported.origin
        )
        _check_params_are_not_tuned(tuning, params, child(path, "params"), fields, problems)
        return tuning, None, fields
    if kind is JobKind.TRAINING_PIPELINE:
        own_fields = {}
        if "training_pipeline" in spec:
            own_fields = read_pipeline_block(spec["training_pipeline"], pipeline_path, problems)
        if own_fields is None:
            return None, None, {}
        pipeline, fields = build_pipeline(file_fields, own_fields, pipeline_path, problems)
        _check_model_placeholders(fields, params, path, problems)
        return None, pipeline, fields
    return None, None, {}


_KIND_KEY = {
    JobKind.HYPERPARAMETER_TUNING_JOB: "hyperparameter_tuning",
    JobKind.TRAINING_PIPELINE: "training_pipeline",
}
_KIND_OF_KEY = {key: kind for kind, key in _KIND_KEY.items()}


def _check_params_are_not_tuned(
    tuning: HyperparameterTuning | None,
    params: tuple[str, ...],
    path: str,
    fields: Fields,
    problems: Problems,
) -> None:
    """A request fills params; a tuned parameter is the sweep's to set on every trial."""
    if tuning is None:
        return
    tuned = {parameter.parameter_id for parameter in tuning.parameters}
    for index, name in enumerate(params):
        if name in tuned:
            problems.add(
                item(path, index),
                f"{name!r} is also a parameter the sweep tunes ({fields['parameters'].path}): "
                f"the service passes --{name}=VALUE to every trial and no request may set it; "
                "rename the param, or remove it",
            )


def _check_model_placeholders(
    fields: Fields, params: tuple[str, ...], path: str, problems: Problems
) -> None:
    """The model's display name and artifact URI are filled like the job's display name."""
    known = BUILTIN_NAMES | set(params)
    for key in ("model.display_name", "model.artifact_uri"):
        written = fields.get(key)
        if written is None:
            continue
        for name in placeholder_names(written.value):
            if name not in known:
                problems.add(
                    written.path,
                    f"placeholder {{{name}}} is neither a declared param nor a built-in; add "
                    f"{name!r} to {child(path, 'params')} or use one of "
                    f"{', '.join(sorted(BUILTIN_NAMES))}",
                )
        if key == "model.display_name":
            _check_display_name(written.value, written.path, problems)


def _job_source(
    spec: Mapping[str, Any], path: str, problems: Problems, context: TemplateContext
) -> ImportedJob | None:
    """The job spec from ``worker_pools``, or from the file named by a ``SPEC_SOURCES`` key."""
    sources = [key for key in SPEC_SOURCES if spec.get(key) is not None]
    if len(sources) != 1:
        problems.add(
            path,
            "set exactly one of worker_pools (the friendly form), gcloud_config "
            "(a gcloud --config YAML) or rest_body (a CustomJob REST body)",
        )
        return None
    source = sources[0]
    if source == "worker_pools":
        pools = read_worker_pools(spec["worker_pools"], child(path, "worker_pools"), problems)
        return None if pools is None else ImportedJob(job_spec={"workerPoolSpecs": pools})
    reference_path = child(path, source)
    reference = read_text(spec[source], reference_path, problems)
    if reference is None:
        return None
    try:
        document = parse_yaml(context.read_file(reference))
    except (OSError, ValueError, ConfigError) as error:
        problems.add(
            reference_path,
            f"cannot read {reference!r}: {error}. Paths are relative to "
            "the config file's directory",
        )
        return None
    return IMPORTERS[source](document, f"{reference_path}({reference})", problems)


def _apply_friendly_fields(
    spec: Mapping[str, Any],
    job_spec: dict[str, Any],
    path: str,
    problems: Problems,
    context: TemplateContext,
) -> None:
    """Copy service account, network, output directory and experiment into the job spec."""
    service_account = read_text(
        spec.get("service_account"),
        child(path, "service_account"),
        problems,
        pattern=SERVICE_ACCOUNT,
        rule=SERVICE_ACCOUNT_RULE,
    )
    if service_account is not None:
        job_spec["serviceAccount"] = service_account
    network = read_text(spec.get("network"), child(path, "network"), problems)
    if network is not None:
        job_spec["network"] = network
    output = read_text(
        spec.get("base_output_dir"),
        child(path, "base_output_dir"),
        problems,
        pattern=GCS_URI,
        rule="write a gs:// URI such as gs://bucket/runs/{run_id}/",
    )
    if output is not None:
        job_spec["baseOutputDirectory"] = {"outputUriPrefix": output}
    experiment = read_text(spec.get("experiment"), child(path, "experiment"), problems)
    run = read_text(spec.get("experiment_run"), child(path, "experiment_run"), problems)
    if run is not None and experiment is None:
        problems.add(child(path, "experiment_run"), "needs experiment: name the experiment too")
    if experiment is not None:
        job_spec["experiment"] = _experiment_context(experiment, context)
    if experiment is not None and run is not None:
        job_spec["experimentRun"] = _experiment_context(f"{experiment}-{run}", context)


def _experiment_context(name: str, context: TemplateContext) -> str:
    """A short experiment (or experiment-run) name as the Vertex ML Metadata context it names.

    The location stays the ``{region}`` placeholder, filled when the job is rendered: a fallback
    placement in another region must name the experiment in the job's own region.
    """
    if "/" in name:  # already a full resource name
        return name
    return f"projects/{context.project}/locations/{{region}}/metadataStores/default/contexts/{name}"


def _params(value: object, path: str, problems: Problems) -> tuple[str, ...]:
    names = read_text_list(value, path, problems, pattern=PARAM_NAME, rule=PARAM_NAME_RULE) or ()
    for index, name in enumerate(names):
        if name in RENDER_FIELDS:
            problems.add(
                item(path, index),
                f"{name!r} is filled by dispatch on every run; remove it from params",
            )
        if name in names[:index]:
            problems.add(item(path, index), f"{name!r} is listed twice; keep one")
    return tuple(dict.fromkeys(names))


def _check_display_name(display_name: str, path: str, problems: Problems) -> None:
    literal = re.sub(r"\{[a-z_][a-z0-9_]*\}", "", display_name)
    if len(literal) > DISPLAY_NAME_MAX:
        problems.add(
            path,
            f"is {len(literal)} characters before any placeholder is filled; "
            f"Vertex AI allows {DISPLAY_NAME_MAX}: shorten it",
        )


def _check_placeholders(
    spec: Mapping[str, Any],
    imported: ImportedJob,
    params: tuple[str, ...],
    path: str,
    problems: Problems,
) -> None:
    """Every ``{name}`` is declared or built in, and sits where rendering fills it.

    A typo fails now, not at the first event. Paths point at what the user wrote: the
    template's own keys, or the imported file's.
    """
    own_keys = {key: value for key, value in spec.items() if key in PLACEHOLDER_KEYS}
    uses = [
        (child(path, where), where, FILLED_TEMPLATE_KEYS, name)
        for where, name in placeholders_in(own_keys)
    ]
    if imported.origin:
        body = {"displayName": imported.display_name or "", **imported.job_spec}
        origin = imported.spec_origin
        uses += [
            (child(origin, where), where, FILLED_SPEC_KEYS, name)
            for where, name in placeholders_in(body)
        ]
    known = BUILTIN_NAMES | set(params)
    for full_path, where, filled_keys, name in uses:
        if not filled_keys.fullmatch(where):
            problems.add(
                full_path,
                f"{{{name}}} would stay literal here: {FILLED_FIELDS_HINT}. "
                "Remove it, or move the varying part into an argument",
            )
        elif where in OUTPUT_DIR_KEYS and name in PER_ATTEMPT_FIELDS:
            problems.add(
                full_path,
                f"{{{name}}} would give each attempt of a run its own output directory, so a "
                "resubmitted job could not resume from the last one's checkpoints "
                "(AIP_CHECKPOINT_DIR): every attempt shares one. Use {run_id} here; put "
                f"{{{name}}} in an argument or env value if a per-attempt path is wanted",
            )
        elif name not in known:
            problems.add(
                full_path,
                f"placeholder {{{name}}} is neither a declared param nor a "
                f"built-in; add {name!r} to {child(path, 'params')} or use one of "
                f"{', '.join(sorted(BUILTIN_NAMES))}",
            )


def _labels(value: object, path: str, problems: Problems) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(path, "expected a mapping of label keys to values")
        return {}
    result: dict[str, str] = {}
    for key, label_value in value.items():
        key_path = child(path, str(key))
        if not isinstance(key, str) or not LABEL_KEY.fullmatch(key):
            problems.add(
                key_path, f"label key {key!r} is not valid: {LABEL_RULE}, starting with a letter"
            )
            continue
        if key.startswith(RESERVED_LABEL_PREFIX):
            problems.add(
                key_path,
                f"keys starting with {RESERVED_LABEL_PREFIX!r} are set by "
                "vertex-dispatch on every job; rename it",
            )
            continue
        text = read_text(label_value, key_path, problems, pattern=LABEL_VALUE, rule=LABEL_RULE)
        if text is not None:
            result[key] = text
    return result


def _placements(
    spec: Mapping[str, Any], imported: ImportedJob, path: str, problems: Problems
) -> tuple[Placement, ...] | None:
    """The template's own chain; else what its file implies; a template must have one."""
    if spec.get("placement") is not None:
        return read_placements(spec["placement"], child(path, "placement"), problems)
    if spec.get("worker_pools") is not None:
        problems.add(
            child(path, "placement"),
            "is required: list where to run in order, e.g. "
            "[{persistent_resource: my-pool}, {flex_start: {max_wait: 2h}}]",
        )
        return None
    return file_placements(imported, child(path, "placement"), problems)
