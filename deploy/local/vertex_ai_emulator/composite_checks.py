"""The create-time checks of a HyperparameterTuningJob's and a TrainingPipeline's own fields.

What runs (the trial job, the training task) is checked afterwards as a CustomJob by checks.py,
its errors naming the request's fields. Errors use the service's field-error format
(checks.format_violations). The emulator serves the custom training task only: a pipeline with
another `training_task_definition` (AutoML...) is refused.
"""

from __future__ import annotations

import json

from google.cloud import aiplatform_v1
from google.protobuf import json_format

from vertex_ai_emulator.checks import REQUIRED, FieldViolation, format_violations
from vertex_ai_emulator.errors import invalid_argument

CUSTOM_TASK_DEFINITION = (
    "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
)
StudySpec = aiplatform_v1.StudySpec
_VALUE_SPECS = (
    "double_value_spec",
    "integer_value_spec",
    "discrete_value_spec",
    "categorical_value_spec",
)


def check_tuning_job(job: aiplatform_v1.HyperparameterTuningJob) -> None:
    """Raise EmulatorError INVALID_ARGUMENT for a tuning job the service would refuse (its
    study spec and trial counts)."""
    root = "hyperparameter_tuning_job"
    violations: list[FieldViolation] = []
    study = job.study_spec
    if not study.metrics:
        violations.append(FieldViolation(f"{root}.study_spec.metrics", REQUIRED))
    for index, metric in enumerate(study.metrics):
        where = f"{root}.study_spec.metrics[{index}]"
        if not metric.metric_id:
            violations.append(FieldViolation(f"{where}.metric_id", REQUIRED))
        if metric.goal == StudySpec.MetricSpec.GoalType.GOAL_TYPE_UNSPECIFIED:
            violations.append(FieldViolation(f"{where}.goal", REQUIRED))
    if not study.parameters:
        violations.append(FieldViolation(f"{root}.study_spec.parameters", REQUIRED))
    for index, parameter in enumerate(study.parameters):
        violations += _parameter_violations(f"{root}.study_spec.parameters[{index}]", parameter)
    if job.max_trial_count <= 0:
        violations.append(
            FieldViolation(f"{root}.max_trial_count", "Must be set to a positive number")
        )
    if job.parallel_trial_count <= 0:
        violations.append(
            FieldViolation(f"{root}.parallel_trial_count", "Must be set to a positive number")
        )
    if job.max_failed_trial_count < 0:
        violations.append(FieldViolation(f"{root}.max_failed_trial_count", "Must not be negative"))
    if violations:
        raise invalid_argument(format_violations(violations))


def check_training_pipeline(
    pipeline: aiplatform_v1.TrainingPipeline,
) -> aiplatform_v1.CustomJobSpec:
    """The training task's CustomJobSpec; raises EmulatorError INVALID_ARGUMENT for a pipeline
    the emulator would refuse (not the custom task, inputs that are no CustomJobSpec, a model to
    upload without its required fields)."""
    root = "training_pipeline"
    violations: list[FieldViolation] = []
    if pipeline.training_task_definition != CUSTOM_TASK_DEFINITION:
        violations.append(
            FieldViolation(
                f"{root}.training_task_definition",
                f"The emulator serves the custom training task only: "
                f"{CUSTOM_TASK_DEFINITION}, got {pipeline.training_task_definition!r}",
            )
        )
    spec = aiplatform_v1.CustomJobSpec()
    inputs = json_format.MessageToDict(
        aiplatform_v1.TrainingPipeline.pb(pipeline).training_task_inputs
    )
    if not isinstance(inputs, dict) or not inputs:
        violations.append(FieldViolation(f"{root}.training_task_inputs", REQUIRED))
    else:
        try:
            parsed = aiplatform_v1.CustomJobSpec.from_json(json.dumps(inputs))
            spec = aiplatform_v1.CustomJobSpec(parsed)
        except json_format.ParseError as error:
            violations.append(
                FieldViolation(
                    f"{root}.training_task_inputs",
                    f"Not a CustomJobSpec of the custom training task: {error}",
                )
            )
    if "model_to_upload" in pipeline:
        model = pipeline.model_to_upload
        if not model.display_name:
            violations.append(FieldViolation(f"{root}.model_to_upload.display_name", REQUIRED))
        if not model.container_spec.image_uri:
            violations.append(
                FieldViolation(f"{root}.model_to_upload.container_spec.image_uri", REQUIRED)
            )
    if violations:
        raise invalid_argument(format_violations(violations))
    return spec


def _parameter_violations(where: str, parameter: StudySpec.ParameterSpec) -> list[FieldViolation]:
    violations = []
    if not parameter.parameter_id:
        violations.append(FieldViolation(f"{where}.parameter_id", REQUIRED))
    kinds = [kind for kind in _VALUE_SPECS if kind in parameter]
    if len(kinds) != 1:
        return [
            *violations,
            FieldViolation(where, f"Exactly one of {', '.join(_VALUE_SPECS)} must be set"),
        ]
    log = parameter.scale_type in (
        StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE,
        StudySpec.ParameterSpec.ScaleType.UNIT_REVERSE_LOG_SCALE,
    )
    kind = kinds[0]
    if kind in ("double_value_spec", "integer_value_spec"):
        bounds = getattr(parameter, kind)
        if bounds.min_value > bounds.max_value:
            violations.append(
                FieldViolation(
                    f"{where}.{kind}",
                    f"min_value ({bounds.min_value}) must not be above max_value "
                    f"({bounds.max_value})",
                )
            )
        if log and bounds.min_value <= 0:
            violations.append(
                FieldViolation(f"{where}.{kind}.min_value", "A log scale needs a min_value above 0")
            )
    elif not getattr(parameter, kind).values:
        violations.append(FieldViolation(f"{where}.{kind}.values", REQUIRED))
    return violations
