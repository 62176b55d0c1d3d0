"""Reading the spot, on_demand and reservation placements and a template's encryption_key.

Tables: what a user writes -> the placement read; what a user gets wrong -> the key path the
load error names and what it says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from config_builders import SERVICE_ACCOUNT, base_config, parse, with_value

from shared.config.model import (
    MachineOverride,
    OnDemandPlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
)
from shared.config.problems import InvalidConfig

T = "templates.resnet"
ENTRY = f"{T}.placement[1]"
RES = "projects/acme-ml/zones/us-east4-b/reservations/a100-res"
KEY = "projects/acme-ml/locations/us-central1/keyRings/train/cryptoKeys/jobs"
H100 = {"machine_type": "a3-highgpu-1g", "accelerator": {"type": "NVIDIA_H100_80GB", "count": 1}}
H100_OVERRIDE = MachineOverride("a3-highgpu-1g", "NVIDIA_H100_80GB", 1)


@pytest.mark.parametrize(
    ("entry", "placement"),
    [
        pytest.param({"spot": None}, SpotPlacement(), id="spot-bare"),
        pytest.param({"spot": {}}, SpotPlacement(), id="spot-empty"),
        pytest.param(
            {"spot": {"region": "us-east4", "machine": H100}},
            SpotPlacement(region="us-east4", machine=H100_OVERRIDE),
            id="spot-region-machine",
        ),
        pytest.param({"on_demand": None}, OnDemandPlacement(), id="on-demand-bare"),
        pytest.param(
            {"on_demand": {"region": "us-east4"}},
            OnDemandPlacement(region="us-east4"),
            id="on-demand-region",
        ),
        pytest.param({"reservation": None}, ReservationPlacement(), id="any-reservation"),
        pytest.param(
            {"reservation": {"region": "us-east4"}},
            ReservationPlacement(region="us-east4"),
            id="any-reservation-in-region",
        ),
        pytest.param(
            {"reservation": {"name": RES}},
            ReservationPlacement(name=RES, region="us-east4"),
            id="named-region-from-zone",
        ),
        pytest.param(
            {"reservation": {"name": RES, "region": "us-east4", "machine": H100}},
            ReservationPlacement(name=RES, region="us-east4", machine=H100_OVERRIDE),
            id="named-region-agrees",
        ),
        pytest.param(
            {"reservation": {"name": "projects/123456789012/zones/europe-west4-a/reservations/r"}},
            ReservationPlacement(
                name="projects/123456789012/zones/europe-west4-a/reservations/r",
                region="europe-west4",
            ),
            id="project-number",
        ),
    ],
)
def test_each_new_kind_is_read(entry: dict, placement: Placement) -> None:
    config = base_config()
    config["guards"]["regions"] += ["europe-west4"]
    config = parse(with_value(config, f"{T}.placement[1]", entry))
    assert config.templates["resnet"].placements[1] == placement


def test_a_whole_chain_of_every_kind_reads_in_order() -> None:
    chain = [
        {"reservation": {"name": RES}},
        {"persistent_resource": "a100-pool"},
        {"spot": None},
        {"flex_start": {"max_wait": "2h"}},
        {"on_demand": {}},
    ]
    placements = (
        parse(with_value(base_config(), f"{T}.placement", chain)).templates["resnet"].placements
    )
    assert [type(placement).__name__ for placement in placements] == [
        "ReservationPlacement",
        "PersistentResourcePlacement",
        "SpotPlacement",
        "FlexStartPlacement",
        "OnDemandPlacement",
    ]


def test_a_reservation_built_in_code_takes_its_zones_region() -> None:
    assert ReservationPlacement(name=RES).region == "us-east4"
    assert ReservationPlacement(name=RES, region="us-east4") == ReservationPlacement(name=RES)
    assert ReservationPlacement().region is None


@pytest.mark.parametrize(
    ("entry", "reported_at", "says"),
    [
        ({"spot": {"zone": "us-east4-b"}}, f"{ENTRY}.spot.zone", "unknown key 'zone'"),
        ({"spot": {"regoin": "us-east4"}}, f"{ENTRY}.spot.regoin", "did you mean 'region'"),
        ({"spot": {"max_wait": "2h"}}, f"{ENTRY}.spot.max_wait", "allowed here: machine, region"),
        ({"spot": "us-east4"}, f"{ENTRY}.spot", "expected a mapping"),
        ({"spot": {"region": "US-EAST4"}}, f"{ENTRY}.spot.region", "Google Cloud region"),
        (
            {"spot": {"machine": {"accelerator": {"type": "NVIDIA_L4", "count": 1}}}},
            f"{ENTRY}.spot.machine.machine_type",
            "required",
        ),
        ({"spot": None, "region": "us-east4"}, f"{ENTRY}.region", "inside spot"),
        ({"on_demand": {"name": "x"}}, f"{ENTRY}.on_demand.name", "unknown key 'name'"),
        ({"on_demand": None, "machine": H100}, f"{ENTRY}.machine", "inside on_demand"),
        ({"spot": None, "on_demand": None}, ENTRY, "exactly one of"),
        ({"spott": None}, ENTRY, "did you mean 'spot'"),
        ({"reservation": {"size": 2}}, f"{ENTRY}.reservation.size", "unknown key 'size'"),
        ({"reservation": {"name": "a100-res"}}, f"{ENTRY}.reservation.name", "full Compute"),
        (
            {"reservation": {"name": "projects/acme-ml/zones/us-east4/reservations/r"}},
            f"{ENTRY}.reservation.name",
            "projects/PROJECT/zones/ZONE/reservations/NAME",
        ),
        (
            {"reservation": {"name": "projects/acme-ml/regions/us-east4/reservations/r"}},
            f"{ENTRY}.reservation.name",
            "is not valid",
        ),
        (
            {"reservation": {"name": f"{RES}/reservationBlocks/b1"}},
            f"{ENTRY}.reservation.name",
            "is not valid",
        ),
        (
            {"reservation": {"name": RES, "region": "us-central1"}},
            f"{ENTRY}.reservation.region",
            "set region to us-east4 or leave it out",
        ),
        ({"reservation": None, "name": RES}, f"{ENTRY}.name", "inside reservation"),
        # the guards judge a new kind's region and machine like flex_start's
        (
            {"spot": {"region": "europe-west4"}},
            f"{ENTRY}.spot.region",
            "outside guards.regions",
        ),
        (
            {"reservation": {"name": "projects/acme-ml/zones/europe-west4-a/reservations/r"}},
            f"{ENTRY}.reservation.name",
            "outside guards.regions",
        ),
        (
            {
                "on_demand": {
                    "machine": {
                        "machine_type": "a2-highgpu-8g",
                        "accelerator": {"type": "NVIDIA_TESLA_A100", "count": 16},
                    }
                }
            },
            T,
            "guards.max_gpus_per_job = 8",
        ),
    ],
)
def test_each_mistake_is_a_load_error_at_its_key(entry: dict, reported_at: str, says: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(with_value(base_config(), ENTRY, entry))
    problems = raised.value.problems
    assert any(p.path == reported_at and says in p.message for p in problems), [
        str(p) for p in problems
    ]


# --- encryption_key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        KEY,
        "projects/123456789012/locations/us-east4/keyRings/r_1/cryptoKeys/K-2",
        "projects/acme-ml/locations/{region}/keyRings/train/cryptoKeys/jobs",
    ],
)
def test_an_encryption_key_is_read(key: str) -> None:
    config = parse(with_value(base_config(), f"{T}.encryption_key", key))
    assert config.templates["resnet"].encryption_key == key


def test_no_encryption_key_means_google_managed() -> None:
    assert parse(base_config()).templates["resnet"].encryption_key is None


@pytest.mark.parametrize(
    "key",
    [
        "jobs",
        "projects/acme-ml/locations/us-central1/keyRings/train",
        "projects/acme-ml/locations/global/keyRings/train/cryptoKeys/jobs",
        "projects/acme-ml/locations/us/keyRings/train/cryptoKeys/jobs",
        "projects/acme-ml/locations/{zone}/keyRings/train/cryptoKeys/jobs",
        f"{KEY}/cryptoKeyVersions/1",
        "projects/acme-ml/locations/us-central1/keyRings/train/cryptoKeys/",
    ],
)
def test_a_bad_encryption_key_is_a_load_error(key: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(with_value(base_config(), f"{T}.encryption_key", key))
    [problem] = raised.value.problems
    assert problem.path == f"{T}.encryption_key"
    assert "projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY" in problem.message
    assert "locations/{region}" in problem.message  # the fix for a chain across regions


POOL = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4"},
}
BODY = {
    "displayName": "resnet-{run_id}",
    "encryptionSpec": {"kmsKeyName": KEY},
    "jobSpec": {"workerPoolSpecs": [POOL], "persistentResourceId": "a100-pool"},
}
RB = f"{T}.rest_body(job.json)"


def _with_file(tmp_path: Path, key: str, document: dict, **template: object) -> dict:
    (tmp_path / "job.json").write_text(json.dumps(document))
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(document))
    config = base_config()
    config["templates"]["resnet"] = {
        key: "job.json" if key == "rest_body" else "job.yaml",
        "service_account": SERVICE_ACCOUNT,
        "timeout": "48h",
        **template,
    }
    del config["routes"][0]  # its params name dataset_uri, which this template does not declare
    del config["routes"][-1]
    return config


def test_a_rest_body_brings_its_encryption_key(tmp_path: Path) -> None:
    template = parse(_with_file(tmp_path, "rest_body", BODY), base_dir=tmp_path).templates["resnet"]
    assert template.encryption_key == KEY
    assert "encryptionSpec" not in template.job_spec  # it is the CustomJob's, not the spec's


def test_the_template_key_wins_over_the_rest_bodys(tmp_path: Path) -> None:
    other = KEY.replace("cryptoKeys/jobs", "cryptoKeys/other")
    config = _with_file(tmp_path, "rest_body", BODY, encryption_key=other)
    assert parse(config, base_dir=tmp_path).templates["resnet"].encryption_key == other


def test_a_gcloud_config_takes_the_template_key_beside_it(tmp_path: Path) -> None:
    spec = {"workerPoolSpecs": [POOL], "persistentResourceId": "a100-pool"}
    config = _with_file(tmp_path, "gcloud_config", spec, encryption_key=KEY)
    assert parse(config, base_dir=tmp_path).templates["resnet"].encryption_key == KEY


@pytest.mark.parametrize(
    ("spec", "reported_at", "says"),
    [
        ({"kmsKeyName": "jobs"}, f"{RB}.encryptionSpec.kmsKeyName", "is not valid"),
        ({}, f"{RB}.encryptionSpec.kmsKeyName", "required"),
        ({"kmsKey": KEY}, f"{RB}.encryptionSpec.kmsKey", "did you mean 'kmsKeyName'"),
        (KEY, f"{RB}.encryptionSpec", "expected a mapping"),
    ],
)
def test_a_bad_rest_body_encryption_spec_is_named_in_the_file(
    tmp_path: Path, spec: object, reported_at: str, says: str
) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(
            _with_file(tmp_path, "rest_body", {**BODY, "encryptionSpec": spec}), base_dir=tmp_path
        )
    problems = raised.value.problems
    assert any(p.path == reported_at and says in p.message for p in problems), [
        str(p) for p in problems
    ]
