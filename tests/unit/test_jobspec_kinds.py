"""Rendering the spot, on_demand and reservation placements, and a template's encryption_key.

Each case renders the same template (whose spec still carries a FLEX_START wait and a stale
persistent resource, as an imported file could) on one placement, and reads the job as the REST
API shows it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from shared.config.model import (
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
    Template,
)
from shared.policy.jobspec import RenderedJob, job_to_json, render_job

POOL: dict[str, Any] = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": "python:3.10", "command": ["sleep"], "args": ["100"]},
}
SPEC: dict[str, Any] = {
    # pool 1 is skipped ({}); pool 2 runs two workers
    "workerPoolSpecs": [POOL, {}, {**POOL, "replicaCount": 2}],
    "persistentResourceId": "stale",
    "scheduling": {
        "strategy": "FLEX_START",
        "maxWaitDuration": "7200s",
        "restartJobOnWorkerRestart": True,
    },
}
RES = "projects/acme-ml/zones/us-east4-b/reservations/a100-res"
H100 = MachineOverride("a3-highgpu-1g", "NVIDIA_H100_80GB", 1)
H100_SPEC = {
    "machineType": "a3-highgpu-1g",
    "acceleratorType": "NVIDIA_H100_80GB",
    "acceleratorCount": 1,
}
A100_SPEC = POOL["machineSpec"]
SPECIFIC = {
    "reservationAffinityType": "SPECIFIC_RESERVATION",
    "key": "compute.googleapis.com/reservation-name",
    "values": [RES],
}
ANY = {"reservationAffinityType": "ANY_RESERVATION"}
KEPT = {"restartJobOnWorkerRestart": True, "timeout": "7200s"}


def _template(**fields: Any) -> Template:
    return Template(
        name="kinds",
        display_name="kinds-{run_id}",
        job_spec=SPEC,
        placements=(SpotPlacement(),),
        timeout=timedelta(hours=2),
        **fields,
    )


def _render(placement: Placement, template: Template | None = None) -> RenderedJob:
    return render_job(
        template or _template(),
        {},
        placement,
        project="acme-ml",
        default_region="us-central1",
        run_id="r-3f2a9c0d1e4b5a6978877665",
        attempt=1,
    )


def _rest(rendered: RenderedJob) -> dict[str, Any]:
    return json.loads(job_to_json(rendered.custom_job))


@pytest.mark.parametrize(
    ("placement", "region", "scheduling", "machine", "affinity"),
    [
        pytest.param(
            SpotPlacement(), "us-central1", {**KEPT, "strategy": "SPOT"}, A100_SPEC, None, id="spot"
        ),
        pytest.param(
            SpotPlacement(region="us-east4", machine=H100),
            "us-east4",
            {**KEPT, "strategy": "SPOT"},
            H100_SPEC,
            None,
            id="spot-elsewhere-on-h100",
        ),
        pytest.param(
            OnDemandPlacement(),
            "us-central1",
            {**KEPT, "strategy": "STANDARD"},
            A100_SPEC,
            None,
            id="on-demand",
        ),
        pytest.param(
            OnDemandPlacement(region="europe-west4", machine=H100),
            "europe-west4",
            {**KEPT, "strategy": "STANDARD"},
            H100_SPEC,
            None,
            id="on-demand-elsewhere-on-h100",
        ),
        pytest.param(
            ReservationPlacement(name=RES),
            "us-east4",  # the reservation's zone's region, not the config's
            KEPT,  # no strategy: Vertex AI reads it as STANDARD
            A100_SPEC,
            SPECIFIC,
            id="specific-reservation",
        ),
        pytest.param(
            ReservationPlacement(name=RES, machine=H100),
            "us-east4",
            KEPT,
            H100_SPEC,
            SPECIFIC,
            id="specific-reservation-on-h100",
        ),
        pytest.param(
            ReservationPlacement(), "us-central1", KEPT, A100_SPEC, ANY, id="any-reservation"
        ),
        pytest.param(
            ReservationPlacement(region="us-east4"),
            "us-east4",
            KEPT,
            A100_SPEC,
            ANY,
            id="any-reservation-elsewhere",
        ),
    ],
)
def test_each_kind_sets_its_scheduling_and_machines(
    placement: Placement,
    region: str,
    scheduling: dict[str, Any],
    machine: dict[str, Any],
    affinity: dict[str, Any] | None,
) -> None:
    rendered = _render(placement)
    job_spec = _rest(rendered)["jobSpec"]
    assert rendered.parent == f"projects/acme-ml/locations/{region}"
    assert job_spec["scheduling"] == scheduling  # no maxWaitDuration: only FLEX_START waits
    assert "persistentResourceId" not in job_spec
    pools = job_spec["workerPoolSpecs"]
    expected = machine if affinity is None else {**machine, "reservationAffinity": affinity}
    assert [pool.get("machineSpec") for pool in pools] == [expected, None, expected]


def test_a_reservation_without_other_scheduling_has_none() -> None:
    template = Template(
        name="bare",
        display_name="bare",
        job_spec={"workerPoolSpecs": [POOL]},
        placements=(ReservationPlacement(name=RES),),
    )
    assert "scheduling" not in _rest(_render(ReservationPlacement(name=RES), template))["jobSpec"]


def test_flex_start_after_a_reservation_keeps_no_affinity() -> None:
    # each rendering starts from the template's own spec: nothing leaks between placements
    template = _template()
    _render(ReservationPlacement(name=RES), template)
    job_spec = _rest(_render(FlexStartPlacement(timedelta(hours=1)), template))["jobSpec"]
    assert all(
        "reservationAffinity" not in pool.get("machineSpec", {})
        for pool in job_spec["workerPoolSpecs"]
    )
    assert job_spec["scheduling"]["strategy"] == "FLEX_START"


KEY = "projects/acme-ml/locations/{region}/keyRings/train/cryptoKeys/jobs"


@pytest.mark.parametrize(
    ("key", "placement", "rendered_key"),
    [
        pytest.param(
            "projects/acme-ml/locations/us-central1/keyRings/train/cryptoKeys/jobs",
            SpotPlacement(region="us-east4"),
            "projects/acme-ml/locations/us-central1/keyRings/train/cryptoKeys/jobs",
            id="as-written",
        ),
        pytest.param(
            KEY,
            SpotPlacement(region="us-east4"),
            "projects/acme-ml/locations/us-east4/keyRings/train/cryptoKeys/jobs",
            id="region-of-the-placement",
        ),
        pytest.param(
            KEY,
            ReservationPlacement(name=RES),
            "projects/acme-ml/locations/us-east4/keyRings/train/cryptoKeys/jobs",
            id="region-of-the-reservation",
        ),
        pytest.param(
            KEY,
            OnDemandPlacement(),
            "projects/acme-ml/locations/us-central1/keyRings/train/cryptoKeys/jobs",
            id="region-of-the-config",
        ),
    ],
)
def test_the_encryption_key_is_the_jobs_kms_key(
    key: str, placement: Placement, rendered_key: str
) -> None:
    job = _rest(_render(placement, _template(encryption_key=key)))
    assert job["encryptionSpec"] == {"kmsKeyName": rendered_key}


def test_no_encryption_key_means_no_encryption_spec() -> None:
    assert "encryptionSpec" not in _rest(_render(SpotPlacement()))
