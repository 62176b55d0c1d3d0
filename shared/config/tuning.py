"""A template's job kind: its ``hyperparameter_tuning`` or ``training_pipeline`` block.

Users write::

    hyperparameter_tuning:
      metrics: {accuracy: maximize}               # metric id -> maximize | minimize
      parameters:
        learning_rate: {double: {min: 0.0001, max: 0.1}, scale: log}
        layers: {integer: {min: 2, max: 8}}
        batch_size: {discrete: [32, 64, 128]}
        optimizer: {categorical: [adam, sgd]}
      max_trials: 20
      parallel_trials: 4                          # default 1
      max_failed_trials: 3                        # default 0: Vertex AI decides
      algorithm: random                           # grid | random; leave out for Bayesian

    training_pipeline:
      model:                                      # optional: upload when training succeeds
        display_name: "resnet-{run_id}"
        serving_image: us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-1:latest
        artifact_uri: "gs://acme-runs/resnet/{run_id}/model/"

The template's job (``worker_pools`` or a file's) is the sweep's trial job / the pipeline's
training task. A file may bring these values too (a ``HyperparameterTuningJob`` or
``TrainingPipeline``, read by ``shared.config.kind_files``); the template's own keys override the
file's, key by key. Every value is kept with the key path where it was written (``Written``), so
that a rule spanning two keys (``parallel_trials`` <= ``max_trials``) names the one to change
where the user wrote it, in the template or in the file.

The rules each name the key path and the fix: at least one metric and one parameter; ranges
well formed (min < max, integer bounds whole numbers, log scale needs min > 0); lists non-empty
without duplicates (discrete: numbers, categorical: text); max_trials >= 1;
1 <= parallel_trials <= max_trials; 0 <= max_failed_trials <= max_trials; grid search only over
integer, discrete and categorical parameters (Vertex AI refuses a grid over a real range).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from shared.config.fields import describe, read_int, read_list, read_mapping, read_text
from shared.config.model import (
    HyperparameterTuning,
    MetricGoal,
    ModelUpload,
    ParameterScale,
    ParameterType,
    TrainingPipelineSpec,
    TuningAlgorithm,
    TuningParameter,
)
from shared.config.problems import Problems, child, item
from shared.config.shorthand import GCS_URI

TUNING_KEYS: Final = frozenset(
    {"metrics", "parameters", "max_trials", "parallel_trials", "max_failed_trials", "algorithm"}
)
PARAMETER_KEYS: Final = frozenset({"double", "integer", "discrete", "categorical", "scale"})
RANGE_KEYS: Final = frozenset({"min", "max"})
PIPELINE_KEYS: Final = frozenset({"model"})
MODEL_KEYS: Final = frozenset({"display_name", "serving_image", "artifact_uri"})
GOAL_NAMES: Final = tuple(goal.value for goal in MetricGoal)
SCALE_NAMES: Final = tuple(scale.value for scale in ParameterScale)
ALGORITHM_NAMES: Final = tuple(algorithm.value for algorithm in TuningAlgorithm)
TYPE_NAMES: Final = tuple(kind.value for kind in ParameterType)
KIND_KEYS: Final = ("hyperparameter_tuning", "training_pipeline")

# A parameter becomes the trial's argument --ID=VALUE: an identifier, as the service requires.
PARAMETER_ID: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
PARAMETER_ID_RULE: Final = (
    "letters, digits and _, not starting with a digit, at most 64 characters "
    "(each trial gets it as the argument --ID=VALUE)"
)
# What the training code reports (cloudml-hypertune's hyperparameter_metric_tag).
METRIC_ID: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,127}")
METRIC_ID_RULE: Final = "letters, digits, _ . / and -, starting with a letter or _"
_NUMBER_TEXT: Final = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_WHOLE_TEXT: Final = re.compile(r"[-+]?\d+")
# What the messages' fields hold: the trial counts are int32, an integer range's bounds int64.
# A larger number would fail in the proto constructor when rendered, long after loading.
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
COUNT_MINIMUMS: Final[Mapping[str, int]] = {
    "max_trials": 1,
    "parallel_trials": 1,
    "max_failed_trials": 0,
}
GRID_TYPES: Final = frozenset(
    {ParameterType.INTEGER, ParameterType.DISCRETE, ParameterType.CATEGORICAL}
)
_Choice = TypeVar("_Choice", TuningAlgorithm, MetricGoal, ParameterScale)


@dataclass(frozen=True)
class Written:
    """A value as read, and the key path where the user wrote it."""

    value: Any
    path: str


Fields = dict[str, Written]
"""The values of one block found in one place (the template, or its file), by field name:
``metrics``, ``parameters``, ``max_trials``, ... for a sweep; ``model.display_name``, ... for a
pipeline's model (``model`` itself when the block names a model at all)."""


@dataclass(frozen=True)
class ParameterPaths:
    """Where one parameter's parts are written: the friendly form's keys or the REST fields."""

    parameter: str
    min: str
    max: str
    values: str
    scale: str


# --- the template's own blocks ------------------------------------------------------------------


def read_tuning_block(value: object, path: str, problems: Problems) -> Fields | None:
    """The ``hyperparameter_tuning`` block's values (missing keys are left to the file and the
    defaults); None when it is not a mapping."""
    block = read_mapping(value, path, problems, allowed=TUNING_KEYS)
    if block is None:
        return None
    fields: Fields = {}
    if block.get("metrics") is not None:
        metrics = _read_metrics(block["metrics"], child(path, "metrics"), problems)
        if metrics is not None:
            fields["metrics"] = Written(metrics, child(path, "metrics"))
    if block.get("parameters") is not None:
        parameters = _read_parameters(block["parameters"], child(path, "parameters"), problems)
        if parameters is not None:
            fields["parameters"] = Written(parameters, child(path, "parameters"))
    for key, minimum in COUNT_MINIMUMS.items():
        number = read_count(block.get(key), child(path, key), problems, minimum=minimum)
        if number is not None:
            fields[key] = Written(number, child(path, key))
    if block.get("algorithm") is not None:
        algorithm = _choice(block["algorithm"], child(path, "algorithm"), problems, TuningAlgorithm)
        if algorithm is not None:
            fields["algorithm"] = Written(algorithm, child(path, "algorithm"))
    return fields


def read_count(value: object, path: str, problems: Problems, *, minimum: int) -> int | None:
    """A trial count (``max_trials``, ...): a whole number from ``minimum`` to ``INT32_MAX``."""
    return read_int(value, path, problems, minimum=minimum, maximum=INT32_MAX)


def read_pipeline_block(value: object, path: str, problems: Problems) -> Fields | None:
    """The ``training_pipeline`` block's values; None when it is not a mapping."""
    if value is None:
        problems.add(
            path,
            "is empty: write training_pipeline: {} for a pipeline that uploads no model, give it "
            "a model: {display_name, serving_image}, or remove the key for a CustomJob",
        )
        return None
    block = read_mapping(value, path, problems, allowed=PIPELINE_KEYS)
    if block is None:
        return None
    if "model" not in block:
        return {}
    model_path = child(path, "model")
    model = read_mapping(block["model"], model_path, problems, allowed=MODEL_KEYS)
    if model is None:
        return {}
    fields: Fields = {"model": Written(True, model_path)}
    for key in ("display_name", "serving_image"):
        text = read_text(model.get(key), child(model_path, key), problems)
        if text is not None:
            fields[f"model.{key}"] = Written(text, child(model_path, key))
    artifact_uri = read_text(
        model.get("artifact_uri"),
        child(model_path, "artifact_uri"),
        problems,
        pattern=GCS_URI,
        rule="write a gs:// URI such as gs://bucket/runs/{run_id}/model/",
    )
    if artifact_uri is not None:
        fields["model.artifact_uri"] = Written(artifact_uri, child(model_path, "artifact_uri"))
    return fields


# --- building the model from the file's values and the template's ------------------------------


def build_tuning(
    file_fields: Fields,
    own_fields: Fields,
    path: str,
    problems: Problems,
    *,
    file_path: str = "",
) -> tuple[HyperparameterTuning | None, Fields]:
    """The sweep from the file's values (read from ``file_path``, if any) overridden by the
    template's (``path``: its block).

    Returns the sweep (None when a required value is missing or a rule is broken) and where each
    of its values was written, for ``TemplateOrigin.kind_fields``.
    """
    fields = {**file_fields, **own_fields}
    broken = len(problems)
    file_broken = bool(file_path) and problems.reported(file_path)
    for key in ("metrics", "parameters", "max_trials"):
        if key not in fields and not problems.reported(child(path, key)) and not file_broken:
            problems.add(child(path, key), _REQUIRED[key])
    max_trials = fields.get("max_trials")
    for key, what in (("parallel_trials", "run at once"), ("max_failed_trials", "may fail")):
        if max_trials is not None and key in fields and fields[key].value > max_trials.value:
            problems.add(
                fields[key].path,
                f"{fields[key].value} trials {what}, but max_trials ({max_trials.path}) is "
                f"{max_trials.value}: lower {key} to at most {max_trials.value}, or raise "
                "max_trials",
            )
    algorithm = fields.get("algorithm")
    if algorithm is not None and algorithm.value is TuningAlgorithm.GRID:
        for parameter in fields["parameters"].value if "parameters" in fields else ():
            if parameter.type not in GRID_TYPES:
                problems.add(
                    algorithm.path,
                    f"grid search cannot enumerate the real range of parameter "
                    f"{parameter.parameter_id!r} ({fields['parameters'].path}): make it "
                    "integer or discrete, or use algorithm: random (or leave algorithm out "
                    "for Bayesian optimization)",
                )
    complete = {"metrics", "parameters", "max_trials"} <= set(fields)
    if len(problems) != broken or problems.reported(path) or not complete:
        return None, fields
    tuning = HyperparameterTuning(
        metrics=fields["metrics"].value,
        parameters=fields["parameters"].value,
        max_trials=fields["max_trials"].value,
        **{key: fields[key].value for key in _OPTIONAL if key in fields},
    )
    return tuning, fields


def build_pipeline(
    file_fields: Fields, own_fields: Fields, path: str, problems: Problems
) -> tuple[TrainingPipelineSpec | None, Fields]:
    """The pipeline from the file's model values overridden by the template's (``path``: its
    block); the model needs a display name and a serving image once any of it is given."""
    fields = {**file_fields, **own_fields}
    if "model" not in fields:
        return TrainingPipelineSpec(), fields
    model_path = child(path, "model")
    missing = [key for key in ("display_name", "serving_image") if f"model.{key}" not in fields]
    for key in missing:
        if not problems.reported(child(model_path, key)):
            problems.add(child(model_path, key), _REQUIRED[f"model.{key}"])
    if missing:
        return None, fields
    artifact = fields.get("model.artifact_uri")
    model = ModelUpload(
        display_name=fields["model.display_name"].value,
        serving_image=fields["model.serving_image"].value,
        artifact_uri=None if artifact is None else artifact.value,
    )
    return TrainingPipelineSpec(model=model), fields


_OPTIONAL: Final = ("parallel_trials", "max_failed_trials", "algorithm")
_REQUIRED: Final[Mapping[str, str]] = {
    "metrics": "is required: name at least one metric the trials report and its goal, "
    "e.g. metrics: {accuracy: maximize}",
    "parameters": "is required: list at least one parameter to tune, e.g. "
    "parameters: {learning_rate: {double: {min: 0.0001, max: 0.1}, scale: log}}",
    "max_trials": "is required: how many trials the sweep runs in all, e.g. max_trials: 20",
    "model.display_name": "is required for a model upload: the model's name in the Model "
    'Registry, e.g. display_name: "resnet-{run_id}"',
    "model.serving_image": "is required for a model upload: the serving container image, e.g. "
    "us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-1:latest",
}


# --- metrics and parameters ---------------------------------------------------------------------


def _read_metrics(
    value: object, path: str, problems: Problems
) -> tuple[tuple[str, MetricGoal], ...] | None:
    if not isinstance(value, Mapping):
        problems.add(
            path,
            f"expected a mapping of metric id to maximize or minimize, got {describe(value)}; "
            "e.g. metrics: {accuracy: maximize}",
        )
        return None
    if not value:
        problems.add(path, "is empty: name at least one metric, e.g. {accuracy: maximize}")
        return None
    metrics: list[tuple[str, MetricGoal]] = []
    for metric_id, goal in value.items():
        metric = check_metric(metric_id, goal, child(path, str(metric_id)), problems)
        if metric is not None:
            metrics.append(metric)
    return tuple(metrics) if len(metrics) == len(value) else None


def check_metric(
    metric_id: object, goal: object, path: str, problems: Problems, *, goal_path: str = ""
) -> tuple[str, MetricGoal] | None:
    """One metric (its id and goal, as the friendly form or a file names them)."""
    if not isinstance(metric_id, str) or not METRIC_ID.fullmatch(metric_id):
        problems.add(path, f"metric id {metric_id!r} is not valid: {METRIC_ID_RULE}")
        return None
    chosen = _choice(goal, goal_path or path, problems, MetricGoal)
    return None if chosen is None else (metric_id, chosen)


def _read_parameters(
    value: object, path: str, problems: Problems
) -> tuple[TuningParameter, ...] | None:
    if not isinstance(value, Mapping):
        problems.add(
            path,
            f"expected a mapping of parameter id to its values, got {describe(value)}; e.g. "
            "parameters: {learning_rate: {double: {min: 0.0001, max: 0.1}, scale: log}}",
        )
        return None
    if not value:
        problems.add(path, "is empty: list at least one parameter to tune")
        return None
    parameters = [
        _read_parameter(parameter_id, spec, child(path, str(parameter_id)), problems)
        for parameter_id, spec in value.items()
    ]
    found = tuple(parameter for parameter in parameters if parameter is not None)
    return found if len(found) == len(parameters) else None


def _read_parameter(
    parameter_id: object, value: object, path: str, problems: Problems
) -> TuningParameter | None:
    if not check_parameter_id(parameter_id, path, problems):
        return None
    assert isinstance(parameter_id, str)  # checked just above
    spec = read_mapping(value, path, problems, allowed=PARAMETER_KEYS)
    if spec is None:
        return None
    types = [name for name in TYPE_NAMES if name in spec]
    if len(types) != 1:
        problems.add(
            path,
            "set exactly one of double: {min, max}, integer: {min, max}, discrete: [numbers] "
            "or categorical: [strings]",
        )
        return None
    kind = ParameterType(types[0])
    kind_path = child(path, kind.value)
    paths = ParameterPaths(
        parameter=path,
        min=child(kind_path, "min"),
        max=child(kind_path, "max"),
        values=kind_path,
        scale=child(path, "scale"),
    )
    scale = None
    if spec.get("scale") is not None:
        scale = _choice(spec["scale"], paths.scale, problems, ParameterScale)
        if scale is None:
            return None
    if kind in (ParameterType.DOUBLE, ParameterType.INTEGER):
        bounds = read_mapping(
            spec[kind.value], kind_path, problems, allowed=RANGE_KEYS, required=["min", "max"]
        )
        if bounds is None:
            return None
        return checked_range(
            parameter_id, kind, bounds.get("min"), bounds.get("max"), scale, paths, problems
        )
    return checked_list(parameter_id, kind, spec[kind.value], scale, paths, problems)


def check_parameter_id(parameter_id: object, path: str, problems: Problems) -> bool:
    if isinstance(parameter_id, str) and PARAMETER_ID.fullmatch(parameter_id):
        return True
    problems.add(path, f"parameter id {parameter_id!r} is not valid: {PARAMETER_ID_RULE}")
    return False


def checked_range(
    parameter_id: str,
    kind: ParameterType,
    low: object,
    high: object,
    scale: ParameterScale | None,
    paths: ParameterPaths,
    problems: Problems,
) -> TuningParameter | None:
    """A double or integer range, or None after recording what is wrong with it."""
    whole = kind is ParameterType.INTEGER
    minimum = read_number(low, paths.min, problems, whole=whole)
    maximum = read_number(high, paths.max, problems, whole=whole)
    if minimum is None or maximum is None:
        return None
    if minimum >= maximum:
        problems.add(
            paths.max,
            f"{maximum:g} is not above min {minimum:g}: a range needs min < max (for a single "
            "value, drop the parameter and pass it as an argument)",
        )
        return None
    if scale is ParameterScale.LOG and minimum <= 0:
        problems.add(
            paths.min,
            f"{minimum:g} is not above 0, and scale: log samples the logarithm: raise min "
            "above 0, or use scale: linear",
        )
        return None
    return TuningParameter(parameter_id, kind, min=minimum, max=maximum, scale=scale)


def checked_list(
    parameter_id: str,
    kind: ParameterType,
    value: object,
    scale: ParameterScale | None,
    paths: ParameterPaths,
    problems: Problems,
) -> TuningParameter | None:
    """A discrete (numbers) or categorical (text) list, or None after recording what is wrong."""
    entries = read_list(value, paths.values, problems)
    if entries is None:
        return None
    if not entries:
        problems.add(paths.values, f"is empty: list the {kind.value} values to try")
        return None
    values: list[float | str] = []
    for index, entry in enumerate(entries):
        entry_path = item(paths.values, index)
        if kind is ParameterType.DISCRETE:
            number = read_number(entry, entry_path, problems, whole=False)
            if number is not None:
                values.append(number)
        elif isinstance(entry, str) and entry:
            values.append(entry)
        else:
            problems.add(
                entry_path,
                f"expected text, got {describe(entry)}: categorical values are strings "
                "(quote numbers, or use discrete: for numeric values)",
            )
    if len(values) != len(entries):
        return None
    for index, entry in enumerate(values):
        if entry in values[:index]:
            problems.add(item(paths.values, index), f"{entry!r} is listed twice; keep one")
            return None
    if kind is ParameterType.CATEGORICAL:
        if scale is not None:
            problems.add(
                paths.scale,
                "a categorical parameter has no scale (its values are not numbers); remove it",
            )
            return None
        return TuningParameter(parameter_id, kind, values=tuple(values))
    if scale is ParameterScale.LOG and min(float(entry) for entry in values) <= 0:
        problems.add(
            paths.values,
            "scale: log samples the logarithm, so every value must be above 0: remove the "
            "values <= 0, or use scale: linear",
        )
        return None
    # Vertex AI wants a discrete list in increasing order; the order written means nothing.
    ordered = tuple(sorted(float(entry) for entry in values))
    return TuningParameter(parameter_id, kind, values=ordered, scale=scale)


def read_number(value: object, path: str, problems: Problems, *, whole: bool) -> float | None:
    """A finite number (a double), or ``whole``: a whole number an int64 holds (returned as an
    int, exact). Text that is a number is read as one (YAML reads ``1e-4`` as text; REST JSON
    writes int64 values as text)."""
    if whole:
        return _read_int64(value, path, problems)
    number: float | None = None
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if numeric or (isinstance(value, str) and _NUMBER_TEXT.fullmatch(value)):
        try:
            number = float(value)  # type: ignore[arg-type]  # a number or a number's text
        except OverflowError:  # an int beyond any double
            number = None
    if number is None or not math.isfinite(number):
        problems.add(path, f"expected a number, got {describe(value)}")
        return None
    return number


def _read_int64(value: object, path: str, problems: Problems) -> int | None:
    whole: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        whole = value
    elif isinstance(value, str) and _WHOLE_TEXT.fullmatch(value):
        whole = int(value)
    if whole is None:
        problems.add(path, f"expected a whole number, got {describe(value)}")
        return None
    if not INT64_MIN <= whole <= INT64_MAX:
        problems.add(
            path,
            f"{whole} is out of range: an integer parameter's bounds are 64-bit "
            f"(from {INT64_MIN} to {INT64_MAX})",
        )
        return None
    return whole


def _choice(value: object, path: str, problems: Problems, kind: type[_Choice]) -> _Choice | None:
    names = [member.value for member in kind]
    if isinstance(value, str):
        for member in kind:
            if member.value == value.lower():
                return member
    problems.add(path, f"expected one of {', '.join(names)}, got {describe(value)}")
    return None
