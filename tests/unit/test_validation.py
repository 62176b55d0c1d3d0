"""Validation rules: the seed pages' jobs pass, and every rule broken once is caught by id."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from google.cloud.aiplatform_v1 import (
    AcceleratorType,
    CustomJob,
    PersistentResource,
    Scheduling,
    WorkerPoolSpec,
)
from test_validation_reservation import RESERVATION_CASES

from shared.config.model import (
    Config,
    FlexStartPlacement,
    Guards,
    PersistentResourcePlacement,
    Template,
)
from shared.validation import (
    Rule,
    Violation,
    ViolationKind,
    check_templates,
    validate_job,
    validate_spec,
    verdict,
)

# The REST request body of the FLEX_START seed page, as printed there.
SEED_DWS_BODY = {
    "displayName": "MyDwsJob",
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                "containerSpec": {"imageUri": "python:3.10", "command": ["sleep"], "args": ["100"]},
            }
        ],
        "scheduling": {"maxWaitDuration": "1800s", "strategy": "FLEX_START"},
    },
}

# The persistent-resource seed page's Python sample, as the REST body it sends.
SEED_PERSISTENT_BODY = {
    "displayName": "on-persistent-resource",
    "jobSpec": {
        "persistentResourceId": "my-resource",
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "n1-standard-4",
                    "acceleratorType": "NVIDIA_TESLA_K80",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "containerSpec": {"imageUri": "us-docker.pkg.dev/acme/train/k80:1"},
            }
        ],
    },
}

# The resource as GetPersistentResource returns it: Vertex fills in the default boot disk.
SEED_RESOURCE = {
    "name": "projects/acme/locations/us-central1/persistentResources/my-resource",
    "state": "RUNNING",
    "resourcePools": [
        {
            "id": "k80-pool",
            "machineSpec": {
                "machineType": "n1-standard-4",
                "acceleratorType": "NVIDIA_TESLA_K80",
                "acceleratorCount": 1,
            },
            "replicaCount": "2",
            "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
            "usedReplicaCount": "0",
        }
    ],
}

FLEX_1800 = FlexStartPlacement(max_wait=timedelta(seconds=1800))
ON_RESOURCE = PersistentResourcePlacement(resource_id="my-resource")
REGION = "us-central1"


def dws_job() -> CustomJob:
    return CustomJob.from_json(json.dumps(SEED_DWS_BODY))


def persistent_job() -> CustomJob:
    return CustomJob.from_json(json.dumps(SEED_PERSISTENT_BODY))


def seed_resource() -> PersistentResource:
    return PersistentResource.from_json(json.dumps(SEED_RESOURCE))


def test_seed_flex_start_job_is_clean() -> None:
    assert (
        validate_job(dws_job(), FLEX_1800, Guards(), region=REGION, tuning=None, pipeline=None)
        == []
    )


def test_seed_gcloud_config_with_7200s_wait_is_clean() -> None:
    job = dws_job()
    job.job_spec.scheduling.max_wait_duration = timedelta(seconds=7200)
    job.job_spec.worker_pool_specs[0].container_spec.command = ["start"]
    job.job_spec.worker_pool_specs[0].container_spec.args = ["port=8500"]
    placement = FlexStartPlacement(max_wait=timedelta(seconds=7200))
    assert validate_job(job, placement, Guards(), region=REGION, tuning=None, pipeline=None) == []


def test_seed_persistent_resource_job_is_clean() -> None:
    violations = validate_job(
        persistent_job(),
        ON_RESOURCE,
        Guards(),
        seed_resource(),
        region=REGION,
        tuning=None,
        pipeline=None,
    )
    assert violations == []


STRICT_GUARDS = Guards(
    image_prefixes=("python:", "us-docker.pkg.dev/acme/"),
    service_accounts=("trainer@acme.iam.gserviceaccount.com",),
    regions=("us-central1",),
    max_gpus_per_job=16,
    max_gpu_hours_per_job=400,
)


def _pool(job: CustomJob, index: int = 0) -> WorkerPoolSpec:
    return job.job_spec.worker_pool_specs[index]


def _second_pool(job: CustomJob, **changes: object) -> None:
    pool = WorkerPoolSpec(_pool(job))
    for name, value in changes.items():
        setattr(pool, name, value)
    job.job_spec.worker_pool_specs.append(pool)


def _set_machine(machine_type: str, accelerator: str, count: int) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        spec = _pool(job).machine_spec
        spec.machine_type = machine_type
        spec.accelerator_type = AcceleratorType[accelerator]
        spec.accelerator_count = count

    return mutate


def _with_timeout(hours: float) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        job.job_spec.scheduling.timeout = timedelta(hours=hours)

    return mutate


def _trusted(job: CustomJob) -> None:
    """Bring the seed job inside STRICT_GUARDS, so only the mutation under test breaks one."""
    job.job_spec.service_account = "trainer@acme.iam.gserviceaccount.com"
    job.job_spec.scheduling.timeout = timedelta(hours=2)


def _drop_max_wait(job: CustomJob) -> None:
    del job.job_spec.scheduling.max_wait_duration


def _h100_pool_beside_a100(job: CustomJob) -> None:
    _second_pool(job)
    spec = _pool(job, 1).machine_spec
    spec.machine_type = "a3-highgpu-1g"
    spec.accelerator_type = AcceleratorType.NVIDIA_H100_80GB


def _chief_twice(job: CustomJob) -> None:
    _pool(job).replica_count = 2


def _zero_workers(job: CustomJob) -> None:
    _second_pool(job, replica_count=0)


def _no_image(job: CustomJob) -> None:
    _pool(job).container_spec.image_uri = ""


def _package_without_module(job: CustomJob) -> None:
    _pool(job).python_package_spec = {
        "executor_image_uri": "python:3.10",
        "package_uris": ["gs://acme/trainer-0.1.tar.gz"],
    }


def _no_pools(job: CustomJob) -> None:
    job.job_spec.worker_pool_specs = []


def _a4_on_pd_ssd(job: CustomJob) -> None:
    _set_machine("a4-highgpu-8g", "NVIDIA_B200", 8)(job)


def _long_display_name(job: CustomJob) -> None:
    job.display_name = "x" * 129


def _label(key: str, value: str) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        job.labels[key] = value

    return mutate


def _many_labels(job: CustomJob) -> None:
    for number in range(65):
        job.labels[f"k{number}"] = "v"


def _strategy(strategy: Scheduling.Strategy) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        job.job_spec.scheduling.strategy = strategy

    return mutate


def _also_on_resource(job: CustomJob) -> None:
    job.job_spec.persistent_resource_id = "my-resource"


def _foreign_image(job: CustomJob) -> None:
    _pool(job).container_spec.image_uri = "docker.io/evil/miner:latest"


def _default_service_account(job: CustomJob) -> None:
    job.job_spec.service_account = ""


def _twenty_four_gpus(job: CustomJob) -> None:
    _set_machine("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8)(job)
    _second_pool(job, replica_count=2)  # 8 on the chief + 2 x 8 on the workers


def _eight_gpus_for(hours: float | None) -> Callable[[CustomJob], None]:
    def mutate(job: CustomJob) -> None:
        _set_machine("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8)(job)
        if hours is None:
            del job.job_spec.scheduling.timeout
        else:
            job.job_spec.scheduling.timeout = timedelta(hours=hours)

    return mutate


POOL0 = "jobSpec.workerPoolSpecs[0]"

# (case id, mutation, rule, field, kind): each case breaks exactly one rule of a clean FLEX_START
# job under STRICT_GUARDS; the guard and generic rules are shown on the FLEX_START job too.
FLEX_START_CASES = [
    ("flex-gpu-t4", _set_machine("n1-standard-8", "NVIDIA_TESLA_T4", 1), Rule.FLEX_START_GPU,
     f"{POOL0}.machineSpec.acceleratorType"),
    ("flex-timeout-8d", _with_timeout(24 * 8), Rule.FLEX_START_TIMEOUT,
     "jobSpec.scheduling.timeout"),
    ("flex-mixed-machines", _h100_pool_beside_a100, Rule.FLEX_START_SAME_MACHINE,
     "jobSpec.workerPoolSpecs[1].machineSpec"),
    ("flex-no-max-wait", _drop_max_wait, Rule.FLEX_START_MAX_WAIT,
     "jobSpec.scheduling.maxWaitDuration"),
    ("flex-strategy-spot", _strategy(Scheduling.Strategy.SPOT), Rule.PLACEMENT,
     "jobSpec.scheduling.strategy"),
    ("flex-on-resource", _also_on_resource, Rule.PLACEMENT, "jobSpec.persistentResourceId"),
    ("wrong-gpu-for-machine", _set_machine("a2-highgpu-1g", "NVIDIA_A100_80GB", 1),
     Rule.MACHINE_ACCELERATOR, f"{POOL0}.machineSpec.acceleratorType"),
    ("wrong-gpu-count", _set_machine("a2-highgpu-1g", "NVIDIA_TESLA_A100", 2),
     Rule.MACHINE_ACCELERATOR, f"{POOL0}.machineSpec.acceleratorCount"),
    ("unknown-a2-type", _set_machine("a2-highgpu-3g", "NVIDIA_TESLA_A100", 3),
     Rule.MACHINE_ACCELERATOR, f"{POOL0}.machineSpec.machineType"),
    ("hyperdisk-only", _a4_on_pd_ssd, Rule.HYPERDISK_BOOT_DISK, f"{POOL0}.diskSpec.bootDiskType"),
    ("chief-two-replicas", _chief_twice, Rule.FIRST_POOL_REPLICAS, f"{POOL0}.replicaCount"),
    ("worker-zero-replicas", _zero_workers, Rule.REPLICAS,
     "jobSpec.workerPoolSpecs[1].replicaCount"),
    ("no-image", _no_image, Rule.PROGRAM, f"{POOL0}.containerSpec.imageUri"),
    ("package-no-module", _package_without_module, Rule.PROGRAM,
     f"{POOL0}.pythonPackageSpec.pythonModule"),
    ("no-pools", _no_pools, Rule.WORKER_POOLS, POOL0),
    ("display-name-129", _long_display_name, Rule.DISPLAY_NAME, "displayName"),
    ("label-key-uppercase", _label("Team", "ml"), Rule.LABELS, "labels.Team"),
    ("label-key-digit-first", _label("1team", "ml"), Rule.LABELS, "labels.1team"),
    ("label-value-64", _label("team", "x" * 64), Rule.LABELS, "labels.team"),
    ("label-value-space", _label("team", "m l"), Rule.LABELS, "labels.team"),
    ("labels-65", _many_labels, Rule.LABELS, "labels"),
    ("guard-image", _foreign_image, Rule.GUARD_IMAGE, f"{POOL0}.containerSpec.imageUri"),
    ("guard-service-account", _default_service_account, Rule.GUARD_SERVICE_ACCOUNT,
     "jobSpec.serviceAccount"),
    ("guard-gpus", _twenty_four_gpus, Rule.GUARD_GPUS, "jobSpec.workerPoolSpecs"),
    ("guard-gpu-hours", _eight_gpus_for(51), Rule.GUARD_GPU_HOURS, "jobSpec.scheduling.timeout"),
    ("guard-gpu-hours-default-timeout", _eight_gpus_for(None), Rule.GUARD_GPU_HOURS,
     "jobSpec.scheduling.timeout"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("mutate", "rule", "field"),
    [pytest.param(*case[1:], id=case[0]) for case in FLEX_START_CASES],
)
def test_each_broken_rule_is_reported_once(
    mutate: Callable[[CustomJob], None], rule: Rule, field: str
) -> None:
    job = dws_job()
    _trusted(job)
    assert (
        validate_job(job, FLEX_1800, STRICT_GUARDS, region=REGION, tuning=None, pipeline=None) == []
    )
    mutate(job)
    violations = validate_job(
        job, FLEX_1800, STRICT_GUARDS, region=REGION, tuning=None, pipeline=None
    )
    assert [(v.rule, v.field, v.kind) for v in violations] == [
        (rule, field, ViolationKind.INVALID)
    ], violations
    assert violations[0].message


def test_region_guard() -> None:
    job = dws_job()
    violations = validate_job(
        job,
        FLEX_1800,
        Guards(regions=("us-central1",)),
        region="us-east4",
        tuning=None,
        pipeline=None,
    )
    assert [(v.rule, v.field) for v in violations] == [(Rule.GUARD_REGION, "region")]
    assert "us-east4" in violations[0].message


def test_default_timeout_counts_as_seven_days() -> None:
    job = dws_job()  # 1 GPU, no timeout: 168 GPU-hours
    assert (
        validate_job(
            job,
            FLEX_1800,
            Guards(max_gpu_hours_per_job=168),
            region=REGION,
            tuning=None,
            pipeline=None,
        )
        == []
    )
    [violation] = validate_job(
        job, FLEX_1800, Guards(max_gpu_hours_per_job=100), region=REGION, tuning=None, pipeline=None
    )
    assert violation.rule == Rule.GUARD_GPU_HOURS
    assert "168 h" in violation.message


def test_empty_later_pool_is_skipped() -> None:
    job = dws_job()
    job.job_spec.worker_pool_specs.append(WorkerPoolSpec())
    assert validate_job(job, FLEX_1800, Guards(), region=REGION, tuning=None, pipeline=None) == []


def _resource(**changes: object) -> PersistentResource:
    resource = seed_resource()
    for name, value in changes.items():
        setattr(resource.resource_pools[0], name, value)
    return resource


def _stopping() -> PersistentResource:
    resource = seed_resource()
    resource.state = PersistentResource.State.STOPPING
    return resource


def _on_network() -> PersistentResource:
    resource = seed_resource()
    resource.network = "projects/123/global/networks/training"
    return resource


KMS_KEY = "projects/acme-ml/locations/us-central1/keyRings/ml/cryptoKeys/k"


def _encrypted() -> PersistentResource:
    resource = seed_resource()
    resource.encryption_spec.kms_key_name = KMS_KEY
    return resource


def _encrypted_job() -> CustomJob:
    job = persistent_job()
    job.encryption_spec.kms_key_name = KMS_KEY
    return job


def _resource_with_disk(size_gb: int) -> PersistentResource:
    return _resource(disk_spec={"boot_disk_type": "pd-ssd", "boot_disk_size_gb": size_gb})


def _persistent_job_with(replicas: int, *, workers: int = 0) -> CustomJob:
    job = persistent_job()
    _pool(job).replica_count = replicas
    if workers:
        _second_pool(job, replica_count=workers)
    return job


# (case id, job, resource, rule, field, kind): the live persistent-resource rules.
RESOURCE_CASES = [
    ("missing", persistent_job(), None, Rule.RESOURCE_EXISTS, "jobSpec.persistentResourceId",
     ViolationKind.UNAVAILABLE),
    ("stopping", persistent_job(), _stopping(), Rule.RESOURCE_RUNNING,
     "jobSpec.persistentResourceId", ViolationKind.UNAVAILABLE),
    # A mismatch is this resource's, not the template's fault: the next placement is tried, and
    # this one can never take the job as written (unsuitable).
    ("other-network", persistent_job(), _on_network(), Rule.RESOURCE_NETWORK, "jobSpec.network",
     ViolationKind.UNSUITABLE),
    ("other-cmek", persistent_job(), _encrypted(), Rule.RESOURCE_CMEK,
     "encryptionSpec.kmsKeyName", ViolationKind.UNSUITABLE),
    ("cmek-job-plain-resource", _encrypted_job(), seed_resource(), Rule.RESOURCE_CMEK,
     "encryptionSpec.kmsKeyName", ViolationKind.UNSUITABLE),
    ("other-machine", persistent_job(), _resource(machine_spec={"machine_type": "n1-standard-8"}),
     Rule.RESOURCE_POOL_MATCH, POOL0, ViolationKind.UNSUITABLE),
    ("other-disk", persistent_job(), _resource_with_disk(200), Rule.RESOURCE_POOL_MATCH, POOL0,
     ViolationKind.UNSUITABLE),
    ("workers-exceed-pool", _persistent_job_with(1, workers=2), seed_resource(),
     Rule.RESOURCE_POOL_SIZE, "jobSpec.workerPoolSpecs[1].replicaCount",
     ViolationKind.UNSUITABLE),
    ("pool-busy", persistent_job(), _resource(used_replica_count=2), Rule.RESOURCE_CAPACITY,
     f"{POOL0}.replicaCount", ViolationKind.UNAVAILABLE),
    ("workers-exceed-free", _persistent_job_with(1, workers=1), _resource(used_replica_count=1),
     Rule.RESOURCE_CAPACITY, "jobSpec.workerPoolSpecs[1].replicaCount",
     ViolationKind.UNAVAILABLE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("job", "resource", "rule", "field", "kind"),
    [pytest.param(*case[1:], id=case[0]) for case in RESOURCE_CASES],
)
def test_persistent_resource_rules(
    job: CustomJob,
    resource: PersistentResource | None,
    rule: Rule,
    field: str,
    kind: ViolationKind,
) -> None:
    violations = validate_job(
        job, ON_RESOURCE, Guards(), resource, region=REGION, tuning=None, pipeline=None
    )
    assert [(v.rule, v.field, v.kind) for v in violations] == [(rule, field, kind)], violations


def test_a_job_with_the_resources_cmek_key_runs_there() -> None:
    assert (
        validate_job(
            _encrypted_job(),
            ON_RESOURCE,
            Guards(),
            _encrypted(),
            region=REGION,
            tuning=None,
            pipeline=None,
        )
        == []
    )


# (case id, job, resource, what the message must say): each mismatch says what would fix it.
MISMATCH_FIXES = [
    ("resource has a key", persistent_job(), _encrypted(),
     f"set the template's encryption_key to {KMS_KEY!r}"),
    ("job has a key", _encrypted_job(), seed_resource(), "remove the template's encryption_key"),
    ("network", persistent_job(), _on_network(), "set the template's jobSpec.network"),
    ("pool", persistent_job(), _resource_with_disk(200), "copy machineSpec and diskSpec"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("job", "resource", "fix"), [pytest.param(*case[1:], id=case[0]) for case in MISMATCH_FIXES]
)
def test_a_mismatch_says_the_next_placement_is_tried_and_what_would_fix_it(
    job: CustomJob, resource: PersistentResource, fix: str
) -> None:
    (violation,) = validate_job(
        job, ON_RESOURCE, Guards(), resource, region=REGION, tuning=None, pipeline=None
    )
    assert "the next placement is tried" in violation.message
    assert fix in violation.message


def test_autoscaling_max_is_the_pool_ceiling() -> None:
    resource = _resource(autoscaling_spec={"min_replica_count": 1, "max_replica_count": 4})
    job = _persistent_job_with(1, workers=3)
    assert (
        validate_job(
            job, ON_RESOURCE, Guards(), resource, region=REGION, tuning=None, pipeline=None
        )
        == []
    )


def test_resource_placement_rejects_flex_start_shape() -> None:
    job = dws_job()  # FLEX_START, no persistentResourceId
    violations = validate_job(
        job, ON_RESOURCE, Guards(), seed_resource(), region=REGION, tuning=None, pipeline=None
    )
    rules = {(v.rule, v.field) for v in violations}
    assert (Rule.PLACEMENT, "jobSpec.persistentResourceId") in rules
    assert (Rule.PLACEMENT, "jobSpec.scheduling.strategy") in rules


# (machine type, accelerator, count, the fields the machine-accelerator rule flags)
MACHINE_CASES = [
    ("g2-standard-24", "NVIDIA_L4", 2, []),
    ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8, []),
    ("n1-standard-8", "NVIDIA_TESLA_T4", 4, []),
    ("e2-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 0, []),
    ("a4x-highgpu-4g", "NVIDIA_GB200", 4, []),  # a family we do not know: the service judges
    ("g2-standard-24", "NVIDIA_L4", 1, ["acceleratorCount"]),
    ("a3-highgpu-8g", "NVIDIA_H200_141GB", 4, ["acceleratorType", "acceleratorCount"]),
    ("n1-standard-8", "NVIDIA_TESLA_A100", 1, ["acceleratorType"]),
    ("n1-standard-8", "NVIDIA_TESLA_T4", 3, ["acceleratorCount"]),
    ("n1-standard-8", "ACCELERATOR_TYPE_UNSPECIFIED", 2, ["acceleratorType"]),
    ("e2-standard-4", "NVIDIA_TESLA_T4", 1, ["acceleratorType"]),
    ("g2-standard-7", "NVIDIA_L4", 1, ["machineType"]),
    ("", "NVIDIA_L4", 1, ["machineType"]),
]


@pytest.mark.parametrize(("machine_type", "accelerator", "count", "fields"), MACHINE_CASES)
def test_machine_type_against_accelerators(
    machine_type: str, accelerator: str, count: int, fields: list[str]
) -> None:
    job = persistent_job()
    _set_machine(machine_type, accelerator, count)(job)
    violations = validate_spec(
        job, ON_RESOURCE, Guards(), region=REGION, tuning=None, pipeline=None
    )
    assert [(v.rule, v.field) for v in violations] == [
        (Rule.MACHINE_ACCELERATOR, f"{POOL0}.machineSpec.{field}") for field in fields
    ], violations


def test_every_rule_has_a_case() -> None:
    tested = {case[2] for case in FLEX_START_CASES} | {case[3] for case in RESOURCE_CASES}
    tested |= {Rule.GUARD_REGION, Rule.JOB_SPEC, Rule.MACHINE_ACCELERATOR}  # tests of their own
    tested |= {Rule.SPOT_GPU, Rule.ENCRYPTION_KEY}  # tests/unit/test_validation_kinds.py
    tested |= {expected[0] for case in RESERVATION_CASES for expected in case[3]}
    assert tested == set(Rule)


def _violation(kind: ViolationKind) -> Violation:
    return Violation("f", Rule.RESOURCE_CAPACITY, "m", kind)


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ([], None),
        ([ViolationKind.UNAVAILABLE], ViolationKind.UNAVAILABLE),
        ([ViolationKind.UNAVAILABLE, ViolationKind.INVALID], ViolationKind.INVALID),
        ([ViolationKind.UNAVAILABLE, ViolationKind.UNSUITABLE], ViolationKind.UNSUITABLE),
        ([ViolationKind.UNSUITABLE, ViolationKind.INVALID], ViolationKind.INVALID),
    ],
)
def test_verdict(kinds: list[ViolationKind], expected: ViolationKind | None) -> None:
    assert verdict(_violation(kind) for kind in kinds) == expected


def _template(name: str, spec: dict, *placements: object, **fields: object) -> Template:
    return Template(
        name=name,
        display_name=f"{name}-{{run_id}}",
        job_spec=spec,
        placements=tuple(placements),  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )


def test_check_templates_names_template_and_placement() -> None:
    good = _template(
        "resnet",
        {
            **SEED_DWS_BODY["jobSpec"],
            "serviceAccount": "trainer@acme.iam.gserviceaccount.com",
        },
        FLEX_1800,
        FlexStartPlacement(max_wait=timedelta(hours=6), region="europe-west4"),
        PersistentResourcePlacement(resource_id="a100-pool"),
        params=("dataset_uri",),
        timeout=timedelta(hours=48),
    )
    broken = _template(
        "typo", {"workerPoolSpecs": [{"machineSpec": {"machineTyp": "x"}}]}, FLEX_1800
    )
    config = Config(
        project="acme",
        region=REGION,
        source="vertex-dispatch.yaml",
        alerts_topic="projects/acme/topics/alerts",
        guards=STRICT_GUARDS,
        templates={"resnet": good, "typo": broken},
    )
    problems = check_templates(config)
    # templates built in code are raw job specs: their job fields are named under job_spec
    assert [(p.path, p.violation.rule, p.placements) for p in problems] == [
        ("templates.resnet.placement[1].flex_start.region", Rule.GUARD_REGION, (1,)),
        ("templates.typo.job_spec", Rule.JOB_SPEC, ()),
    ]
    assert "machineTyp" in str(problems[1])


# --- linting a loaded config: problems named at the user's keys ------------------------------

LINT_CONFIG = """project: acme-ml
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
    placement:
      - persistent_resource: a100-pool
      - flex_start: {max_wait: 2h}
      - flex_start: {max_wait: 1h, region: us-east4}
  g:
    gcloud_config: g.yaml
"""
GCLOUD_FILE = """workerPoolSpecs:
  machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100, acceleratorCount: 1}
  replicaCount: 1
  containerSpec: {imageUri: us-docker.pkg.dev/acme-ml/train/x:1}
scheduling: {strategy: FLEX_START, maxWaitDuration: 7200s, timeout: 2h}
"""
POOL_0 = "templates.t.worker_pools[0]"
IN_FILE = "templates.g.gcloud_config(g.yaml)"
K80 = "{type: NVIDIA_TESLA_K80, count: 1}"
LINT_CASES = [
    # a rule only the flex_start placements break: once, naming them
    pytest.param(
        [("a2-highgpu-1g", "n1-standard-4"), ("{type: NVIDIA_TESLA_A100, count: 1}", K80)],
        "",
        [(f"{POOL_0}.accelerator.type", Rule.FLEX_START_GPU, " (on placement[1], placement[2])")],
        id="friendly-pool-on-two-placements",
    ),
    # a rule every placement breaks: once, as the template's
    pytest.param(
        [("        image: us", "        replicas: 2\n        image: us")],
        "",
        [(f"{POOL_0}.replicas", Rule.FIRST_POOL_REPLICAS, "")],
        id="friendly-pool-on-every-placement",
    ),
    pytest.param(
        [("timeout: 2h\n", "timeout: 8d\n")],
        "",
        [("templates.t.timeout", Rule.FLEX_START_TIMEOUT, " (on placement[1], placement[2])")],
        id="template-key",
    ),
    pytest.param(
        [
            (
                "{max_wait: 2h}",
                "{max_wait: 2h, machine: {machine_type: n1-standard-4, accelerator: " + K80 + "}}",
            )
        ],
        "",
        [
            (
                "templates.t.placement[1].flex_start.machine.accelerator.type",
                Rule.FLEX_START_GPU,
                "",
            )
        ],
        id="machine-override",
    ),
    pytest.param(
        [],
        "timeout: 2h}",
        [(f"{IN_FILE}.scheduling.timeout", Rule.FLEX_START_TIMEOUT, "")],
        id="gcloud-file-timeout",
    ),
    pytest.param(
        [],
        "acceleratorType: NVIDIA_TESLA_A100",
        [
            (
                f"{IN_FILE}.workerPoolSpecs[0].machineSpec.acceleratorType",
                Rule.MACHINE_ACCELERATOR,
                "",
            )
        ],
        id="gcloud-file-pool",
    ),
]
FILE_BREAKS = {
    "timeout: 2h}": "timeout: 8d}",
    "acceleratorType: NVIDIA_TESLA_A100": "acceleratorType: NVIDIA_L4",
}


@pytest.mark.parametrize(("config_edits", "file_edit", "expected"), LINT_CASES)
def test_check_templates_names_the_key_the_user_wrote(
    config_edits: list[tuple[str, str]],
    file_edit: str,
    expected: list[tuple[str, Rule, str]],
) -> None:
    from shared.config.loader import parse_config

    text = LINT_CONFIG
    for old, new in config_edits:
        assert old in text
        text = text.replace(old, new)
    files = {
        "g.yaml": GCLOUD_FILE.replace(file_edit, FILE_BREAKS[file_edit])
        if file_edit
        else GCLOUD_FILE
    }
    config = parse_config(text, "lint.yaml", read_file=files.__getitem__)
    problems = check_templates(config)
    assert [(p.path, p.violation.rule, p.placement_note) for p in problems] == expected
    assert all(str(p).startswith(f"{p.path}: {p.rule}: ") for p in problems)
