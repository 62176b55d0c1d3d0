"""Templates from files users already have: gcloud --config YAML and REST bodies."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from config_builders import SERVICE_ACCOUNT, base_config, parse

from shared.config.model import (
    FlexStartPlacement,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
)
from shared.config.problems import InvalidConfig

IMAGE = "us-docker.pkg.dev/acme-ml/train/resnet:1.4"
POOL = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": IMAGE, "args": ["--data={dataset_uri}"]},
}
FILE = "templates.resnet.gcloud_config(job.yaml)"
RESERVATION = "projects/acme-ml/zones/us-central1-a/reservations/a100-res"
SPECIFIC = {
    "reservationAffinityType": "SPECIFIC_RESERVATION",
    "key": "compute.googleapis.com/reservation-name",
    "values": [RESERVATION],
}


def _with_affinity(affinity: dict[str, Any]) -> dict[str, Any]:
    return {**POOL, "machineSpec": {**POOL["machineSpec"], "reservationAffinity": affinity}}


def config_with_file(tmp_path: Path, key: str, document: dict[str, Any], **template: Any) -> dict:
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(document))
    config = base_config()
    config["templates"]["resnet"] = {
        key: "job.yaml",
        "params": ["dataset_uri"],
        "timeout": "48h",
        "service_account": SERVICE_ACCOUNT,
        **template,
    }
    return config


@pytest.mark.parametrize(
    ("document", "placement", "rest"),
    [
        pytest.param(
            {
                "workerPoolSpecs": POOL,
                "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "7200s"},
            },
            FlexStartPlacement(max_wait=timedelta(hours=2)),
            {},
            id="single-pool-map",
        ),
        pytest.param(
            {"workerPoolSpecs": [POOL], "persistentResourceId": "a100-pool"},
            PersistentResourcePlacement(resource_id="a100-pool"),
            {},
            id="persistent-resource",
        ),
        pytest.param(
            {
                "workerPoolSpecs": [POOL],
                "scheduling": {
                    "strategy": "FLEX_START",
                    "maxWaitDuration": "0s",
                    "timeout": "3600s",
                    "restartJobOnWorkerRestart": True,
                },
            },
            FlexStartPlacement(max_wait=timedelta(0)),
            {"scheduling": {"restartJobOnWorkerRestart": True}},
            id="keeps-other-scheduling",
        ),
        pytest.param(
            {"workerPoolSpecs": [POOL], "scheduling": {"strategy": "SPOT"}},
            SpotPlacement(),
            {},
            id="spot",
        ),
        pytest.param(
            {"workerPoolSpecs": [POOL], "scheduling": {"strategy": "STANDARD"}},
            OnDemandPlacement(),
            {},
            id="standard",
        ),
        pytest.param(
            {"workerPoolSpecs": [_with_affinity(SPECIFIC), {}, _with_affinity(SPECIFIC)]},
            ReservationPlacement(name=RESERVATION),
            {"workerPoolSpecs": [POOL, {}, POOL]},
            id="specific-reservation-on-every-pool",
        ),
        pytest.param(
            {
                "workerPoolSpecs": _with_affinity({"reservationAffinityType": "ANY_RESERVATION"}),
                "scheduling": {"strategy": "STANDARD"},
            },
            ReservationPlacement(),
            {},
            id="any-reservation",
        ),
        pytest.param(
            {
                "workerPoolSpecs": [_with_affinity({"reservationAffinityType": "NO_RESERVATION"})],
                "scheduling": {"strategy": "SPOT"},
            },
            SpotPlacement(),
            {},
            id="no-reservation-is-none",
        ),
    ],
)
def test_a_gcloud_config_gives_the_spec_and_its_placement(
    tmp_path: Path, document: dict, placement: Placement, rest: dict
) -> None:
    config = parse(config_with_file(tmp_path, "gcloud_config", document), base_dir=tmp_path)
    template = config.templates["resnet"]
    assert template.placements == (placement,)
    assert template.job_spec == {
        "workerPoolSpecs": [POOL],
        "serviceAccount": SERVICE_ACCOUNT,
        **rest,
    }  # no reservationAffinity left in the spec: the placement sets it


def test_a_template_placement_overrides_the_files(tmp_path: Path) -> None:
    document = {"workerPoolSpecs": [POOL], "scheduling": {"strategy": "SPOT"}}
    chain = [{"flex_start": {"max_wait": "1h", "region": "us-east4"}}]
    config = parse(
        config_with_file(tmp_path, "gcloud_config", document, placement=chain), base_dir=tmp_path
    )
    assert config.templates["resnet"].placements == (
        FlexStartPlacement(max_wait=timedelta(hours=1), region="us-east4"),
    )
    assert "scheduling" not in config.templates["resnet"].job_spec


def test_a_rest_body_gives_display_name_labels_and_timeout(tmp_path: Path) -> None:
    body = {
        "displayName": "resnet-{run_id}",
        "labels": {"team": "vision"},
        "jobSpec": {
            "workerPoolSpecs": [POOL],
            "scheduling": {
                "timeout": "86400s",
                "strategy": "FLEX_START",
                "maxWaitDuration": "1800s",
            },
        },
    }
    config = config_with_file(tmp_path, "rest_body", body)
    del config["templates"]["resnet"]["timeout"]
    template = parse(config, base_dir=tmp_path).templates["resnet"]
    assert template.display_name == "resnet-{run_id}"
    assert template.labels == {"team": "vision"}
    assert template.timeout == timedelta(days=1)
    assert template.placements == (FlexStartPlacement(max_wait=timedelta(minutes=30)),)


@pytest.mark.parametrize(
    ("document", "reported_at", "says"),
    [
        (
            {"workerPoolSpecs": [POOL], "scheduling": {"strategy": "FLEX_START"}},
            "templates.resnet.placement",
            "without scheduling.maxWaitDuration",
        ),
        (
            {"workerPoolSpecs": [POOL], "scheduling": {"strategy": "LOW_COST"}},
            "templates.resnet.placement",
            "LOW_COST has no placement",
        ),
        (
            {
                "workerPoolSpecs": [POOL],
                "persistentResourceId": "p",
                "scheduling": {"strategy": "SPOT"},
            },
            "templates.resnet.placement",
            "both SPOT and persistentResourceId",
        ),
        (
            {"workerPoolSpecs": [_with_affinity(SPECIFIC), POOL]},
            f"{FILE}.workerPoolSpecs",
            "different reservationAffinity",
        ),
        (
            {"workerPoolSpecs": [_with_affinity(SPECIFIC)], "persistentResourceId": "p"},
            "templates.resnet.placement",
            "both a reservationAffinity and persistentResourceId",
        ),
        (
            {"workerPoolSpecs": [_with_affinity(SPECIFIC)], "scheduling": {"strategy": "SPOT"}},
            "templates.resnet.placement",
            "both a reservationAffinity and SPOT",
        ),
        (
            {"workerPoolSpecs": [_with_affinity({**SPECIFIC, "values": ["a100-res"]})]},
            f"{FILE}.workerPoolSpecs[0].machineSpec.reservationAffinity.values[0]",
            "full Compute Engine name",
        ),
        (
            {"workerPoolSpecs": [_with_affinity({**SPECIFIC, "key": "team"})]},
            f"{FILE}.workerPoolSpecs[0].machineSpec.reservationAffinity.key",
            "compute.googleapis.com/reservation-name",
        ),
        (
            {"workerPoolSpecs": [_with_affinity({"reservationAffinityType": "ANY"})]},
            f"{FILE}.workerPoolSpecs[0].machineSpec.reservationAffinity.reservationAffinityType",
            "ANY_RESERVATION",
        ),
        (
            {"workerPoolSpecs": [POOL], "encryptionSpec": {"kmsKeyName": "k"}},
            f"{FILE}.encryptionSpec",
            "set the template's encryption_key",
        ),
        (
            {
                "workerPoolSpecs": [POOL],
                "persistentResourceId": "p",
                "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "60s"},
            },
            "templates.resnet.placement",
            "both FLEX_START and persistentResourceId",
        ),
        ({"workerPoolSpecs": [POOL]}, "templates.resnet.placement", "names no placement"),
        ({"workerPoolSpec": [POOL]}, f"{FILE}.workerPoolSpec", "did you mean 'workerPoolSpecs'"),
        ({"workerPoolSpecs": []}, f"{FILE}.workerPoolSpecs", "one worker pool spec"),
        (
            {"workerPoolSpecs": [{"replicaCount": 1, "containerSpec": {"imageUri": IMAGE}}]},
            f"{FILE}.workerPoolSpecs[0].machineSpec",
            "required",
        ),
        (
            {"workerPoolSpecs": [{**POOL, "pythonPackageSpec": {}}]},
            f"{FILE}.workerPoolSpecs[0]",
            "exactly one of containerSpec or pythonPackageSpec",
        ),
        (
            {"workerPoolSpecs": [POOL], "scheduling": {"maxWaitDuration": "2 hours"}},
            f"{FILE}.scheduling.maxWaitDuration",
            "not a duration",
        ),
        (
            {
                "workerPoolSpecs": [
                    {**POOL, "containerSpec": {"imageUri": IMAGE, "args": ["--x={nope}"]}}
                ],
                "persistentResourceId": "p",
            },
            f"{FILE}.workerPoolSpecs[0].containerSpec.args[0]",
            "{nope} is neither",
        ),
        (
            {
                "workerPoolSpecs": [{**POOL, "containerSpec": {"imageUri": "docker.io/x/y"}}],
                "persistentResourceId": "p",
            },
            f"{FILE}.workerPoolSpecs[0].containerSpec.imageUri",
            "outside guards.image_prefixes",
        ),
    ],
)
def test_each_broken_file_is_reported(
    tmp_path: Path, document: dict, reported_at: str, says: str
) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(config_with_file(tmp_path, "gcloud_config", document), base_dir=tmp_path)
    assert any(p.path == reported_at and says in p.message for p in raised.value.problems), [
        str(p) for p in raised.value.problems
    ]


def test_a_missing_file_names_the_reference(tmp_path: Path) -> None:
    config = config_with_file(tmp_path, "gcloud_config", {})
    config["templates"]["resnet"]["gcloud_config"] = "missing.yaml"
    with pytest.raises(
        InvalidConfig,
        match=r"templates.resnet.gcloud_config: cannot read "
        "'missing.yaml'.*relative to the config file",
    ):
        parse(config, base_dir=tmp_path)


def test_a_broken_template_is_not_reported_again_by_its_routes(tmp_path: Path) -> None:
    config = config_with_file(tmp_path, "gcloud_config", {"workerPoolSpecs": []})
    with pytest.raises(InvalidConfig) as raised:
        parse(config, base_dir=tmp_path)
    assert [p.path for p in raised.value.problems] == [f"{FILE}.workerPoolSpecs"]
