"""The offline rules of the spot, on_demand and reservation placements and of encryption_key.

Each case renders one clean job for a placement (as dispatch and ``plan`` do), breaks one thing,
and names the violations expected: rule id and REST field. Then ``check_templates`` (what
``vertex-dispatch validate`` runs) names them at the key the user wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from shared.aiplatform import AcceleratorType, CustomJob, ReservationAffinity, Scheduling
from shared.config.loader import parse_config
from shared.config.model import (
    FlexStartPlacement,
    Guards,
    MachineOverride,
    OnDemandPlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
    Template,
)
from shared.config.problems import InvalidConfig
from shared.policy.jobspec import render_job
from shared.validation import Rule, ViolationKind, check_templates, validate_spec

RES = "projects/acme-ml/zones/us-east4-b/reservations/a100-res"
KEY = "projects/acme-ml/locations/{region}/keyRings/train/cryptoKeys/jobs"
POOL: dict[str, Any] = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": "python:3.10"},
}
POOL0 = "jobSpec.workerPoolSpecs[0]"
POOL1 = "jobSpec.workerPoolSpecs[1]"
SPOT = SpotPlacement(region="us-east4")
ON_DEMAND = OnDemandPlacement()
NAMED = ReservationPlacement(name=RES)
ANY = ReservationPlacement()


def _job(placement: Placement, **fields: Any) -> tuple[CustomJob, str]:
    template = Template(
        name="kinds",
        display_name="kinds-{run_id}",
        job_spec={"workerPoolSpecs": [POOL, {**POOL, "replicaCount": 2}]},
        placements=(placement,),
        timeout=timedelta(hours=2),
        **fields,
    )
    rendered = render_job(
        template,
        {},
        placement,
        project="acme-ml",
        default_region="us-central1",
        run_id="r-3f2a9c0d1e4b5a6978877665",
        attempt=1,
    )
    return rendered.custom_job, rendered.region


def _machine(machine_type: str, accelerator: str, count: int) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        for pool in job.job_spec.worker_pool_specs:
            pool.machine_spec.machine_type = machine_type
            pool.machine_spec.accelerator_type = AcceleratorType[accelerator]
            pool.machine_spec.accelerator_count = count

    return mutate


def _strategy(strategy: Scheduling.Strategy) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        job.job_spec.scheduling.strategy = strategy

    return mutate


def _max_wait(job: CustomJob) -> None:
    job.job_spec.scheduling.max_wait_duration = timedelta(hours=1)


def _on_resource(job: CustomJob) -> None:
    job.job_spec.persistent_resource_id = "a100-pool"


def _affinity(kind: ReservationAffinity.Type, *names: str) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        affinity = ReservationAffinity(reservation_affinity_type=kind)
        if names:
            affinity.key = "compute.googleapis.com/reservation-name"
            affinity.values = list(names)
        job.job_spec.worker_pool_specs[1].machine_spec.reservation_affinity = affinity

    return mutate


def _no_affinity(job: CustomJob) -> None:
    del job.job_spec.worker_pool_specs[0].machine_spec.reservation_affinity


def _unchanged(job: CustomJob) -> None:
    pass


STRATEGY = "jobSpec.scheduling.strategy"
AFFINITY1 = f"{POOL1}.machineSpec.reservationAffinity"
GPU0 = f"{POOL0}.machineSpec.acceleratorType"
GPU1 = f"{POOL1}.machineSpec.acceleratorType"
S = Scheduling.Strategy
A = ReservationAffinity.Type

# (case id, placement, mutation, [(rule, field)]): every one INVALID (a human must change it)
KIND_CASES = [
    ("spot-clean", SPOT, _unchanged, []),
    ("spot-t4", SPOT, _machine("n1-standard-8", "NVIDIA_TESLA_T4", 1), []),  # not FLEX_START's
    ("spot-cpu-only", SPOT, _machine("n2-standard-8", "ACCELERATOR_TYPE_UNSPECIFIED", 0), []),
    ("spot-h200", SPOT, _machine("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
     [(Rule.HYPERDISK_BOOT_DISK, f"{POOL0}.diskSpec.bootDiskType"),
      (Rule.HYPERDISK_BOOT_DISK, f"{POOL1}.diskSpec.bootDiskType")]),
    ("spot-k80", SPOT, _machine("n1-standard-4", "NVIDIA_TESLA_K80", 1),
     [(Rule.SPOT_GPU, GPU0), (Rule.SPOT_GPU, GPU1)]),
    ("spot-gb200", SPOT, _machine("a4x-highgpu-4g", "NVIDIA_GB200", 4),
     [(Rule.SPOT_GPU, GPU0), (Rule.SPOT_GPU, GPU1)]),
    ("spot-strategy-flex", SPOT, _strategy(S.FLEX_START), [(Rule.PLACEMENT, STRATEGY)]),
    ("spot-max-wait", SPOT, _max_wait,
     [(Rule.PLACEMENT, "jobSpec.scheduling.maxWaitDuration")]),
    ("spot-on-resource", SPOT, _on_resource, [(Rule.PLACEMENT, "jobSpec.persistentResourceId")]),
    ("spot-any-reservation", SPOT, _affinity(A.ANY_RESERVATION), [(Rule.PLACEMENT, AFFINITY1)]),
    ("spot-no-reservation", SPOT, _affinity(A.NO_RESERVATION), []),
    ("on-demand-clean", ON_DEMAND, _unchanged, []),
    ("on-demand-k80", ON_DEMAND, _machine("n1-standard-4", "NVIDIA_TESLA_K80", 1), []),
    ("on-demand-strategy-spot", ON_DEMAND, _strategy(S.SPOT), [(Rule.PLACEMENT, STRATEGY)]),
    ("on-demand-unset", ON_DEMAND, _strategy(S.STRATEGY_UNSPECIFIED),
     [(Rule.PLACEMENT, STRATEGY)]),
    ("on-demand-specific", ON_DEMAND, _affinity(A.SPECIFIC_RESERVATION, RES),
     [(Rule.PLACEMENT, AFFINITY1)]),
    ("named-clean", NAMED, _unchanged, []),
    ("named-standard", NAMED, _strategy(S.STANDARD), []),
    ("named-spot", NAMED, _strategy(S.SPOT), [(Rule.PLACEMENT, STRATEGY)]),
    ("named-flex", NAMED, _strategy(S.FLEX_START), [(Rule.PLACEMENT, STRATEGY)]),
    ("named-pool-without", NAMED, _no_affinity,
     [(Rule.PLACEMENT, f"{POOL0}.machineSpec.reservationAffinity")]),
    ("named-other-reservation", NAMED,
     _affinity(A.SPECIFIC_RESERVATION, RES.replace("a100-res", "other")),
     [(Rule.PLACEMENT, AFFINITY1)]),
    ("named-max-wait", NAMED, _max_wait, [(Rule.PLACEMENT, "jobSpec.scheduling.maxWaitDuration")]),
    ("any-clean", ANY, _unchanged, []),
    ("any-pool-specific", ANY, _affinity(A.SPECIFIC_RESERVATION, RES),
     [(Rule.PLACEMENT, AFFINITY1)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("placement", "mutate", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in KIND_CASES],
)
def test_each_kinds_rules(
    placement: Placement, mutate: Callable[[CustomJob], None], expected: list[tuple[Rule, str]]
) -> None:
    job, region = _job(placement)
    assert validate_spec(job, placement, Guards(), region=region, tuning=None, pipeline=None) == []
    mutate(job)
    violations = validate_spec(job, placement, Guards(), region=region, tuning=None, pipeline=None)
    assert [(v.rule, v.field) for v in violations] == expected, violations
    assert all(v.kind is ViolationKind.INVALID and v.message for v in violations)


def test_the_spot_gpu_message_names_the_gpus_and_the_fix() -> None:
    job, region = _job(SPOT)
    _machine("n1-standard-4", "NVIDIA_TESLA_K80", 1)(job)
    violation = validate_spec(job, SPOT, Guards(), region=region, tuning=None, pipeline=None)[0]
    assert "NVIDIA_TESLA_K80" in violation.message
    assert "NVIDIA_TESLA_T4" in violation.message  # what to pick instead
    assert "on demand" in violation.message


def test_flex_start_rules_stay_flex_starts() -> None:
    # a T4 is refused on FLEX_START only: the same job on Spot and on demand is clean
    flex = FlexStartPlacement(max_wait=timedelta(hours=1))
    job, region = _job(flex)
    _machine("n1-standard-8", "NVIDIA_TESLA_T4", 1)(job)
    assert [
        v.rule
        for v in validate_spec(job, flex, Guards(), region=region, tuning=None, pipeline=None)
    ] == [
        Rule.FLEX_START_GPU,
        Rule.FLEX_START_GPU,
    ]


@pytest.mark.parametrize(
    ("key", "placement", "expected"),
    [
        pytest.param(KEY, SPOT, [], id="region-placeholder-follows-the-placement"),
        pytest.param(KEY, NAMED, [], id="region-placeholder-follows-the-reservation"),
        pytest.param(
            "projects/acme-ml/locations/us-east4/keyRings/train/cryptoKeys/jobs",
            SPOT,
            [],
            id="same",
        ),
        pytest.param(
            "projects/acme-ml/locations/us-central1/keyRings/train/cryptoKeys/jobs",
            SPOT,
            [(Rule.ENCRYPTION_KEY, "encryptionSpec.kmsKeyName")],
            id="other-region",
        ),
    ],
)
def test_the_encryption_key_is_in_the_jobs_region(
    key: str, placement: Placement, expected: list[tuple[Rule, str]]
) -> None:
    job, region = _job(placement, encryption_key=key)
    violations = validate_spec(job, placement, Guards(), region=region, tuning=None, pipeline=None)
    assert [(v.rule, v.field) for v in violations] == expected


def test_this_table_covers_the_kinds_rules() -> None:
    rules = {rule for case in KIND_CASES for rule, _ in case[3]}
    assert {Rule.SPOT_GPU, Rule.PLACEMENT} <= rules


# --- vertex-dispatch validate: named at the user's keys --------------------------------------

CONFIG = """project: acme-ml
region: us-central1
alerts_topic: training-alerts
routes:
  - name: requests
    pubsub: {attributes: {kind: train}}
templates:
  t:
    worker_pools:
      - machine_type: a2-highgpu-1g
        accelerator: {type: NVIDIA_TESLA_A100, count: 1}
        image: us-docker.pkg.dev/acme-ml/train/x:1
    timeout: 2h
    encryption_key: projects/acme-ml/locations/{region}/keyRings/train/cryptoKeys/jobs
    placement:
      - reservation: {name: projects/acme-ml/zones/us-east4-b/reservations/a100-res}
      - spot: {region: us-east4}
      - on_demand:
"""
K80 = "{machine_type: n1-standard-4, accelerator: {type: NVIDIA_TESLA_K80, count: 1}}"
LINT_CASES = [
    pytest.param([], [], id="clean"),
    pytest.param(
        [("locations/{region}/keyRings", "locations/us-central1/keyRings")],
        [
            (
                "templates.t.encryption_key",
                Rule.ENCRYPTION_KEY,
                " (on placement[0], placement[1])",
            )
        ],
        id="encryption-key-of-one-region",
    ),
]


@pytest.mark.parametrize(("edits", "expected"), LINT_CASES)
def test_validate_names_the_key_the_user_wrote(
    edits: list[tuple[str, str]], expected: list[tuple[str, Rule, str]]
) -> None:
    text = CONFIG
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    problems = check_templates(parse_config(text, "kinds.yaml"))
    assert [(p.path, p.violation.rule, p.placement_note) for p in problems] == expected


# A Spot GPU Spot does not serve is known as the config is written: the load refuses it, at the
# same key and with the same rule id (shared.config.spot), so validate reports it as a load
# problem and renders nothing.
SPOT_LOAD_CASES = [
    pytest.param(
        [("spot: {region: us-east4}", "spot: {region: us-east4, machine: " + K80 + "}")],
        "templates.t.placement[1].spot.machine.accelerator.type",
        id="spot-machine-override",
    ),
    pytest.param(
        [
            ("a2-highgpu-1g", "n1-standard-4"),
            ("{type: NVIDIA_TESLA_A100, count: 1}", "{type: NVIDIA_TESLA_K80, count: 1}"),
        ],
        "templates.t.worker_pools[0].accelerator.type",
        id="spot-pool",
    ),
]


@pytest.mark.parametrize(("edits", "path"), SPOT_LOAD_CASES)
def test_a_spot_gpu_spot_refuses_is_a_load_problem_with_the_jobs_rule_id(
    edits: list[tuple[str, str]], path: str
) -> None:
    text = CONFIG
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    with pytest.raises(InvalidConfig) as raised:
        parse_config(text, "kinds.yaml")
    assert [(p.path, p.rule) for p in raised.value.problems] == [(path, Rule.SPOT_GPU.value)]


def test_a_placement_built_in_code_renders_and_validates_every_kind() -> None:
    override = MachineOverride("a3-highgpu-1g", "NVIDIA_H100_80GB", 1)
    for placement in (
        SpotPlacement(machine=override),
        OnDemandPlacement(machine=override),
        ReservationPlacement(name=RES, machine=override),
    ):
        job, region = _job(placement)
        assert (
            validate_spec(job, placement, Guards(), region=region, tuning=None, pipeline=None) == []
        ), placement


@pytest.mark.parametrize(
    ("field", "index", "path"),
    [
        ("region", 0, "templates.t.placement[0].reservation.name"),  # its zone's region
        ("region", 1, "templates.t.placement[1].spot.region"),
        ("region", 2, "templates.t.placement[2].on_demand.region"),
        ("jobSpec.scheduling.strategy", 1, "templates.t.placement[1]"),
        (
            f"{POOL0}.machineSpec.reservationAffinity",
            0,
            "templates.t.placement[0].reservation.name",
        ),
        (
            f"{POOL0}.machineSpec.reservationAffinity",
            1,
            "templates.t.worker_pools[0].reservationAffinity",
        ),
        ("encryptionSpec.kmsKeyName", 2, "templates.t.encryption_key"),
    ],
)
def test_a_new_kinds_fields_are_named_at_its_entry(field: str, index: int, path: str) -> None:
    from shared.config.origins import user_path

    template = parse_config(CONFIG, "kinds.yaml").templates["t"]
    assert user_path(template, field, index) == path
