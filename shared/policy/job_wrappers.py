"""Wrapping the job that runs into what a sweep or a pipeline template creates.

``shared.policy.jobspec.render_job`` always builds the ``CustomJob`` that actually runs (placement,
scheduling, labels, encryption and filled placeholders included). For a template with a
``hyperparameter_tuning`` block this module wraps that job's spec as the trial job of a
``HyperparameterTuningJob``; for a ``training_pipeline`` block, as the training task (custom task)
of a ``TrainingPipeline`` with the model to upload. Nothing here changes the job that runs: every
placement and guard rule keeps checking ``RenderedJob.custom_job``, and
``shared.policy.job_views.view_of(resource)`` gives that job's spec back.

Only a sweep's or a pipeline's rendering imports this module (and with it the tuning and pipeline
protos): a CustomJob's cold start never pays for them (tests/unit/test_aiplatform_lazy.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from shared.aiplatform import (
    CustomJob,
    CustomJobSpec,
    HyperparameterTuningJob,
    Model,
    ModelContainerSpec,
    StudySpec,
    TrainingPipeline,
)
from shared.config.model import (
    CUSTOM_TASK_DEFINITION,
    DISPLAY_NAME_MAX,
    HyperparameterTuning,
    MetricGoal,
    ModelUpload,
    ParameterScale,
    ParameterType,
    TrainingPipelineSpec,
    TuningAlgorithm,
    TuningParameter,
)
from shared.config.placeholders import MODEL_ARTIFACT_URI_FIELD, MODEL_DISPLAY_NAME_FIELD
from shared.model.errors import InvalidJobSpec

Filler = Callable[[str, str], str]
"""Fills ``{placeholders}`` in a text (first argument), naming the field (second) in errors."""

_GOALS: Final[Mapping[MetricGoal, StudySpec.MetricSpec.GoalType]] = {
    MetricGoal.MAXIMIZE: StudySpec.MetricSpec.GoalType.MAXIMIZE,
    MetricGoal.MINIMIZE: StudySpec.MetricSpec.GoalType.MINIMIZE,
}
_SCALES: Final[Mapping[ParameterScale, StudySpec.ParameterSpec.ScaleType]] = {
    ParameterScale.LINEAR: StudySpec.ParameterSpec.ScaleType.UNIT_LINEAR_SCALE,
    ParameterScale.LOG: StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE,
}
_ALGORITHMS: Final[Mapping[TuningAlgorithm | None, StudySpec.Algorithm]] = {
    None: StudySpec.Algorithm.ALGORITHM_UNSPECIFIED,  # Vertex AI's default: Bayesian optimization
    TuningAlgorithm.GRID: StudySpec.Algorithm.GRID_SEARCH,
    TuningAlgorithm.RANDOM: StudySpec.Algorithm.RANDOM_SEARCH,
}


@contextmanager
def _field(template: str, field: str) -> Iterator[None]:
    """What a proto constructor refuses (a number its field cannot hold, a value of the wrong
    type) as the ``InvalidJobSpec`` naming the template and the field: a bare ValueError would
    be taken for a transient failure and redelivered forever. The config loader refuses these
    first; a Template built in code reaches here unchecked."""
    try:
        yield
    except (ValueError, TypeError, OverflowError) as error:
        raise InvalidJobSpec(f"template {template!r}, {field}: {error}") from error


def tuning_job(
    job: CustomJob, tuning: HyperparameterTuning, *, template: str
) -> HyperparameterTuningJob:
    """The ``HyperparameterTuningJob`` whose every trial runs ``job``'s spec (``template``: its
    name, for errors)."""
    sweep = HyperparameterTuningJob(
        display_name=job.display_name,
        study_spec=study_spec(tuning, template=template),
        trial_job_spec=CustomJobSpec(job.job_spec),
        labels=dict(job.labels),
    )
    for key, field, number in (
        ("max_trials", "max_trial_count", tuning.max_trials),
        ("parallel_trials", "parallel_trial_count", tuning.parallel_trials),
        ("max_failed_trials", "max_failed_trial_count", tuning.max_failed_trials),
    ):
        with _field(template, f"hyperparameter_tuning.{key}"):
            setattr(sweep, field, number)
    if "encryption_spec" in job:
        sweep.encryption_spec = job.encryption_spec
    return sweep


def study_spec(tuning: HyperparameterTuning, *, template: str) -> StudySpec:
    """The study: metrics in the order written, parameters with their value specs, algorithm."""
    metrics = []
    for metric_id, goal in tuning.metrics:
        with _field(template, f"hyperparameter_tuning.metrics.{metric_id}"):
            metrics.append(StudySpec.MetricSpec(metric_id=metric_id, goal=_GOALS[goal]))
    parameters = []
    for parameter in tuning.parameters:
        with _field(template, f"hyperparameter_tuning.parameters.{parameter.parameter_id}"):
            parameters.append(parameter_spec(parameter))
    return StudySpec(
        metrics=metrics, parameters=parameters, algorithm=_ALGORITHMS[tuning.algorithm]
    )


def parameter_spec(parameter: TuningParameter) -> StudySpec.ParameterSpec:
    """One parameter's spec; its scale only where Vertex AI has one (not for categorical)."""
    spec = StudySpec.ParameterSpec(parameter_id=parameter.parameter_id)
    kind = parameter.type
    if kind is ParameterType.DOUBLE:
        spec.double_value_spec = StudySpec.ParameterSpec.DoubleValueSpec(
            min_value=float(_bound(parameter.min, parameter, "min")),
            max_value=float(_bound(parameter.max, parameter, "max")),
        )
    elif kind is ParameterType.INTEGER:
        spec.integer_value_spec = StudySpec.ParameterSpec.IntegerValueSpec(
            min_value=int(_bound(parameter.min, parameter, "min")),
            max_value=int(_bound(parameter.max, parameter, "max")),
        )
    elif kind is ParameterType.DISCRETE:
        spec.discrete_value_spec = StudySpec.ParameterSpec.DiscreteValueSpec(
            values=[_number(value, parameter) for value in parameter.values]
        )
    else:
        spec.categorical_value_spec = StudySpec.ParameterSpec.CategoricalValueSpec(
            values=[str(value) for value in parameter.values]
        )
    if parameter.scale is not None and kind is not ParameterType.CATEGORICAL:
        spec.scale_type = _SCALES[parameter.scale]
    return spec


def _number(value: float | str, parameter: TuningParameter) -> float:
    # What the message cannot hold is refused here (the config loader refuses it first); the
    # ValueError becomes the InvalidJobSpec naming the parameter (_field).
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError(
        f"discrete value {value!r} is not a number: use numbers, or make the parameter categorical"
    )


def _bound(value: float | None, parameter: TuningParameter, which: str) -> float:
    # The config loader refuses a range without both bounds; a Template built in code could
    # still lack one, and a silent 0 would sweep the wrong range. (The ValueError becomes the
    # InvalidJobSpec naming the parameter: _field.)
    if value is None:
        raise ValueError(
            f"a {parameter.type.value} range needs both min and max ({which} is missing): "
            f"set {which}"
        )
    # A double field holds inf and nan; no sweep range means them (the loader refuses them).
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{which} {value} is not a finite number: set a finite {which}")
    return value


def training_pipeline(
    job: CustomJob, spec: TrainingPipelineSpec, *, fill: Filler, template: str
) -> TrainingPipeline:
    """The ``TrainingPipeline`` whose training task (custom task) is ``job``'s spec, uploading
    the template's model when training succeeds (``fill`` fills its placeholders; ``template``:
    its name, for errors)."""
    pipeline = TrainingPipeline(
        display_name=job.display_name,
        training_task_definition=CUSTOM_TASK_DEFINITION,
        training_task_inputs=task_inputs(job.job_spec),
        labels=dict(job.labels),
    )
    if spec.model is not None:
        with _field(template, "training_pipeline.model"):
            pipeline.model_to_upload = model_to_upload(spec.model, fill=fill)
    if "encryption_spec" in job:
        pipeline.encryption_spec = job.encryption_spec
    return pipeline


def task_inputs(spec: CustomJobSpec) -> dict[str, Any]:
    """The custom task's inputs: the CustomJobSpec as REST JSON (camelCase, enum names), which is
    what the custom task schema reads (workerPoolSpecs, baseOutputDirectory, scheduling, ...);
    the message's ``training_task_inputs`` (a ``Value``) takes it as it is."""
    text = CustomJobSpec.to_json(
        spec, use_integers_for_enums=False, always_print_fields_with_no_presence=False
    )
    inputs: dict[str, Any] = json.loads(text)
    return inputs


def model_to_upload(model: ModelUpload, *, fill: Filler) -> Model:
    """The Model Registry entry: display name, serving container, and the artifacts' URI (unset
    when the template names none: Vertex AI then uses the training's ``model/`` output)."""
    upload = Model(
        # Cut like the job's: placeholders can make a name longer than Vertex AI takes.
        display_name=fill(model.display_name, MODEL_DISPLAY_NAME_FIELD)[:DISPLAY_NAME_MAX],
        container_spec=ModelContainerSpec(image_uri=model.serving_image),
    )
    if model.artifact_uri is not None:
        upload.artifact_uri = fill(model.artifact_uri, MODEL_ARTIFACT_URI_FIELD)
    return upload
