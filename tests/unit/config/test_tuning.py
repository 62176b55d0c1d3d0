"""Templates of the two other job kinds: hyperparameter_tuning and training_pipeline blocks.

Each broken rule is reported at the key path the user wrote, with its fix; guards count what a
sweep really uses (GPUs x parallel_trials, GPU-hours x max_trials).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from config_builders import DELETE, SERVICE_ACCOUNT, base_config, parse, with_value

from shared.config.model import (
    HyperparameterTuning,
    MetricGoal,
    ModelUpload,
    ParameterScale,
    ParameterType,
    TrainingPipelineSpec,
    TuningAlgorithm,
    TuningParameter,
    jobs_at_once,
    jobs_in_all,
)
from shared.config.origins import kind_path
from shared.config.problems import InvalidConfig
from shared.model.job_kinds import JobKind

SWEEP = "templates.sweep"
TUNING = f"{SWEEP}.hyperparameter_tuning"
PIPELINE = "templates.pipeline"
SERVING_IMAGE = "us-docker.pkg.dev/acme-ml/train/serving:1.0"
POOL = {
    "machine_type": "a2-highgpu-1g",
    "accelerator": {"type": "NVIDIA_TESLA_A100", "count": 1},
    "image": "us-docker.pkg.dev/acme-ml/train/resnet:1.4",
    "args": ["--data={dataset_uri}"],
}


def kinds_config() -> dict[str, Any]:
    """The base config with a sweep and a pipeline template (1 GPU each, 2h timeout)."""
    config = base_config()
    common = {
        "params": ["dataset_uri"],
        "worker_pools": [POOL],
        "timeout": "2h",
        "service_account": SERVICE_ACCOUNT,
        "placement": [{"flex_start": {"max_wait": "1h"}}],
    }
    config["templates"]["sweep"] = {
        **common,
        "hyperparameter_tuning": {
            "metrics": {"accuracy": "maximize"},
            "parameters": {
                "learning_rate": {"double": {"min": "1e-4", "max": 0.1}, "scale": "log"},
                "layers": {"integer": {"min": 2, "max": 8}},
                "batch_size": {"discrete": [128, 32, 64]},
                "optimizer": {"categorical": ["adam", "sgd"]},
            },
            "max_trials": 20,
            "parallel_trials": 4,
            "max_failed_trials": 3,
            "algorithm": "random",
        },
    }
    config["templates"]["pipeline"] = {
        **common,
        "placement": [{"persistent_resource": "a100-pool"}, {"flex_start": {"max_wait": "1h"}}],
        "training_pipeline": {
            "model": {
                "display_name": "resnet-{run_id}",
                "serving_image": SERVING_IMAGE,
                "artifact_uri": "gs://acme-runs/resnet/{run_id}/model/",
            }
        },
    }
    return config


def problems_of(config: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidConfig) as raised:
        parse(config)
    return [str(problem) for problem in raised.value.problems]


def test_a_sweep_template_loads_with_every_value() -> None:
    template = parse(kinds_config()).templates["sweep"]

    assert template.kind is JobKind.HYPERPARAMETER_TUNING_JOB
    assert template.training_pipeline is None
    assert template.hyperparameter_tuning == HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(
            TuningParameter(
                "learning_rate",
                ParameterType.DOUBLE,
                min=0.0001,
                max=0.1,
                scale=ParameterScale.LOG,
            ),
            TuningParameter("layers", ParameterType.INTEGER, min=2, max=8),
            TuningParameter("batch_size", ParameterType.DISCRETE, values=(32.0, 64.0, 128.0)),
            TuningParameter("optimizer", ParameterType.CATEGORICAL, values=("adam", "sgd")),
        ),
        max_trials=20,
        parallel_trials=4,
        max_failed_trials=3,
        algorithm=TuningAlgorithm.RANDOM,
    )
    # the template's job is the trial job, unchanged by the block
    assert template.job_spec["workerPoolSpecs"][0]["containerSpec"]["args"] == [
        "--data={dataset_uri}"
    ]
    assert kind_path(template, "parallel_trials") == f"{TUNING}.parallel_trials"


def test_a_sweep_takes_the_defaults_it_leaves_out() -> None:
    config = kinds_config()
    block = config["templates"]["sweep"]["hyperparameter_tuning"]
    for key in ("parallel_trials", "max_failed_trials", "algorithm"):
        del block[key]

    tuning = parse(config).templates["sweep"].hyperparameter_tuning

    assert tuning is not None
    assert (tuning.parallel_trials, tuning.max_failed_trials, tuning.algorithm) == (1, 0, None)
    assert parse(config).templates["sweep"].origin is not None
    assert kind_path(parse(config).templates["sweep"], "algorithm") == f"{TUNING}.algorithm"


def test_a_pipeline_template_loads_with_and_without_a_model() -> None:
    config = kinds_config()
    template = parse(config).templates["pipeline"]

    assert template.kind is JobKind.TRAINING_PIPELINE
    assert template.hyperparameter_tuning is None
    assert template.training_pipeline == TrainingPipelineSpec(
        model=ModelUpload(
            display_name="resnet-{run_id}",
            serving_image=SERVING_IMAGE,
            artifact_uri="gs://acme-runs/resnet/{run_id}/model/",
        )
    )
    without = with_value(config, f"{PIPELINE}.training_pipeline", {})
    assert parse(without).templates["pipeline"].training_pipeline == TrainingPipelineSpec()
    assert parse(without).templates["pipeline"].kind is JobKind.TRAINING_PIPELINE
    assert parse(config).templates["resnet"].kind is JobKind.CUSTOM_JOB


@pytest.mark.parametrize(
    ("path", "value", "expected_path", "expected"),
    [
        # at least one metric
        (f"{TUNING}.metrics", {}, f"{TUNING}.metrics", "is empty: name at least one metric"),
        (f"{TUNING}.metrics.accuracy", "biggest", f"{TUNING}.metrics.accuracy", "maximize"),
        (f"{TUNING}.metrics", ["accuracy"], f"{TUNING}.metrics", "metric id to maximize"),
        (f"{TUNING}.parameters", {}, f"{TUNING}.parameters", "at least one parameter"),
        # ranges well formed
        (
            f"{TUNING}.parameters.layers.integer.max",
            2,
            f"{TUNING}.parameters.layers.integer.max",
            "a range needs min < max",
        ),
        (
            f"{TUNING}.parameters.learning_rate.double.max",
            0.00001,
            f"{TUNING}.parameters.learning_rate.double.max",
            "a range needs min < max",
        ),
        (
            f"{TUNING}.parameters.layers.integer.min",
            1.5,
            f"{TUNING}.parameters.layers.integer.min",
            "expected a whole number, got number 1.5",
        ),
        (
            f"{TUNING}.parameters.learning_rate.double.min",
            0,
            f"{TUNING}.parameters.learning_rate.double.min",
            "scale: log samples the logarithm",
        ),
        (
            f"{TUNING}.parameters.learning_rate.double.min",
            "small",
            f"{TUNING}.parameters.learning_rate.double.min",
            "expected a number",
        ),
        (
            f"{TUNING}.parameters.learning_rate.double",
            {"min": 0.1},
            f"{TUNING}.parameters.learning_rate.double.max",
            "is required",
        ),
        (
            f"{TUNING}.parameters.layers",
            {"integer": {"min": 1, "max": 4}, "discrete": [1, 2]},
            f"{TUNING}.parameters.layers",
            "set exactly one of double",
        ),
        (
            f"{TUNING}.parameters.layers.scale",
            "cubic",
            f"{TUNING}.parameters.layers.scale",
            "expected one of linear, log",
        ),
        # lists non-empty, no duplicates, discrete numbers, categorical strings
        (
            f"{TUNING}.parameters.batch_size.discrete",
            [],
            f"{TUNING}.parameters.batch_size.discrete",
            "is empty",
        ),
        (
            f"{TUNING}.parameters.batch_size.discrete",
            [32, 64, 32],
            f"{TUNING}.parameters.batch_size.discrete[2]",
            "listed twice",
        ),
        (
            f"{TUNING}.parameters.batch_size.discrete",
            [32, "big"],
            f"{TUNING}.parameters.batch_size.discrete[1]",
            "expected a number",
        ),
        (
            f"{TUNING}.parameters.optimizer.categorical",
            ["adam", 3],
            f"{TUNING}.parameters.optimizer.categorical[1]",
            "categorical values are strings",
        ),
        (
            f"{TUNING}.parameters.optimizer.categorical",
            ["adam", "adam"],
            f"{TUNING}.parameters.optimizer.categorical[1]",
            "listed twice",
        ),
        (
            f"{TUNING}.parameters.optimizer.scale",
            "log",
            f"{TUNING}.parameters.optimizer.scale",
            "a categorical parameter has no scale",
        ),
        (
            f"{TUNING}.parameters.batch_size",
            {"discrete": [0, 32], "scale": "log"},
            f"{TUNING}.parameters.batch_size.discrete",
            "every value must be above 0",
        ),
        (
            f"{TUNING}.parameters",
            {"learning-rate": {"double": {"min": 0.1, "max": 1}}},
            f"{TUNING}.parameters.learning-rate",
            "parameter id 'learning-rate' is not valid",
        ),
        # the counts
        (f"{TUNING}.max_trials", 0, f"{TUNING}.max_trials", "out of range"),
        (f"{TUNING}.parallel_trials", 0, f"{TUNING}.parallel_trials", "out of range"),
        (f"{TUNING}.max_failed_trials", -1, f"{TUNING}.max_failed_trials", "out of range"),
        (
            f"{TUNING}.parallel_trials",
            21,
            f"{TUNING}.parallel_trials",
            "21 trials run at once, but max_trials (templates.sweep.hyperparameter_tuning."
            "max_trials) is 20: lower parallel_trials to at most 20, or raise max_trials",
        ),
        (
            f"{TUNING}.max_failed_trials",
            25,
            f"{TUNING}.max_failed_trials",
            "25 trials may fail, but max_trials",
        ),
        # the messages' field widths: counts int32, integer bounds int64, doubles finite
        (f"{TUNING}.max_trials", 2**31, f"{TUNING}.max_trials", "from 1 to 2147483647"),
        (f"{TUNING}.parallel_trials", 2**31, f"{TUNING}.parallel_trials", "from 1 to 2147483647"),
        (
            f"{TUNING}.max_failed_trials",
            2**31,
            f"{TUNING}.max_failed_trials",
            "from 0 to 2147483647",
        ),
        (
            f"{TUNING}.parameters.layers.integer.max",
            2**63,
            f"{TUNING}.parameters.layers.integer.max",
            "an integer parameter's bounds are 64-bit",
        ),
        (
            f"{TUNING}.parameters.layers.integer.min",
            -(2**63) - 1,
            f"{TUNING}.parameters.layers.integer.min",
            "an integer parameter's bounds are 64-bit",
        ),
        (
            f"{TUNING}.parameters.learning_rate.double.max",
            10**400,
            f"{TUNING}.parameters.learning_rate.double.max",
            "expected a number",
        ),
        (
            f"{TUNING}.parameters.learning_rate.double.max",
            float("inf"),
            f"{TUNING}.parameters.learning_rate.double.max",
            "expected a number",
        ),
        (
            f"{TUNING}.parameters.batch_size.discrete",
            [32, 10**400],
            f"{TUNING}.parameters.batch_size.discrete[1]",
            "expected a number",
        ),
        (f"{TUNING}.max_trials", DELETE, f"{TUNING}.max_trials", "is required"),
        (f"{TUNING}.algorithm", "bayes", f"{TUNING}.algorithm", "expected one of grid, random"),
        (
            f"{TUNING}.algorithm",
            "grid",
            f"{TUNING}.algorithm",
            "grid search cannot enumerate the real range of parameter 'learning_rate'",
        ),
        (f"{TUNING}.trials", 5, f"{TUNING}.trials", "unknown key 'trials'"),
        (f"{SWEEP}.hyperparameter_tuning", None, TUNING, "expected a mapping"),
        # a request may not fill what the sweep tunes
        (
            f"{SWEEP}.params",
            ["dataset_uri", "learning_rate"],
            f"{SWEEP}.params[1]",
            "'learning_rate' is also a parameter the sweep tunes",
        ),
        # both kinds on one template
        (
            f"{SWEEP}.training_pipeline",
            {},
            SWEEP,
            "set at most one of hyperparameter_tuning",
        ),
        # the pipeline's model
        (f"{PIPELINE}.training_pipeline", None, f"{PIPELINE}.training_pipeline", "is empty"),
        (
            f"{PIPELINE}.training_pipeline.model.serving_image",
            DELETE,
            f"{PIPELINE}.training_pipeline.model.serving_image",
            "is required for a model upload",
        ),
        (
            f"{PIPELINE}.training_pipeline.model.display_name",
            DELETE,
            f"{PIPELINE}.training_pipeline.model.display_name",
            "is required for a model upload",
        ),
        (
            f"{PIPELINE}.training_pipeline.model.artifact_uri",
            "/tmp/model",
            f"{PIPELINE}.training_pipeline.model.artifact_uri",
            "write a gs:// URI",
        ),
        (
            f"{PIPELINE}.training_pipeline.model.display_name",
            "resnet-{version}",
            f"{PIPELINE}.training_pipeline.model.display_name",
            "placeholder {version} is neither a declared param nor a built-in",
        ),
        (
            f"{PIPELINE}.training_pipeline.model.endpoint",
            "x",
            f"{PIPELINE}.training_pipeline.model.endpoint",
            "unknown key 'endpoint'",
        ),
    ],
)
def test_each_broken_rule_names_its_key_path(
    path: str, value: object, expected_path: str, expected: str
) -> None:
    found = problems_of(with_value(kinds_config(), path, value))

    assert any(
        problem.startswith(f"{expected_path}: ") and expected in problem for problem in found
    ), found


def test_every_problem_of_a_broken_sweep_is_reported_at_once() -> None:
    config = kinds_config()
    block = config["templates"]["sweep"]["hyperparameter_tuning"]
    block["parameters"]["layers"] = {"integer": {"min": 3, "max": 2.5}}
    block["parallel_trials"] = 21
    del block["metrics"]

    found = problems_of(config)

    assert sorted(problem.split(": ")[0] for problem in found) == sorted(
        [
            f"{TUNING}.metrics",
            f"{TUNING}.parameters.layers.integer.max",
            f"{TUNING}.parallel_trials",
        ]
    )


@pytest.mark.parametrize(
    ("change", "expected_path", "expected"),
    [
        # 1 GPU per trial x 9 at once > 8
        (
            {"parallel_trials": 9, "max_trials": 9},
            f"{TUNING}.parallel_trials",
            "asks for 9 GPUs at once: 1 per trial (accelerators x replicas, on its largest "
            "placement) x parallel_trials 9, over guards.max_gpus_per_job = 8; lower "
            "parallel_trials",
        ),
        # 1 GPU x 2h x 51 trials = 102 GPU-hours > 100
        (
            {"max_trials": 51},
            f"{SWEEP}.timeout",
            "1 GPUs for 2h x max_trials 51 is 102 GPU-hours, over "
            "guards.max_gpu_hours_per_job = 100; lower max_trials",
        ),
    ],
)
def test_guards_count_what_a_sweep_uses(
    change: dict[str, int], expected_path: str, expected: str
) -> None:
    config = kinds_config()
    config["templates"]["sweep"]["hyperparameter_tuning"].update(change)

    found = problems_of(config)

    assert any(p.startswith(f"{expected_path}: ") and expected in p for p in found), found


def test_guards_accept_a_sweep_at_its_limits() -> None:
    config = kinds_config()
    # 8 at once x 1 GPU = 8 GPUs; 50 trials x 1 GPU x 2h = 100 GPU-hours
    config["templates"]["sweep"]["hyperparameter_tuning"].update(
        {"parallel_trials": 8, "max_trials": 50}
    )

    tuning = parse(config).templates["sweep"].hyperparameter_tuning

    assert tuning is not None and (tuning.parallel_trials, tuning.max_trials) == (8, 50)


def test_a_pipeline_counts_as_one_job_and_its_serving_image_is_guarded() -> None:
    config = kinds_config()
    # a CustomJob of 1 GPU for 48h is 48 GPU-hours: a pipeline too (no x trials)
    config["templates"]["pipeline"]["timeout"] = "48h"
    assert parse(config).templates["pipeline"].timeout == timedelta(hours=48)

    outside = with_value(
        config, f"{PIPELINE}.training_pipeline.model.serving_image", "docker.io/evil:1"
    )
    found = problems_of(outside)

    assert found == [
        f"{PIPELINE}.training_pipeline.model.serving_image: serving image 'docker.io/evil:1' "
        "is outside guards.image_prefixes; use an image under us-docker.pkg.dev/acme-ml/train/ "
        "or add its prefix to the guard"
    ]


@pytest.mark.parametrize(
    ("tuning", "at_once", "in_all"),
    [
        (None, 1, 1),  # a CustomJob, a pipeline's training task: one job
        (
            HyperparameterTuning(
                metrics=(("accuracy", MetricGoal.MAXIMIZE),),
                parameters=(TuningParameter("n", ParameterType.INTEGER, min=1, max=4),),
                max_trials=20,
                parallel_trials=4,
            ),
            4,
            20,
        ),
    ],
    ids=["one-job", "sweep"],
)
def test_the_guards_multipliers(
    tuning: HyperparameterTuning | None, at_once: int, in_all: int
) -> None:
    assert (jobs_at_once(tuning), jobs_in_all(tuning)) == (at_once, in_all)
