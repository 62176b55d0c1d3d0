"""A run's base output directory is shared by every attempt (docs/architecture.md, "Resume"):
a placeholder that varies per attempt there is a load error naming the key and the fix."""

from __future__ import annotations

import json

import pytest
from config_builders import base_config, parse, with_value

from shared.config.problems import InvalidConfig

IMAGE = "us-docker.pkg.dev/acme-ml/train/resnet:1.4"
MACHINE = {
    "machineType": "a2-highgpu-1g",
    "acceleratorType": "NVIDIA_TESLA_A100",
    "acceleratorCount": 1,
}

T = "templates.resnet"


@pytest.mark.parametrize(
    ("value", "loads"),
    [
        ("gs://acme-out/{run_id}/", True),
        ("gs://acme-out/{template}/{run_id}/", True),
        ("gs://acme-out/{run_id}/{attempt}/", False),
        ("gs://acme-out/{run_id}-a{attempt}/", False),
        ("gs://acme-out/{previous_output}", False),
    ],
)
def test_a_base_output_dir_that_varies_per_attempt_is_refused_at_its_key(
    value: str, loads: bool
) -> None:
    config = with_value(base_config(), f"{T}.base_output_dir", value)
    if loads:
        assert parse(config).templates["resnet"].job_spec["baseOutputDirectory"] == {
            "outputUriPrefix": value
        }
        return
    with pytest.raises(InvalidConfig) as raised:
        parse(config)
    [problem] = raised.value.problems
    assert problem.path == f"{T}.base_output_dir"
    assert "Use {run_id} here" in problem.message
    assert "in an argument or env value" in problem.message


def test_a_files_per_attempt_output_directory_is_refused_at_the_files_key() -> None:
    body = {
        "displayName": "resnet",
        "jobSpec": {
            "workerPoolSpecs": [
                {"machineSpec": MACHINE, "replicaCount": 1, "containerSpec": {"imageUri": IMAGE}}
            ],
            "baseOutputDirectory": {"outputUriPrefix": "gs://acme-out/{run_id}/{attempt}/"},
        },
    }
    config = base_config()
    resnet = config["templates"]["resnet"]
    del resnet["worker_pools"]
    resnet["rest_body"] = "job.json"
    with pytest.raises(InvalidConfig) as raised:
        parse(config, read_file={"job.json": json.dumps(body)}.__getitem__)
    paths = [problem.path for problem in raised.value.problems]
    assert paths == [f"{T}.rest_body(job.json).jobSpec.baseOutputDirectory.outputUriPrefix"]


@pytest.mark.parametrize(
    "where",
    [f"{T}.worker_pools[0].args[1]", f"{T}.worker_pools[0].env.RESUME"],
)
def test_attempt_and_previous_output_are_fine_in_args_and_env(where: str) -> None:
    config = base_config()
    if where.endswith("RESUME"):
        config["templates"]["resnet"]["worker_pools"][0]["env"] = {"RESUME": "x"}
    config = with_value(config, where, "--resume={previous_output} --try={attempt}")
    parse(config)


def test_a_template_may_not_set_the_previous_output_env_itself() -> None:
    config = base_config()
    config["templates"]["resnet"]["worker_pools"][0]["env"] = {
        "VERTEX_DISPATCH_PREVIOUS_OUTPUT": "gs://acme-out/old/"
    }
    with pytest.raises(InvalidConfig) as raised:
        parse(config)
    [problem] = raised.value.problems
    assert problem.path == f"{T}.worker_pools[0].env.VERTEX_DISPATCH_PREVIOUS_OUTPUT"
    assert "use {previous_output}" in problem.message
