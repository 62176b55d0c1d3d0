"""Sweeps and pipelines from files users already have: a ``gcloud ai hp-tuning-jobs create
--config`` YAML, a ``HyperparameterTuningJob`` REST body and a ``TrainingPipeline`` REST body."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from config_builders import SERVICE_ACCOUNT, base_config, parse

from shared.config.model import (
    CUSTOM_TASK_DEFINITION,
    FlexStartPlacement,
    HyperparameterTuning,
    MetricGoal,
    ModelUpload,
    ParameterScale,
    ParameterType,
    PersistentResourcePlacement,
    TrainingPipelineSpec,
    TuningAlgorithm,
    TuningParameter,
)
from shared.config.origins import kind_path, user_path
from shared.config.problems import InvalidConfig
from shared.model.job_kinds import JobKind

IMAGE = "us-docker.pkg.dev/acme-ml/train/resnet:1.4"
SERVING_IMAGE = "us-docker.pkg.dev/acme-ml/train/serving:1.0"
POOL = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": IMAGE, "args": ["--data={dataset_uri}"]},
}
STUDY_SPEC = {
    "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
    "parameters": [
        {
            "parameterId": "learning_rate",
            "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
            "scaleType": "UNIT_LOG_SCALE",
        },
        # int64 values: REST JSON writes them as text
        {"parameterId": "layers", "integerValueSpec": {"minValue": "2", "maxValue": "8"}},
        {"parameterId": "batch_size", "discreteValueSpec": {"values": [64, 32]}},
        {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
    ],
    "algorithm": "RANDOM_SEARCH",
}
# The hp-tuning-jobs --config file: the study, the trial job (FLEX_START, 2h wait), the counts.
GCLOUD_TUNING = {
    "studySpec": STUDY_SPEC,
    "trialJobSpec": {
        "workerPoolSpecs": [POOL],
        "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "7200s", "timeout": "7200s"},
    },
    "maxTrialCount": 20,
    "parallelTrialCount": 4,
}
REST_TUNING = {
    "displayName": "resnet-sweep-{run_id}",
    **GCLOUD_TUNING,
    "maxFailedTrialCount": 2,
    "labels": {"team": "vision"},
}
REST_PIPELINE = {
    "displayName": "resnet-pipeline",
    "trainingTaskDefinition": CUSTOM_TASK_DEFINITION,
    "trainingTaskInputs": {
        "workerPoolSpecs": [POOL],
        "persistentResourceId": "a100-pool",
        "scheduling": {"timeout": "86400s"},
    },
    "modelToUpload": {
        "displayName": "resnet-{run_id}",
        "containerSpec": {"imageUri": SERVING_IMAGE},
        "artifactUri": "gs://acme-runs/resnet/{run_id}/model/",
    },
    "labels": {"team": "vision"},
}
TUNING = HyperparameterTuning(
    metrics=(("accuracy", MetricGoal.MAXIMIZE),),
    parameters=(
        TuningParameter(
            "learning_rate", ParameterType.DOUBLE, min=0.0001, max=0.1, scale=ParameterScale.LOG
        ),
        TuningParameter("layers", ParameterType.INTEGER, min=2, max=8),
        TuningParameter("batch_size", ParameterType.DISCRETE, values=(32.0, 64.0)),
        TuningParameter("optimizer", ParameterType.CATEGORICAL, values=("adam", "sgd")),
    ),
    max_trials=20,
    parallel_trials=4,
    algorithm=TuningAlgorithm.RANDOM,
)


def config_with(tmp_path: Path, key: str, document: dict[str, Any], **template: Any) -> dict:
    name = "job.json" if key == "rest_body" else "job.yaml"
    text = json.dumps(document) if key == "rest_body" else yaml.safe_dump(document)
    (tmp_path / name).write_text(text)
    config = base_config()
    config["templates"]["resnet"] = {
        key: name,
        "params": ["dataset_uri"],
        "service_account": SERVICE_ACCOUNT,
        **template,
    }
    return config


def load(config: dict[str, Any], tmp_path: Path):
    return parse(config, base_dir=tmp_path).templates["resnet"]


def problems_of(config: dict[str, Any], tmp_path: Path) -> list[str]:
    with pytest.raises(InvalidConfig) as raised:
        parse(config, base_dir=tmp_path)
    return [str(problem) for problem in raised.value.problems]


def test_a_gcloud_hp_tuning_config_becomes_a_sweep(tmp_path: Path) -> None:
    template = load(config_with(tmp_path, "gcloud_config", GCLOUD_TUNING), tmp_path)

    assert template.kind is JobKind.HYPERPARAMETER_TUNING_JOB
    assert template.hyperparameter_tuning == TUNING
    # the trial job spec is the template's job; its placement and timeout move to the template
    assert template.job_spec == {"workerPoolSpecs": [POOL], "serviceAccount": SERVICE_ACCOUNT}
    assert template.placements == (FlexStartPlacement(max_wait=timedelta(hours=2)),)
    assert template.timeout == timedelta(hours=2)
    file = "templates.resnet.gcloud_config(job.yaml)"
    assert kind_path(template, "max_trials") == f"{file}.maxTrialCount"
    assert kind_path(template, "parameters") == f"{file}.studySpec.parameters"
    assert kind_path(template, "max_failed_trials") == (
        "templates.resnet.hyperparameter_tuning.max_failed_trials"
    )
    assert user_path(template, "jobSpec.workerPoolSpecs[0].containerSpec.imageUri") == (
        f"{file}.trialJobSpec.workerPoolSpecs[0].containerSpec.imageUri"
    )


def test_a_rest_tuning_body_becomes_a_sweep_with_its_name_and_labels(tmp_path: Path) -> None:
    template = load(config_with(tmp_path, "rest_body", REST_TUNING), tmp_path)

    assert template.kind is JobKind.HYPERPARAMETER_TUNING_JOB
    assert template.hyperparameter_tuning == HyperparameterTuning(
        **{**TUNING.__dict__, "max_failed_trials": 2}
    )
    assert template.display_name == "resnet-sweep-{run_id}"
    assert template.labels == {"team": "vision"}


def test_a_rest_training_pipeline_body_becomes_a_pipeline(tmp_path: Path) -> None:
    template = load(config_with(tmp_path, "rest_body", REST_PIPELINE), tmp_path)

    assert template.kind is JobKind.TRAINING_PIPELINE
    assert template.training_pipeline == TrainingPipelineSpec(
        model=ModelUpload(
            display_name="resnet-{run_id}",
            serving_image=SERVING_IMAGE,
            artifact_uri="gs://acme-runs/resnet/{run_id}/model/",
        )
    )
    assert template.placements == (PersistentResourcePlacement(resource_id="a100-pool"),)
    assert template.timeout == timedelta(days=1)
    assert template.job_spec == {"workerPoolSpecs": [POOL], "serviceAccount": SERVICE_ACCOUNT}
    body = "templates.resnet.rest_body(job.json)"
    assert kind_path(template, "model.serving_image") == (
        f"{body}.modelToUpload.containerSpec.imageUri"
    )
    without_model = {key: value for key, value in REST_PIPELINE.items() if key != "modelToUpload"}
    bare = load(config_with(tmp_path, "rest_body", without_model), tmp_path)
    assert bare.training_pipeline == TrainingPipelineSpec()


def test_the_templates_own_keys_override_the_files_values(tmp_path: Path) -> None:
    config = config_with(
        tmp_path,
        "gcloud_config",
        GCLOUD_TUNING,
        hyperparameter_tuning={
            "max_trials": 8,
            "algorithm": "grid",
            "parameters": {"layers": {"integer": {"min": 2, "max": 8}}},
        },
    )
    template = load(config, tmp_path)

    tuning = template.hyperparameter_tuning
    assert tuning is not None
    assert (tuning.max_trials, tuning.parallel_trials, tuning.algorithm) == (
        8,
        4,
        TuningAlgorithm.GRID,
    )
    assert tuning.parameters == (TuningParameter("layers", ParameterType.INTEGER, min=2, max=8),)
    assert tuning.metrics == TUNING.metrics
    assert kind_path(template, "max_trials") == "templates.resnet.hyperparameter_tuning.max_trials"

    pipeline = config_with(
        tmp_path,
        "rest_body",
        REST_PIPELINE,
        training_pipeline={"model": {"display_name": "resnet-final"}},
    )
    model = load(pipeline, tmp_path).training_pipeline
    assert model is not None and model.model is not None
    assert (model.model.display_name, model.model.serving_image) == ("resnet-final", SERVING_IMAGE)


def test_a_rule_spanning_the_file_and_the_template_names_each_where_written(
    tmp_path: Path,
) -> None:
    config = config_with(
        tmp_path, "gcloud_config", GCLOUD_TUNING, hyperparameter_tuning={"max_trials": 3}
    )

    assert problems_of(config, tmp_path) == [
        "templates.resnet.gcloud_config(job.yaml).parallelTrialCount: 4 trials run at once, "
        "but max_trials (templates.resnet.hyperparameter_tuning.max_trials) is 3: lower "
        "parallel_trials to at most 3, or raise max_trials"
    ]


def _changed(document: dict[str, Any], path: list[Any], value: object) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    if value is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return changed


GCLOUD = "templates.resnet.gcloud_config(job.yaml)"
BODY = "templates.resnet.rest_body(job.json)"
PARAMETERS = f"{GCLOUD}.studySpec.parameters"


@pytest.mark.parametrize(
    ("key", "document", "template", "expected_path", "expected"),
    [
        (
            "gcloud_config",
            _changed(
                GCLOUD_TUNING, ["studySpec", "decayCurveStoppingSpec"], {"useElapsedDuration": True}
            ),
            {},
            f"{GCLOUD}.studySpec.decayCurveStoppingSpec",
            "early stopping is not set by vertex-dispatch; remove it from the file",
        ),
        (
            "gcloud_config",
            _changed(
                GCLOUD_TUNING, ["studySpec", "parameters", 0, "scaleType"], "UNIT_REVERSE_LOG_SCALE"
            ),
            {},
            f"{PARAMETERS}[0].scaleType",
            "UNIT_REVERSE_LOG_SCALE is not supported",
        ),
        (
            "gcloud_config",
            _changed(
                GCLOUD_TUNING, ["studySpec", "parameters", 1, "conditionalParameterSpecs"], []
            ),
            {},
            f"{PARAMETERS}[1].conditionalParameterSpecs",
            "conditional parameters are not supported",
        ),
        (
            "gcloud_config",
            _changed(
                GCLOUD_TUNING, ["studySpec", "parameters", 1, "integerValueSpec", "maxValue"], "1"
            ),
            {},
            f"{PARAMETERS}[1].integerValueSpec.maxValue",
            "a range needs min < max",
        ),
        (
            "gcloud_config",
            _changed(
                GCLOUD_TUNING, ["studySpec", "parameters", 0, "doubleValueSpec", "minValue"], -1
            ),
            {},
            f"{PARAMETERS}[0].doubleValueSpec.minValue",
            "scale: log samples the logarithm",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "parameters", 3, "parameterId"], "layers"),
            {},
            f"{PARAMETERS}[3].parameterId",
            "parameter 'layers' is listed twice",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "metrics"], []),
            {},
            f"{GCLOUD}.studySpec.metrics",
            "is empty",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "metrics", 0, "goal"], "GOAL_TYPE_UNSPECIFIED"),
            {},
            f"{GCLOUD}.studySpec.metrics[0].goal",
            "expected MAXIMIZE or MINIMIZE",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["maxTrialCount"], None),
            {},
            "templates.resnet.hyperparameter_tuning.max_trials",
            "is required",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "algorithm"], "BAYESIAN"),
            {},
            f"{GCLOUD}.studySpec.algorithm",
            "expected one of ALGORITHM_UNSPECIFIED, GRID_SEARCH, RANDOM_SEARCH",
        ),
        # A list or a mapping where a name is expected (unhashable: looked up, it would raise
        # TypeError instead of naming the key).
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "algorithm"], ["GRID_SEARCH"]),
            {},
            f"{GCLOUD}.studySpec.algorithm",
            "expected one of ALGORITHM_UNSPECIFIED, GRID_SEARCH, RANDOM_SEARCH",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "algorithm"], {"name": "GRID_SEARCH"}),
            {},
            f"{GCLOUD}.studySpec.algorithm",
            "expected one of ALGORITHM_UNSPECIFIED, GRID_SEARCH, RANDOM_SEARCH",
        ),
        (
            "gcloud_config",
            _changed(
                GCLOUD_TUNING, ["studySpec", "parameters", 0, "scaleType"], ["UNIT_LOG_SCALE"]
            ),
            {},
            f"{PARAMETERS}[0].scaleType",
            "expected one of SCALE_TYPE_UNSPECIFIED, UNIT_LINEAR_SCALE, UNIT_LOG_SCALE",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "parameters", 0, "scaleType"], {"a": 1}),
            {},
            f"{PARAMETERS}[0].scaleType",
            "expected one of SCALE_TYPE_UNSPECIFIED, UNIT_LINEAR_SCALE, UNIT_LOG_SCALE",
        ),
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["studySpec", "metrics", 0, "goal"], ["MAXIMIZE"]),
            {},
            f"{GCLOUD}.studySpec.metrics[0].goal",
            "expected MAXIMIZE or MINIMIZE",
        ),
        # the messages' field widths (REST JSON writes int64 as text)
        (
            "gcloud_config",
            _changed(GCLOUD_TUNING, ["maxTrialCount"], 2**31),
            {},
            f"{GCLOUD}.maxTrialCount",
            "from 1 to 2147483647",
        ),
        (
            "rest_body",
            _changed(REST_TUNING, ["parallelTrialCount"], str(2**31)),
            {},
            f"{BODY}.parallelTrialCount",
            "from 1 to 2147483647",
        ),
        (
            "rest_body",
            _changed(REST_TUNING, ["maxFailedTrialCount"], 2**40),
            {},
            f"{BODY}.maxFailedTrialCount",
            "from 0 to 2147483647",
        ),
        (
            "rest_body",
            _changed(
                REST_TUNING,
                ["studySpec", "parameters", 1, "integerValueSpec", "maxValue"],
                str(2**63),
            ),
            {},
            f"{BODY}.studySpec.parameters[1].integerValueSpec.maxValue",
            "an integer parameter's bounds are 64-bit",
        ),
        (
            "gcloud_config",
            {**GCLOUD_TUNING, "displayName": "x"},
            {},
            f"{GCLOUD}.displayName",
            "unknown key 'displayName'",
        ),
        (
            "gcloud_config",
            REST_PIPELINE,
            {},
            GCLOUD,
            "name it with rest_body instead of gcloud_config",
        ),
        (
            "rest_body",
            {
                **REST_PIPELINE,
                "trainingTaskDefinition": "gs://google-cloud-aiplatform/schema/"
                "trainingjob/definition/automl_tabular_1.0.0.yaml",
            },
            {},
            f"{BODY}.trainingTaskDefinition",
            "vertex-dispatch builds custom-task pipelines only: set it to "
            + CUSTOM_TASK_DEFINITION,
        ),
        (
            "rest_body",
            _changed(REST_PIPELINE, ["trainingTaskInputs"], None),
            {},
            f"{BODY}.trainingTaskInputs",
            "is required",
        ),
        (
            "rest_body",
            {**REST_PIPELINE, "inputDataConfig": {"datasetId": "1"}},
            {},
            f"{BODY}.inputDataConfig",
            "a custom-task pipeline reads its data itself",
        ),
        (
            "rest_body",
            _changed(
                REST_PIPELINE,
                ["modelToUpload", "containerSpec", "ports"],
                [{"containerPort": 8080}],
            ),
            {},
            f"{BODY}.modelToUpload.containerSpec.ports",
            "vertex-dispatch sets only the serving container's imageUri",
        ),
        (
            "rest_body",
            _changed(REST_PIPELINE, ["modelToUpload", "displayName"], "resnet-{version}"),
            {},
            f"{BODY}.modelToUpload.displayName",
            "placeholder {version} is neither a declared param nor a built-in",
        ),
        (
            "rest_body",
            REST_TUNING,
            {"training_pipeline": {}},
            "templates.resnet.training_pipeline",
            "is a HyperparameterTuningJob, and a job is of one kind",
        ),
        (
            "rest_body",
            REST_PIPELINE,
            {"hyperparameter_tuning": {"max_trials": 2}},
            "templates.resnet.hyperparameter_tuning",
            "is a TrainingPipeline, and a job is of one kind",
        ),
    ],
)
def test_each_broken_file_is_named_in_the_file(
    tmp_path: Path,
    key: str,
    document: dict[str, Any],
    template: dict[str, Any],
    expected_path: str,
    expected: str,
) -> None:
    found = problems_of(config_with(tmp_path, key, document, **template), tmp_path)

    assert any(p.startswith(f"{expected_path}: ") and expected in p for p in found), found


def test_a_custom_job_file_with_a_tuning_block_becomes_a_sweep(tmp_path: Path) -> None:
    custom = {
        "workerPoolSpecs": [POOL],
        "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "3600s"},
    }
    config = config_with(
        tmp_path,
        "gcloud_config",
        custom,
        timeout="2h",
        hyperparameter_tuning={
            "metrics": {"loss": "minimize"},
            "parameters": {"dropout": {"double": {"min": 0.1, "max": 0.5}}},
            "max_trials": 6,
        },
    )

    template = load(config, tmp_path)

    assert template.kind is JobKind.HYPERPARAMETER_TUNING_JOB
    assert template.hyperparameter_tuning == HyperparameterTuning(
        metrics=(("loss", MetricGoal.MINIMIZE),),
        parameters=(TuningParameter("dropout", ParameterType.DOUBLE, min=0.1, max=0.5),),
        max_trials=6,
    )
