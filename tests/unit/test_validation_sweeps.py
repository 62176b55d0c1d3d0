"""Validating sweeps and pipelines: the job that runs (a trial, the training task) keeps every
placement rule; the guards count what a sweep really uses; ``vertex-dispatch validate`` names
each problem at the user's key. A sweep's own rules (study, trial counts) are the config
loader's (tests/unit/config/test_tuning.py): ``validate`` reports them as a config that does not
load, at the key.

Each case renders one clean sweep or pipeline (as dispatch and ``plan`` do), breaks one thing,
and names the violations expected: rule id and REST field.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.aiplatform import PersistentResource
from shared.config.loader import parse_config
from shared.config.model import (
    FlexStartPlacement,
    Guards,
    HyperparameterTuning,
    MetricGoal,
    ModelUpload,
    ParameterScale,
    ParameterType,
    PersistentResourcePlacement,
    Placement,
    Template,
    TrainingPipelineSpec,
    TuningParameter,
)
from shared.model.job_kinds import JobKind
from shared.policy.jobspec import RenderedJob, render_job
from shared.validation import (
    Rule,
    ViolationKind,
    check_templates,
    validate_job,
    validate_spec,
)
from tooling import main

REGION = "us-central1"
A100_POOL: dict[str, Any] = {
    "machineSpec": {
        "machineType": "a2-highgpu-2g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 2,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1"},
}
T4_POOL: dict[str, Any] = {
    **A100_POOL,
    "machineSpec": {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 1,
    },
}
FLEX = FlexStartPlacement(max_wait=timedelta(hours=2))
ON_RESOURCE = PersistentResourcePlacement(resource_id="a100-pool")
LR = TuningParameter("lr", ParameterType.DOUBLE, min=1e-4, max=1e-1, scale=ParameterScale.LOG)
SWEEP = HyperparameterTuning(
    metrics=(("accuracy", MetricGoal.MAXIMIZE),),
    parameters=(LR, TuningParameter("layers", ParameterType.INTEGER, min=2, max=8)),
    max_trials=10,
    parallel_trials=2,
    max_failed_trials=2,
)
MODEL = ModelUpload(
    display_name="resnet-{run_id}",
    serving_image="us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-1:latest",
)
PIPELINE = TrainingPipelineSpec(model=MODEL)


def template(
    *,
    pool: dict[str, Any] = A100_POOL,
    timeout: timedelta = timedelta(hours=4),
    tuning: HyperparameterTuning | None = SWEEP,
    pipeline: TrainingPipelineSpec | None = None,
) -> Template:
    return Template(
        name="sweep",
        display_name="sweep-{run_id}",
        job_spec={"workerPoolSpecs": [pool]},
        placements=(FLEX, ON_RESOURCE),
        timeout=timeout,
        hyperparameter_tuning=tuning,
        training_pipeline=pipeline,
    )


def render(tpl: Template, placement: Placement = FLEX) -> RenderedJob:
    return render_job(
        tpl,
        {},
        placement,
        project="acme-ml",
        default_region=REGION,
        run_id="r-000000000000000000000001",
        attempt=1,
    )


def check(tpl: Template, guards: Guards | None = None, placement: Placement = FLEX) -> list[Any]:
    """(rule, field) of every offline violation of ``tpl``'s job on ``placement``, as submission
    and ``validate`` call it."""
    rendered = render(tpl, placement)
    violations = validate_spec(
        rendered.custom_job,
        placement,
        guards or Guards(),
        region=rendered.region,
        tuning=tpl.hyperparameter_tuning,
        pipeline=tpl.training_pipeline,
    )
    return [(v.rule, v.field) for v in violations]


def tuned(**changes: Any) -> HyperparameterTuning:
    return dataclasses.replace(SWEEP, **changes)


def test_the_clean_sweep_and_pipeline_pass_on_every_placement() -> None:
    for tpl in (template(), template(tuning=None, pipeline=PIPELINE)):
        assert check(tpl) == []
        assert check(tpl, placement=ON_RESOURCE) == []


# --- guards: GPUs x parallel_trials, GPU-hours x max_trials -----------------------------------

# The clean sweep: 2 GPUs per trial, 2 trials at once (4 GPUs), 10 trials of 4 h (80 GPU-hours).
GUARD_CASES = [
    ("gpus-at-the-ceiling", Guards(max_gpus_per_job=4), template(), []),
    ("parallel-trials-over", Guards(max_gpus_per_job=3), template(),
     [(Rule.GUARD_GPUS, "parallelTrialCount")]),
    ("one-trial-over", Guards(max_gpus_per_job=1), template(),
     [(Rule.GUARD_GPUS, "jobSpec.workerPoolSpecs")]),
    ("custom-job-counts-once", Guards(max_gpus_per_job=2), template(tuning=None), []),
    ("pipeline-counts-once", Guards(max_gpus_per_job=2, max_gpu_hours_per_job=8),
     template(tuning=None, pipeline=PIPELINE), []),
    ("gpu-hours-at-the-ceiling", Guards(max_gpu_hours_per_job=80), template(), []),
    ("gpu-hours-over", Guards(max_gpu_hours_per_job=79), template(),
     [(Rule.GUARD_GPU_HOURS, "jobSpec.scheduling.timeout")]),
    ("custom-job-hours-once", Guards(max_gpu_hours_per_job=8), template(tuning=None), []),
    ("model-image", Guards(image_prefixes=("us-docker.pkg.dev/acme-ml/",)),
     template(tuning=None, pipeline=PIPELINE),
     [(Rule.GUARD_IMAGE, "modelToUpload.containerSpec.imageUri")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("guards", "tpl", "expected"), [pytest.param(*case[1:], id=case[0]) for case in GUARD_CASES]
)
def test_guards_count_what_a_sweep_really_uses(
    guards: Guards, tpl: Template, expected: list[tuple[Rule, str]]
) -> None:
    assert check(tpl, guards) == expected


def test_the_gpu_hours_message_counts_the_trials_and_says_what_fits() -> None:
    rendered = render(template())
    (violation,) = validate_spec(
        rendered.custom_job,
        FLEX,
        Guards(max_gpu_hours_per_job=40),
        region=REGION,
        tuning=SWEEP,
        pipeline=None,
    )
    assert "2 GPUs per trial for up to 4 h x max_trials 10 make 80 GPU-hours" in violation.message
    assert "at most 2 h" in violation.message  # 40 / 2 GPUs / 10 trials
    assert "lower max_trials" in violation.message


# --- the placement rules hold for the job that runs -------------------------------------------

KINDS = {
    "sweep": {"tuning": SWEEP},
    "pipeline": {"tuning": None, "pipeline": PIPELINE},
}


@pytest.mark.parametrize("kind", KINDS)
def test_flex_start_rules_apply_to_the_trial_job_and_the_training_task(kind: str) -> None:
    tpl = template(pool=T4_POOL, timeout=timedelta(days=8), **KINDS[kind])
    rendered = render(tpl)
    assert rendered.kind is not JobKind.CUSTOM_JOB
    assert (Rule.FLEX_START_GPU, "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType") in check(
        tpl
    )
    assert (Rule.FLEX_START_TIMEOUT, "jobSpec.scheduling.timeout") in check(tpl)


def _resource(**pool: Any) -> PersistentResource:
    body = {
        "name": f"projects/acme-ml/locations/{REGION}/persistentResources/a100-pool",
        "state": "RUNNING",
        "resourcePools": [
            {"id": "a100", "machineSpec": A100_POOL["machineSpec"], "replicaCount": "2", **pool}
        ],
    }
    return PersistentResource.from_json(json.dumps(body))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (_resource(), []),
        (None, [(Rule.RESOURCE_EXISTS, ViolationKind.UNAVAILABLE)]),
        (_resource(usedReplicaCount="2"), [(Rule.RESOURCE_CAPACITY, ViolationKind.UNAVAILABLE)]),
        (
            _resource(machineSpec={"machineType": "n1-standard-8"}),
            [(Rule.RESOURCE_POOL_MATCH, ViolationKind.UNSUITABLE)],
        ),
    ],
    ids=["fits", "missing", "busy", "other-machine"],
)
def test_persistent_resource_rules_read_live_apply_to_the_job_that_runs(
    kind: str, resource: PersistentResource | None, expected: list[tuple[Rule, ViolationKind]]
) -> None:
    tpl = template(**KINDS[kind])
    rendered = render(tpl, ON_RESOURCE)
    violations = validate_job(
        rendered.custom_job,
        ON_RESOURCE,
        Guards(),
        resource,
        region=rendered.region,
        tuning=tpl.hyperparameter_tuning,
        pipeline=tpl.training_pipeline,
    )
    assert [(v.rule, v.kind) for v in violations] == expected


# --- vertex-dispatch validate: named at the user's keys --------------------------------------

CONFIG = """project: acme-ml
region: us-central1
alerts_topic: training-alerts
routes:
  - name: requests
    pubsub: {attributes: {kind: train}}
templates:
  sweep:
    worker_pools:
      - machine_type: a2-highgpu-1g
        accelerator: {type: NVIDIA_TESLA_A100, count: 1}
        image: us-docker.pkg.dev/acme-ml/train/x:1
    timeout: 2h
    hyperparameter_tuning:
      metrics: {accuracy: maximize}
      parameters:
        lr: {double: {min: 0.0001, max: 0.1}, scale: log}
        layers: {integer: {min: 2, max: 8}}
      max_trials: 10
      parallel_trials: 2
    placement:
      - flex_start: {max_wait: 2h}
  pipeline:
    worker_pools:
      - machine_type: a2-highgpu-1g
        accelerator: {type: NVIDIA_TESLA_A100, count: 1}
        image: us-docker.pkg.dev/acme-ml/train/x:1
    timeout: 2h
    training_pipeline:
      model: {display_name: "m-{run_id}", serving_image: us-docker.pkg.dev/acme-ml/serve/x:1}
    placement:
      - flex_start: {max_wait: 2h}
"""
SWEEP_PATH = "templates.sweep.hyperparameter_tuning"


def test_a_clean_config_of_both_kinds_has_no_problem() -> None:
    config = parse_config(CONFIG, "kinds.yaml")
    assert {t.kind for t in config.templates.values()} == {
        JobKind.HYPERPARAMETER_TUNING_JOB,
        JobKind.TRAINING_PIPELINE,
    }
    assert check_templates(config) == []


# A sweep's own rules are the loader's: ``validate`` reports a config breaking one as a config
# that does not load, named at the key where it is written (no rendering, no second copy).
LOAD_CASES = [
    ("parallel", "      parallel_trials: 2\n", "      parallel_trials: 11\n",
     f"{SWEEP_PATH}.parallel_trials", "11 trials run at once, but max_trials"),
    ("failed", "      parallel_trials: 2\n", "      max_failed_trials: 11\n",
     f"{SWEEP_PATH}.max_failed_trials", "11 trials may fail, but max_trials"),
    ("metrics", "      metrics: {accuracy: maximize}\n", "      metrics: {}\n",
     f"{SWEEP_PATH}.metrics", "is empty: name at least one metric"),
    ("parameter", "layers: {integer: {min: 2, max: 8}}", "layers: {integer: {min: 8, max: 2}}",
     f"{SWEEP_PATH}.parameters.layers.integer.max", "a range needs min < max"),
    ("grid", "      parallel_trials: 2\n", "      parallel_trials: 2\n      algorithm: grid\n",
     f"{SWEEP_PATH}.algorithm", "grid search cannot enumerate the real range of parameter 'lr'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "path", "message"), [pytest.param(*case[1:], id=case[0]) for case in LOAD_CASES]
)
def test_validate_reports_a_broken_sweep_as_not_loading_at_its_key(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    old: str,
    new: str,
    path: str,
    message: str,
) -> None:
    assert old in CONFIG
    config = tmp_path / "kinds.yaml"
    config.write_text(CONFIG.replace(old, new))
    assert main(["validate", "--config", str(config), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["ok"], document["loaded"]) == (False, False)
    [problem] = document["problems"]
    assert (problem["path"], problem["rule"]) == (path, "config")
    assert message in problem["message"]


def test_validate_names_the_guards_keys() -> None:
    config = parse_config(CONFIG, "kinds.yaml")
    # The guards the load would check, set after loading: validation counts the same way.
    config = dataclasses.replace(
        config,
        guards=Guards(
            max_gpus_per_job=1,
            image_prefixes=("us-docker.pkg.dev/acme-ml/train/",),
        ),
    )
    assert [(p.path, p.violation.rule) for p in check_templates(config)] == [
        (f"{SWEEP_PATH}.parallel_trials", Rule.GUARD_GPUS),
        ("templates.pipeline.training_pipeline.model.serving_image", Rule.GUARD_IMAGE),
    ]
