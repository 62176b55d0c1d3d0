"""The sweep and pipeline parts of files users already have, as ``shared.config.tuning`` values.

- A ``gcloud ai hp-tuning-jobs create --config`` YAML and a ``HyperparameterTuningJob`` REST
  body carry ``studySpec`` (``metrics``, ``parameters``, ``algorithm``) and the counts
  ``maxTrialCount``, ``parallelTrialCount``, ``maxFailedTrialCount``; their ``trialJobSpec``
  is a ``CustomJobSpec``, read by ``shared.config.importers`` like any other.
- A ``TrainingPipeline`` REST body carries ``modelToUpload`` (``displayName``,
  ``containerSpec.imageUri``, ``artifactUri``); its ``trainingTaskInputs`` is the custom task's
  ``CustomJobSpec``.

Each value keeps the key path of the file's field (``tuning.Written``), so a broken rule is named
in the file, and the template's own ``hyperparameter_tuning`` / ``training_pipeline`` keys override
these key by key. A field vertex-dispatch does not carry into the job it builds (early stopping,
conditional parameters, a model's serving routes, ...) is refused by name: silently dropping it
would run another sweep than the file describes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from shared.config.fields import describe, read_list, read_mapping, read_text
from shared.config.model import (
    MetricGoal,
    ParameterScale,
    ParameterType,
    TuningAlgorithm,
    TuningParameter,
)
from shared.config.problems import Problems, child, item
from shared.config.shorthand import GCS_URI
from shared.config.tuning import (
    COUNT_MINIMUMS,
    Fields,
    ParameterPaths,
    Written,
    check_metric,
    check_parameter_id,
    checked_list,
    checked_range,
    read_count,
)

# The file's count fields, by the template key each one is (its bounds: tuning.read_count).
TUNING_COUNT_FIELDS: Final[Mapping[str, str]] = {
    "maxTrialCount": "max_trials",
    "parallelTrialCount": "parallel_trials",
    "maxFailedTrialCount": "max_failed_trials",
}
STUDY_SPEC_KEYS: Final = frozenset({"metrics", "parameters", "algorithm"})
METRIC_SPEC_KEYS: Final = frozenset({"metricId", "goal"})
PARAMETER_SPEC_KEYS: Final = frozenset(
    {"parameterId", "scaleType"}
    | {"doubleValueSpec", "integerValueSpec", "discreteValueSpec", "categoricalValueSpec"}
)
VALUE_SPECS: Final[Mapping[str, ParameterType]] = {
    "doubleValueSpec": ParameterType.DOUBLE,
    "integerValueSpec": ParameterType.INTEGER,
    "discreteValueSpec": ParameterType.DISCRETE,
    "categoricalValueSpec": ParameterType.CATEGORICAL,
}
SCALE_TYPES: Final[Mapping[str, ParameterScale | None]] = {
    "SCALE_TYPE_UNSPECIFIED": None,
    "UNIT_LINEAR_SCALE": ParameterScale.LINEAR,
    "UNIT_LOG_SCALE": ParameterScale.LOG,
}
ALGORITHMS: Final[Mapping[str, TuningAlgorithm | None]] = {
    "ALGORITHM_UNSPECIFIED": None,
    "GRID_SEARCH": TuningAlgorithm.GRID,
    "RANDOM_SEARCH": TuningAlgorithm.RANDOM,
}
GOALS: Final = ("MAXIMIZE", "MINIMIZE")
MODEL_TO_UPLOAD_KEYS: Final = frozenset({"displayName", "containerSpec", "artifactUri"})
MODEL_CONTAINER_KEYS: Final = frozenset({"imageUri"})

# Fields of the real messages vertex-dispatch does not carry, and what to do instead.
_NOT_CARRIED: Final[Mapping[str, str]] = {
    "decayCurveStoppingSpec": "early stopping is not set by vertex-dispatch",
    "medianAutomatedStoppingSpec": "early stopping is not set by vertex-dispatch",
    "convexAutomatedStoppingSpec": "early stopping is not set by vertex-dispatch",
    "studyStoppingConfig": "study stopping is not set by vertex-dispatch",
    "observationNoise": "vertex-dispatch leaves it to Vertex AI's default",
    "measurementSelectionType": "vertex-dispatch leaves it to Vertex AI's default (last)",
    "conditionalParameterSpecs": "conditional parameters are not supported: tune them flat",
    "safetyConfig": "safety metrics are not supported",
    "defaultValue": "vertex-dispatch leaves the first trials' values to the service",
    "inputDataConfig": "a custom-task pipeline reads its data itself (pass it as an argument)",
    "modelId": "vertex-dispatch uploads a new model each time",
    "parentModel": "vertex-dispatch uploads a new model each time",
    "predictSchemata": "vertex-dispatch uploads the model with its image and artifacts only",
    "description": "vertex-dispatch uploads the model with its name, image and artifacts only",
    "metadata": "vertex-dispatch uploads the model with its image and artifacts only",
}


def not_carried(document: object, path: str, problems: Problems) -> object:
    """``document`` without the fields ``_NOT_CARRIED`` names, each refused by name."""
    if not isinstance(document, Mapping):
        return document
    for key in document:
        if key in _NOT_CARRIED:
            problems.add(child(path, key), f"{_NOT_CARRIED[key]}; remove it from the file")
    return {key: value for key, value in document.items() if key not in _NOT_CARRIED}


def study_fields(body: Mapping[str, object], path: str, problems: Problems) -> Fields:
    """The sweep values of a hp-tuning document (``path``: the document's key path)."""
    fields: Fields = {}
    for key, name in TUNING_COUNT_FIELDS.items():
        number = read_count(
            _int64(body.get(key)), child(path, key), problems, minimum=COUNT_MINIMUMS[name]
        )
        if number is not None:
            fields[name] = Written(number, child(path, key))
    study_path = child(path, "studySpec")
    study = read_mapping(
        not_carried(body.get("studySpec"), study_path, problems),
        study_path,
        problems,
        allowed=STUDY_SPEC_KEYS,
        required=["metrics", "parameters"],
    )
    if study is None:
        return fields
    metrics = _metrics(study.get("metrics"), child(study_path, "metrics"), problems)
    if metrics is not None:
        fields["metrics"] = Written(metrics, child(study_path, "metrics"))
    parameters = _parameters(study.get("parameters"), child(study_path, "parameters"), problems)
    if parameters is not None:
        fields["parameters"] = Written(parameters, child(study_path, "parameters"))
    algorithm_path = child(study_path, "algorithm")
    algorithm = study.get("algorithm")
    if algorithm is not None:
        # A YAML list or mapping is unhashable: test the type before looking the name up.
        if isinstance(algorithm, str) and algorithm in ALGORITHMS:
            if ALGORITHMS[algorithm] is not None:
                fields["algorithm"] = Written(ALGORITHMS[algorithm], algorithm_path)
        else:
            problems.add(
                algorithm_path,
                f"expected one of {', '.join(ALGORITHMS)}, got {describe(algorithm)}",
            )
    return fields


def model_fields(value: object, path: str, problems: Problems) -> Fields:
    """A ``TrainingPipeline``'s ``modelToUpload`` as ``training_pipeline.model`` values."""
    model = read_mapping(
        not_carried(value, path, problems),
        path,
        problems,
        allowed=MODEL_TO_UPLOAD_KEYS,
        required=["displayName", "containerSpec"],
    )
    if model is None:
        return {}
    fields: Fields = {"model": Written(True, path)}
    name = read_text(model.get("displayName"), child(path, "displayName"), problems)
    if name is not None:
        fields["model.display_name"] = Written(name, child(path, "displayName"))
    container_path = child(path, "containerSpec")
    container = model.get("containerSpec")
    if container is not None:
        if isinstance(container, Mapping):
            for key in container:
                if key not in MODEL_CONTAINER_KEYS:
                    problems.add(
                        child(container_path, str(key)),
                        "vertex-dispatch sets only the serving container's imageUri; remove it "
                        "(set the rest when deploying the model)",
                    )
        spec = read_mapping(
            {k: v for k, v in container.items() if k in MODEL_CONTAINER_KEYS}
            if isinstance(container, Mapping)
            else container,
            container_path,
            problems,
            allowed=MODEL_CONTAINER_KEYS,
            required=["imageUri"],
        )
        image = (
            None
            if spec is None
            else read_text(spec.get("imageUri"), child(container_path, "imageUri"), problems)
        )
        if image is not None:
            fields["model.serving_image"] = Written(image, child(container_path, "imageUri"))
    artifact = read_text(
        model.get("artifactUri"),
        child(path, "artifactUri"),
        problems,
        pattern=GCS_URI,
        rule="write a gs:// URI such as gs://bucket/runs/{run_id}/model/",
    )
    if artifact is not None:
        fields["model.artifact_uri"] = Written(artifact, child(path, "artifactUri"))
    return fields


def _int64(value: object) -> object:
    """An int64 field as REST JSON writes it (text) read as the whole number it is."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _metrics(
    value: object, path: str, problems: Problems
) -> tuple[tuple[str, MetricGoal], ...] | None:
    entries = read_list(value, path, problems)
    if entries is None:
        return None
    if not entries:
        problems.add(path, "is empty: list at least one {metricId, goal}")
        return None
    metrics = []
    for index, entry in enumerate(entries):
        entry_path = item(path, index)
        spec = read_mapping(
            not_carried(entry, entry_path, problems),
            entry_path,
            problems,
            allowed=METRIC_SPEC_KEYS,
            required=["metricId", "goal"],
        )
        if spec is None or spec.get("metricId") is None or spec.get("goal") is None:
            continue
        goal = spec["goal"]
        if not (isinstance(goal, str) and goal in GOALS):
            problems.add(
                child(entry_path, "goal"), f"expected MAXIMIZE or MINIMIZE, got {describe(goal)}"
            )
            continue
        metric = check_metric(
            spec["metricId"],
            goal,
            child(entry_path, "metricId"),
            problems,
            goal_path=child(entry_path, "goal"),
        )
        if metric is not None:
            metrics.append(metric)
    if len(metrics) != len(entries):
        return None
    ids = [metric_id for metric_id, _ in metrics]
    for index, metric_id in enumerate(ids):
        if metric_id in ids[:index]:
            problems.add(item(path, index), f"metric {metric_id!r} is listed twice; keep one")
            return None
    return tuple(metrics)


def _parameters(value: object, path: str, problems: Problems) -> tuple[TuningParameter, ...] | None:
    entries = read_list(value, path, problems)
    if entries is None:
        return None
    if not entries:
        problems.add(path, "is empty: list at least one parameter to tune")
        return None
    parameters = [
        _parameter(entry, item(path, index), problems) for index, entry in enumerate(entries)
    ]
    found = tuple(parameter for parameter in parameters if parameter is not None)
    if len(found) != len(entries):
        return None
    ids = [parameter.parameter_id for parameter in found]
    for index, parameter_id in enumerate(ids):
        if parameter_id in ids[:index]:
            problems.add(
                child(item(path, index), "parameterId"),
                f"parameter {parameter_id!r} is listed twice; keep one",
            )
            return None
    return found


def _parameter(value: object, path: str, problems: Problems) -> TuningParameter | None:
    spec = read_mapping(
        not_carried(value, path, problems),
        path,
        problems,
        allowed=PARAMETER_SPEC_KEYS,
        required=["parameterId"],
    )
    if spec is None or spec.get("parameterId") is None:
        return None
    parameter_id = spec["parameterId"]
    if not check_parameter_id(parameter_id, child(path, "parameterId"), problems):
        return None
    assert isinstance(parameter_id, str)  # checked just above
    kinds = [key for key in VALUE_SPECS if key in spec]
    if len(kinds) != 1:
        problems.add(path, f"set exactly one of {', '.join(VALUE_SPECS)}")
        return None
    key = kinds[0]
    kind = VALUE_SPECS[key]
    spec_path = child(path, key)
    scale_path = child(path, "scaleType")
    scale_name = spec.get("scaleType")
    if scale_name is not None and not (isinstance(scale_name, str) and scale_name in SCALE_TYPES):
        problems.add(
            scale_path,
            f"expected one of {', '.join(SCALE_TYPES)}, got {describe(scale_name)} "
            "(UNIT_REVERSE_LOG_SCALE is not supported)",
        )
        return None
    scale = None if not isinstance(scale_name, str) else SCALE_TYPES[scale_name]
    paths = ParameterPaths(
        parameter=path,
        min=child(spec_path, "minValue"),
        max=child(spec_path, "maxValue"),
        values=child(spec_path, "values"),
        scale=scale_path,
    )
    ranged = kind in (ParameterType.DOUBLE, ParameterType.INTEGER)
    value_spec = read_mapping(
        not_carried(spec[key], spec_path, problems),
        spec_path,
        problems,
        allowed={"minValue", "maxValue"} if ranged else {"values"},
        required=["minValue", "maxValue"] if ranged else ["values"],
    )
    if value_spec is None:
        return None
    if ranged:
        if value_spec.get("minValue") is None or value_spec.get("maxValue") is None:
            return None
        return checked_range(
            parameter_id,
            kind,
            value_spec["minValue"],
            value_spec["maxValue"],
            scale,
            paths,
            problems,
        )
    if value_spec.get("values") is None:
        return None
    return checked_list(parameter_id, kind, value_spec["values"], scale, paths, problems)
