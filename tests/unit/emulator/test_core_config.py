"""Config loading and validation, the example config, and reset back to the config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from core_builders import PARENT, START, job, new_emulator, state_of

from vertex_ai_emulator.clock import SimulatedClock
from vertex_ai_emulator.config import CapacityChange, EmulatorConfig, load_config
from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.errors import ConfigError
from vertex_ai_emulator.faults import parse_rules
from vertex_ai_emulator.outcomes import Result

EXAMPLE = Path(__file__).parents[3] / "deploy/local/vertex_ai_emulator/example-config.yaml"


def test_example_config_loads_and_drives_an_emulator() -> None:
    config = load_config(EXAMPLE)
    assert config.project_numbers == {"acme-ml": "123456789012"}
    assert config.capacity["us-central1"]["NVIDIA_TESLA_A100"] == 16
    assert config.capacity_timeline[0] == CapacityChange(
        7200, "us-central1", "NVIDIA_H100_80GB", 16
    )
    assert (config.timings.provisioning, config.timings.persistent_start) == (120, 5)
    assert config.job_logs.trainer_lines_per_second == 2
    assert config.timings.error_delay == 60
    assert config.quota["preemptible"]["us-central1"]["NVIDIA_H100_80GB"] == 16
    assert config.outcome_rules[0].outcome.result == Result.USER_ERROR
    assert config.default_outcome.duration_seconds == 600
    assert config.time_scale == 60
    assert parse_rules(config.faults)  # the transports' parser accepts the example's faults
    assert config.spot.preempt_after == 1800
    assert [reservation.count for reservation in config.reservations] == [2]
    assert config.refusals.quota_when_exceeded == "queue"
    assert config.refusals.offered_accelerators["us-east4"] == {"NVIDIA_H100_80GB", "NVIDIA_L4"}

    emulator = Emulator(config, SimulatedClock(time_scale=0, start=START))
    resource = emulator.get_persistent_resource(
        "projects/acme-ml/locations/us-central1/persistentResources/a100-pool"
    )
    assert resource.name.startswith("projects/123456789012/")
    assert resource.resource_pools[0].autoscaling_spec.max_replica_count == 4


def test_json_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"capacity": {"us-east4": {"NVIDIA_L4": 4}}}))
    assert load_config(path).capacity == {"us-east4": {"NVIDIA_L4": 4}}


def test_empty_file_is_the_default_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("")
    assert load_config(path) == EmulatorConfig.default()


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"capasity": {}}, "capasity"),
        (
            {"capacity": {"us-central1": {"NVIDIA_H100_80GB": -1}}},
            "capacity.us-central1.NVIDIA_H100_80GB",
        ),
        ({"capacity": {"us-central1": {"H100": 1}}}, "capacity.us-central1.H100"),
        ({"capacity": ["us-central1"]}, "capacity"),
        ({"unlisted_capacity": "many"}, "unlisted_capacity"),
        ({"project_numbers": {"acme-ml": "abc"}}, "project_numbers.acme-ml"),
        ({"capacity_timeline": [{"at": "2h", "region": "r", "set": 1}]}, "capacity_timeline[0]"),
        (
            {
                "capacity_timeline": [
                    {"at": "soon", "region": "r", "accelerator": "NVIDIA_L4", "set": 1}
                ]
            },
            "capacity_timeline[0].at",
        ),
        ({"persistent_resources": [{"name": "a100"}]}, "persistent_resources[0].name"),
        (
            {
                "persistent_resources": [
                    {"name": "projects/p/locations/l/persistentResources/x", "bogus": 1}
                ]
            },
            "persistent_resources[0]",
        ),
        ({"timings": {"provisioning": "fast"}}, "timings.provisioning"),
        ({"timings": {"boot": "1s"}}, "timings: unknown key(s) boot"),
        ({"timings": {"error_delay": "a minute"}}, "timings.error_delay"),
        ({"outcome_rules": [{"result": "maybe"}]}, "outcome_rules[0].result"),
        ({"outcome_rules": [{"times": 0}]}, "outcome_rules[0].times"),
        ({"outcome_rules": [{"display_name": "("}]}, "outcome_rules[0].display_name"),
        ({"outcome_rules": [{"placement": "preemptible"}]}, "outcome_rules[0].placement"),
        ({"outcome_rules": [{"exit_code": 0}]}, "outcome_rules[0].exit_code"),
        ({"outcome_rules": [{"colour": "red"}]}, "outcome_rules[0]: unknown key(s) colour"),
        ({"default_outcome": {"duration": "-1s"}}, "default_outcome.duration"),
        ({"default_outcome": {"labels": {}}}, "default_outcome: unknown key(s) labels"),
        ({"persistent_resource_when_full": "wait"}, "persistent_resource_when_full"),
        ({"time_scale": -1}, "time_scale"),
        ({"faults": ["boom"]}, "faults[0]"),
    ],
)
def test_invalid_config_names_the_key(raw: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigError) as raised:
        EmulatorConfig.from_dict(raw)
    assert names in str(raised.value)


def test_reset_returns_to_the_config_with_no_jobs() -> None:
    emulator = new_emulator(capacity={"us-central1": {"NVIDIA_TESLA_A100": 4}})
    created = emulator.create_custom_job(PARENT, job())
    emulator.set_capacity("us-central1", "NVIDIA_TESLA_A100", 0)
    emulator.add_outcome_rule({"result": "internal_error"})
    emulator.reset()

    snapshot = emulator.state_snapshot()
    assert snapshot["jobs"] == [] and snapshot["outcome_rules"] == []
    assert snapshot["capacity"]["us-central1"]["NVIDIA_TESLA_A100"]["total"] == 4
    after = emulator.create_custom_job(PARENT, job())
    assert after.name != created.name  # names are never reused
    emulator.advance_clock(3600)
    assert state_of(emulator, after.name) == "JOB_STATE_SUCCEEDED"
