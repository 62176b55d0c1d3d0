"""Rendering sweep and pipeline templates: the HyperparameterTuningJob and TrainingPipeline that
are created, as the REST API shows them, and the job that runs inside each (``custom_job``),
which ``view_of`` must give back from the created message (the reconciler reads the view)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.aiplatform import CustomJob, HyperparameterTuningJob, TrainingPipeline
from shared.config.model import (
    CUSTOM_TASK_DEFINITION,
    DISPLAY_NAME_MAX,
    FlexStartPlacement,
    HyperparameterTuning,
    MetricGoal,
    ModelUpload,
    ParameterScale,
    ParameterType,
    PersistentResourcePlacement,
    Placement,
    Template,
    TrainingPipelineSpec,
    TuningAlgorithm,
    TuningParameter,
)
from shared.model.errors import InvalidJobSpec
from shared.model.job_kinds import JobKind
from shared.policy.job_views import view_of
from shared.policy.jobspec import RenderedJob, job_to_json, placeholders, render_job

RUN_ID = "r-3f2a9c0d1e4b5a6978877665"
KEY = "projects/acme-ml/locations/{region}/keyRings/train/cryptoKeys/jobs"
POOL: dict[str, Any] = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": "gcr.io/acme/train:1", "args": ["--data={dataset_uri}"]},
}
SPEC: dict[str, Any] = {
    "workerPoolSpecs": [POOL],
    "baseOutputDirectory": {"outputUriPrefix": "gs://acme-out/{run_id}/"},
}
FLEX = FlexStartPlacement(max_wait=timedelta(hours=2))
PERSISTENT = PersistentResourcePlacement(resource_id="a100-pool", region="us-east4")
PARAMS = {"dataset_uri": "gs://acme-data/2026-12-01/"}

SWEEP = HyperparameterTuning(
    metrics=(("accuracy", MetricGoal.MAXIMIZE), ("loss", MetricGoal.MINIMIZE)),
    parameters=(
        TuningParameter("lr", ParameterType.DOUBLE, min=1e-4, max=1e-1, scale=ParameterScale.LOG),
        TuningParameter("layers", ParameterType.INTEGER, min=2, max=8),
        TuningParameter(
            "batch", ParameterType.DISCRETE, values=(32, 64, 128), scale=ParameterScale.LINEAR
        ),
        # A scale on a categorical parameter means nothing to Vertex AI: it is left out.
        TuningParameter(
            "opt", ParameterType.CATEGORICAL, values=("adam", "sgd"), scale=ParameterScale.LINEAR
        ),
    ),
    max_trials=20,
    parallel_trials=4,
    max_failed_trials=3,
    algorithm=TuningAlgorithm.RANDOM,
)
MODEL = ModelUpload(
    display_name="resnet-{run_id}",
    serving_image="us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-1:latest",
    artifact_uri="gs://acme-out/{run_id}/model/",
)


def template(**fields: Any) -> Template:
    return Template(
        **{
            "name": "resnet-sweep",
            "display_name": "resnet-{run_id}",
            "job_spec": SPEC,
            "placements": (FLEX, PERSISTENT),
            "timeout": timedelta(hours=6),
            **fields,
        }
    )


def render(tpl: Template, placement: Placement = FLEX) -> RenderedJob:
    return render_job(
        tpl,
        PARAMS,
        placement,
        project="acme-ml",
        default_region="us-central1",
        run_id=RUN_ID,
        attempt=2,
    )


def rest(job: Any) -> dict[str, Any]:
    return json.loads(job_to_json(job))


LABELS = {"vd-run": RUN_ID, "vd-attempt": "2", "vd-template": "resnet-sweep"}
FILLED_POOL = {
    **POOL,
    "replicaCount": "1",  # int64 prints as a string
    "containerSpec": {
        "imageUri": "gcr.io/acme/train:1",
        "args": ["--data=gs://acme-data/2026-12-01/"],
    },
}
FLEX_SPEC = {
    "workerPoolSpecs": [FILLED_POOL],
    "baseOutputDirectory": {"outputUriPrefix": f"gs://acme-out/{RUN_ID}/"},
    "scheduling": {"timeout": "21600s", "strategy": "FLEX_START", "maxWaitDuration": "7200s"},
}
# A sweep's attempt writes under its own directory: its trials start over (docs/architecture.md,
# "Resume"), so attempt 2's trial N never meets attempt 1's.
SWEEP_SPEC = {
    **FLEX_SPEC,
    "baseOutputDirectory": {"outputUriPrefix": f"gs://acme-out/{RUN_ID}/attempt-2/"},
}


def test_a_sweep_is_a_tuning_job_whose_trial_job_is_the_rendered_job() -> None:
    rendered = render(template(hyperparameter_tuning=SWEEP))
    assert rendered.kind is JobKind.HYPERPARAMETER_TUNING_JOB
    assert isinstance(rendered.resource, HyperparameterTuningJob)
    assert rendered.resource is rendered.tuning_job
    assert rendered.training_pipeline is None
    assert rest(rendered.resource) == {
        "displayName": f"resnet-{RUN_ID}",
        "studySpec": {
            "metrics": [
                {"metricId": "accuracy", "goal": "MAXIMIZE"},
                {"metricId": "loss", "goal": "MINIMIZE"},
            ],
            "parameters": [
                {
                    "parameterId": "lr",
                    "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
                    "scaleType": "UNIT_LOG_SCALE",
                },
                {"parameterId": "layers", "integerValueSpec": {"minValue": "2", "maxValue": "8"}},
                {
                    "parameterId": "batch",
                    "discreteValueSpec": {"values": [32.0, 64.0, 128.0]},
                    "scaleType": "UNIT_LINEAR_SCALE",
                },
                {"parameterId": "opt", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
            ],
            "algorithm": "RANDOM_SEARCH",
        },
        "maxTrialCount": 20,
        "parallelTrialCount": 4,
        "maxFailedTrialCount": 3,
        "trialJobSpec": SWEEP_SPEC,
        "labels": LABELS,
    }
    # The job that runs is a trial: the same spec, checked by every placement rule.
    assert rest(rendered.custom_job)["jobSpec"] == SWEEP_SPEC


@pytest.mark.parametrize(
    ("algorithm", "shown"),
    [
        (None, None),
        (TuningAlgorithm.GRID, "GRID_SEARCH"),
        (TuningAlgorithm.RANDOM, "RANDOM_SEARCH"),
    ],
)
def test_the_algorithm_unset_is_vertex_ais_default(
    algorithm: TuningAlgorithm | None, shown: str | None
) -> None:
    tuning = HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(TuningParameter("lr", ParameterType.DOUBLE, min=0.01, max=0.1),),
        max_trials=1,
        algorithm=algorithm,
    )
    body = rest(render(template(hyperparameter_tuning=tuning)).resource)
    assert body["studySpec"].get("algorithm") == shown
    # Defaults: one trial at a time; 0 failed trials = Vertex AI decides (printed as absent).
    assert body["maxTrialCount"] == 1
    assert body["parallelTrialCount"] == 1
    assert "maxFailedTrialCount" not in body


def test_a_range_without_a_bound_is_refused_not_swept_from_zero() -> None:
    tuning = HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(TuningParameter("lr", ParameterType.DOUBLE, max=0.1),),
        max_trials=1,
    )
    with pytest.raises(InvalidJobSpec, match=r"parameters\.lr.*min is missing"):
        render(template(hyperparameter_tuning=tuning))


def test_a_discrete_value_that_is_no_number_is_refused() -> None:
    tuning = HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(TuningParameter("batch", ParameterType.DISCRETE, values=(32, "big")),),
        max_trials=1,
    )
    with pytest.raises(InvalidJobSpec, match=r"parameters\.batch.*'big' is not a number"):
        render(template(hyperparameter_tuning=tuning))


def _one_parameter(parameter: TuningParameter, **counts: int) -> HyperparameterTuning:
    return HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(parameter,),
        **{"max_trials": 1, **counts},
    )


LAYERS = TuningParameter("layers", ParameterType.INTEGER, min=2, max=8)


# A Template built in code skips the loader's bounds: what the proto constructors refuse is the
# InvalidJobSpec naming the template and the field (a bare ValueError would be redelivered).
@pytest.mark.parametrize(
    ("tuning", "field"),
    [
        (_one_parameter(LAYERS, max_trials=2**31), r"hyperparameter_tuning\.max_trials"),
        (
            _one_parameter(LAYERS, max_trials=2, parallel_trials=2**31),
            r"hyperparameter_tuning\.parallel_trials",
        ),
        (
            _one_parameter(LAYERS, max_trials=2, max_failed_trials=-(2**40)),
            r"hyperparameter_tuning\.max_failed_trials",
        ),
        (
            _one_parameter(TuningParameter("layers", ParameterType.INTEGER, min=2, max=2**63)),
            r"hyperparameter_tuning\.parameters\.layers",
        ),
        (
            _one_parameter(TuningParameter("lr", ParameterType.DOUBLE, min=0.0, max=float("inf"))),
            r"hyperparameter_tuning\.parameters\.lr: max inf is not a finite number",
        ),
        (
            _one_parameter(
                TuningParameter("layers", ParameterType.INTEGER, min=float("-inf"), max=8)
            ),
            r"hyperparameter_tuning\.parameters\.layers: min -inf is not a finite number",
        ),
    ],
)
def test_what_a_tuning_message_cannot_hold_is_refused_naming_the_field(
    tuning: HyperparameterTuning, field: str
) -> None:
    with pytest.raises(InvalidJobSpec, match=rf"^template 'resnet-sweep', {field}"):
        render(template(hyperparameter_tuning=tuning))


def test_a_pipeline_is_a_custom_task_whose_inputs_are_the_rendered_spec() -> None:
    rendered = render(template(training_pipeline=TrainingPipelineSpec(model=MODEL)))
    assert rendered.kind is JobKind.TRAINING_PIPELINE
    assert isinstance(rendered.resource, TrainingPipeline)
    assert rendered.resource is rendered.training_pipeline
    assert rendered.tuning_job is None
    body = rest(rendered.resource)
    assert body == {
        "displayName": f"resnet-{RUN_ID}",
        "trainingTaskDefinition": CUSTOM_TASK_DEFINITION,
        "trainingTaskInputs": FLEX_SPEC,
        "modelToUpload": {
            "displayName": f"resnet-{RUN_ID}",
            "containerSpec": {"imageUri": MODEL.serving_image},
            "artifactUri": f"gs://acme-out/{RUN_ID}/model/",
        },
        "labels": LABELS,
    }
    assert CUSTOM_TASK_DEFINITION.endswith("/trainingjob/definition/custom_task_1.0.0.yaml")


def test_a_pipeline_on_a_persistent_resource_trains_there_without_flex_start() -> None:
    tpl = template(training_pipeline=TrainingPipelineSpec(model=MODEL))
    rendered = render(tpl, PERSISTENT)
    inputs = rest(rendered.resource)["trainingTaskInputs"]
    assert rendered.parent == "projects/acme-ml/locations/us-east4"
    assert inputs["persistentResourceId"] == "a100-pool"
    assert inputs["scheduling"] == {"timeout": "21600s"}


def test_a_pipeline_without_a_model_or_its_uri() -> None:
    bare = rest(render(template(training_pipeline=TrainingPipelineSpec())).resource)
    assert "modelToUpload" not in bare
    no_uri = ModelUpload(display_name="resnet", serving_image="gcr.io/acme/serve:1")
    upload = rest(render(template(training_pipeline=TrainingPipelineSpec(model=no_uri))).resource)
    assert upload["modelToUpload"] == {
        "displayName": "resnet",
        "containerSpec": {"imageUri": "gcr.io/acme/serve:1"},
    }


def test_a_model_placeholder_naming_no_parameter_is_refused_naming_the_field() -> None:
    model = ModelUpload(display_name="m", serving_image="s", artifact_uri="gs://b/{nowhere}/")
    tpl = template(training_pipeline=TrainingPipelineSpec(model=model))
    with pytest.raises(InvalidJobSpec, match=r"modelToUpload\.artifactUri.*\{nowhere\}"):
        render(tpl)


def test_placeholders_include_the_models() -> None:
    model = ModelUpload(
        display_name="m-{version}", serving_image="s", artifact_uri="gs://b/{run_id}/{dataset_uri}"
    )
    tpl = template(training_pipeline=TrainingPipelineSpec(model=model))
    assert placeholders(tpl) == {"run_id", "dataset_uri", "version"}


@pytest.mark.parametrize("kind", ["sweep", "pipeline"])
def test_the_encryption_key_of_the_region_covers_the_created_job(kind: str) -> None:
    block: dict[str, Any] = (
        {"hyperparameter_tuning": SWEEP}
        if kind == "sweep"
        else {"training_pipeline": TrainingPipelineSpec(model=MODEL)}
    )
    rendered = render(template(encryption_key=KEY, **block), PERSISTENT)
    assert rest(rendered.resource)["encryptionSpec"] == {
        "kmsKeyName": "projects/acme-ml/locations/us-east4/keyRings/train/cryptoKeys/jobs"
    }


@pytest.mark.parametrize("placement", [FLEX, PERSISTENT], ids=["flex_start", "persistent"])
@pytest.mark.parametrize("kind", ["custom", "sweep", "pipeline"])
def test_the_view_of_what_is_created_is_the_job_that_runs(kind: str, placement: Placement) -> None:
    block: dict[str, Any] = {
        "custom": {},
        "sweep": {"hyperparameter_tuning": SWEEP},
        "pipeline": {"training_pipeline": TrainingPipelineSpec(model=MODEL)},
    }[kind]
    rendered = render(template(encryption_key=KEY, **block), placement)
    view = view_of(rendered.resource)
    assert isinstance(view, CustomJob)
    assert view.job_spec == rendered.custom_job.job_spec
    assert view.display_name == rendered.custom_job.display_name
    assert dict(view.labels) == dict(rendered.custom_job.labels)
    assert view.encryption_spec == rendered.custom_job.encryption_spec


def test_a_custom_job_template_renders_a_custom_job_as_before() -> None:
    rendered = render(template())
    assert rendered.kind is JobKind.CUSTOM_JOB
    assert rendered.resource is rendered.custom_job
    assert rendered.tuning_job is None and rendered.training_pipeline is None
    assert rest(rendered.resource)["jobSpec"] == FLEX_SPEC


def test_a_custom_job_rendering_never_loads_the_sweep_or_pipeline_protos() -> None:
    """The CustomJob path's cold start stays as it was (tests/unit/test_aiplatform_lazy.py);
    a sweep's rendering is what loads them."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from shared.config.model import Template, FlexStartPlacement
        from shared.policy.jobspec import render_job
        from datetime import timedelta

        def loaded():
            return sorted(
                name for name in sys.modules
                if name.endswith(("hyperparameter_tuning_job", "training_pipeline", "study",
                                  "job_wrappers"))
            )

        template = Template(
            name="t", display_name="t", job_spec={{"workerPoolSpecs": [{POOL!r}]}},
            placements=(FlexStartPlacement(max_wait=timedelta(hours=1)),),
        )
        render_job(template, {{"dataset_uri": "gs://d/"}}, template.placements[0],
                   project="p", default_region="us-central1", run_id="r-1", attempt=1)
        custom = loaded()
        from shared.config.model import TrainingPipelineSpec
        import dataclasses
        pipeline = dataclasses.replace(template, training_pipeline=TrainingPipelineSpec())
        render_job(pipeline, {{"dataset_uri": "gs://d/"}}, template.placements[0],
                   project="p", default_region="us-central1", run_id="r-1", attempt=1)
        print(json.dumps({{"custom": custom, "pipeline": loaded()}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["custom"] == []
    assert "shared.policy.job_wrappers" in report["pipeline"]
    assert "google.cloud.aiplatform_v1.types.training_pipeline" in report["pipeline"]


def test_a_template_with_both_a_sweep_and_a_pipeline_is_refused_when_built() -> None:
    # The loader names the key; a Template built in code must not silently become a sweep.
    with pytest.raises(ValueError, match=r"'resnet-sweep' sets both hyperparameter_tuning and"):
        template(hyperparameter_tuning=SWEEP, training_pipeline=TrainingPipelineSpec(model=MODEL))


def test_the_models_display_name_is_cut_to_vertex_ais_limit_like_the_jobs() -> None:
    long_name = "m-{dataset_uri}-" + "x" * 120  # the filled parameter makes it longer still
    model = ModelUpload(display_name=long_name, serving_image="gcr.io/acme/serve:1")
    tpl = template(display_name=long_name, training_pipeline=TrainingPipelineSpec(model=model))
    body = rest(render(tpl).resource)
    filled = long_name.replace("{dataset_uri}", PARAMS["dataset_uri"])
    assert len(filled) > DISPLAY_NAME_MAX
    assert body["modelToUpload"]["displayName"] == filled[:DISPLAY_NAME_MAX]
    assert body["displayName"] == filled[:DISPLAY_NAME_MAX]
