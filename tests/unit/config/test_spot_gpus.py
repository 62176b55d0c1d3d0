"""A Spot placement on a GPU Spot does not serve is a load error at the key the user wrote.

Tables: a chain and the worker pool's machine -> the problems the load reports (key path and rule),
or none when the config loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from config_builders import DELETE, SERVICE_ACCOUNT, base_config, parse, with_value

from shared.config import spot as config_spot
from shared.config.problems import InvalidConfig
from shared.validation import Rule

T = "templates.resnet"
POOL0 = f"{T}.worker_pools[0]"
A100_POOL: dict[str, Any] = {}  # the base config's pool: a2-highgpu-1g with one A100
K80_POOL = {
    "machine_type": "n1-standard-8",
    "accelerator": {"type": "NVIDIA_TESLA_K80", "count": 1},
}
T4_POOL = {"machine_type": "n1-standard-8", "accelerator": {"type": "NVIDIA_TESLA_T4", "count": 1}}
CPU_POOL = {"machine_type": "n2-standard-8", "accelerator": DELETE}
K80 = {"machine_type": "n1-standard-8", "accelerator": {"type": "NVIDIA_TESLA_K80", "count": 1}}
T4 = {"machine_type": "n1-standard-8", "accelerator": {"type": "NVIDIA_TESLA_T4", "count": 1}}
CPU = {"machine_type": "n2-standard-8"}
SPOT = "spot-gpu"


def _config(pool: dict[str, Any], chain: list[dict[str, Any]]) -> dict[str, Any]:
    config = with_value(base_config(), f"{T}.placement", chain)
    for key, value in pool.items():
        config = with_value(config, f"{POOL0}.{key}", value)
    return config


LOADS = [
    pytest.param(A100_POOL, [{"spot": None}], id="allowed-gpu-in-the-pool"),
    pytest.param(A100_POOL, [{"spot": {"machine": T4}}], id="allowed-gpu-override"),
    pytest.param(CPU_POOL, [{"spot": None}], id="cpu-only-job"),
    pytest.param(K80_POOL, [{"spot": {"machine": CPU}}], id="cpu-only-override-over-a-k80-pool"),
    pytest.param(K80_POOL, [{"spot": {"machine": T4}}], id="allowed-override-over-a-k80-pool"),
    pytest.param(T4_POOL, [{"spot": {"region": "us-east4"}}], id="t4-pool-spot-serves"),
    pytest.param(
        K80_POOL, [{"on_demand": None}, {"reservation": None}], id="k80-pool-no-spot-placement"
    ),
    pytest.param(A100_POOL, [{"on_demand": {"machine": K80}}], id="k80-override-not-on-spot"),
]


@pytest.mark.parametrize(("pool", "chain"), LOADS)
def test_a_spot_placement_on_a_gpu_spot_serves_loads(
    pool: dict[str, Any], chain: list[dict[str, Any]]
) -> None:
    assert parse(_config(pool, chain)).templates["resnet"].placements


REFUSED = [
    pytest.param(
        A100_POOL,
        [{"flex_start": {"max_wait": "2h"}}, {"spot": {"machine": K80}}],
        [(f"{T}.placement[1].spot.machine.accelerator.type", SPOT)],
        "NVIDIA_TESLA_K80 is not a GPU Spot VMs serve",
        id="k80-override",
    ),
    pytest.param(
        K80_POOL,
        [{"on_demand": None}, {"spot": {"region": "us-east4"}}],
        [(f"{POOL0}.accelerator.type", SPOT)],
        f"spot placement {T}.placement[1] runs this pool on it",
        id="k80-pool-with-a-spot-placement",
    ),
    pytest.param(
        K80_POOL,
        [{"spot": None}, {"on_demand": None}, {"spot": {"region": "us-east4"}}],
        [(f"{POOL0}.accelerator.type", SPOT)],
        f"spot placements {T}.placement[0], {T}.placement[2] run this pool on it",
        id="k80-pool-named-once-for-two-spot-placements",
    ),
    pytest.param(
        K80_POOL,
        [{"spot": {"machine": K80}}, {"spot": None}],
        [
            (f"{T}.placement[0].spot.machine.accelerator.type", SPOT),
            (f"{POOL0}.accelerator.type", SPOT),
        ],
        "NVIDIA_TESLA_K80",
        id="k80-override-and-k80-pool",
    ),
]


@pytest.mark.parametrize(("pool", "chain", "expected", "says"), REFUSED)
def test_a_spot_placement_on_a_gpu_spot_refuses_is_a_load_error_at_its_key(
    pool: dict[str, Any], chain: list[dict[str, Any]], expected: list[tuple[str, str]], says: str
) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(_config(pool, chain))
    problems = raised.value.problems
    assert [(p.path, p.rule) for p in problems] == expected
    assert any(says in p.message for p in problems), [str(p) for p in problems]
    for problem in problems:  # the fix: the GPUs Spot serves, or another placement kind
        assert "NVIDIA_TESLA_T4" in problem.message
        assert "NVIDIA_TESLA_K80, " not in problem.message
        assert "another placement kind" in problem.message
        assert "on_demand" in problem.message
        assert "{{" not in problem.message  # the override's keys, as YAML, not a format string


def test_a_gcloud_config_on_spot_is_named_in_the_file(tmp_path: Path) -> None:
    document = {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "n1-standard-8",
                    "acceleratorType": "NVIDIA_TESLA_K80",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4"},
            }
        ],
        "scheduling": {"strategy": "SPOT"},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(document))
    config = base_config()
    config["templates"]["resnet"] = {
        "gcloud_config": "job.yaml",
        "timeout": "48h",
        "service_account": SERVICE_ACCOUNT,
    }
    config["routes"] = [config["routes"][1]]  # the others fill dataset_uri, not declared here
    with pytest.raises(InvalidConfig) as raised:
        parse(config, base_dir=tmp_path)
    file = f"{T}.gcloud_config(job.yaml)"
    [problem] = raised.value.problems
    assert (problem.path, problem.rule) == (
        f"{file}.workerPoolSpecs[0].machineSpec.acceleratorType",
        SPOT,
    )
    assert f"spot placement {file}.scheduling.strategy runs this pool" in problem.message


def test_the_load_error_carries_the_rendered_jobs_rule_id() -> None:
    assert Rule.SPOT_GPU.value == config_spot.SPOT_GPU
