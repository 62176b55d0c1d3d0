"""shared.config.origins: a job field is named where the user wrote it, in each template form.

One config holds a template of each form (friendly, gcloud file, REST body file), plus one built
in code (a raw job spec); each case names a CustomJob field, the placement it was rendered for,
and the config key path a user must read.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import yaml
from config_builders import SERVICE_ACCOUNT, base_config, parse, with_value

from shared.config import guards as config_guards
from shared.config.loader import parse_config
from shared.config.model import Config, PersistentResourcePlacement, Template
from shared.config.origins import user_path
from shared.config.problems import InvalidConfig
from shared.validation import Rule

POOL = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/x:1"},
}
FILES = {
    # the gcloud page's shape: one pool as a mapping; the file alone sets timeout
    "gc.yaml": yaml.safe_dump(
        {
            "workerPoolSpecs": POOL,
            "serviceAccount": "other@acme-ml.iam.gserviceaccount.com",
            "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "7200s", "timeout": "1h"},
        }
    ),
    "rb.json": json.dumps(
        {
            "displayName": "rb-{run_id}",
            "labels": {"team": "vision"},
            "jobSpec": {
                "workerPoolSpecs": [POOL],
                "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "60s"},
            },
        }
    ),
}
CONFIG = f"""\
project: acme-ml
region: us-central1
alerts_topic: training-alerts
routes:
  - name: requests
    pubsub: {{attributes: {{kind: train}}}}
templates:
  pools:
    worker_pools:
      - machine_type: a2-highgpu-1g
        accelerator: {{type: NVIDIA_TESLA_A100, count: 1}}
        disk: {{type: pd-ssd, size_gb: 100}}
        image: us-docker.pkg.dev/acme-ml/train/x:1
        args: ["--a", "--b"]
      - machine_type: a2-highgpu-1g
        accelerator: {{type: NVIDIA_TESLA_A100, count: 1}}
        replicas: 2
        python_package:
          executor_image: us-docker.pkg.dev/acme-ml/train/py:1
          package_uris: ["gs://acme-packages/t-0.1.tar.gz"]
          module: t.task
    timeout: 2h
    service_account: {SERVICE_ACCOUNT}
    labels: {{team: vision}}
    placement:
      - persistent_resource: a100-pool
      - flex_start:
          max_wait: 2h
          region: us-east4
          machine:
            machine_type: a3-highgpu-1g
            accelerator: {{type: NVIDIA_H100_80GB, count: 1}}
      - flex_start: {{max_wait: 1h}}
  gc:
    gcloud_config: gc.yaml
    service_account: {SERVICE_ACCOUNT}
  rb:
    rest_body: rb.json
    timeout: 2h
    placement: [{{flex_start: {{max_wait: 1h}}}}]
"""
T = "templates.pools"
GC = "templates.gc.gcloud_config(gc.yaml)"
RB = "templates.rb.rest_body(rb.json)"
A = "jobSpec.workerPoolSpecs[0]"
B = "jobSpec.workerPoolSpecs[1]"


def _config() -> Config:
    return parse_config(CONFIG, "origins.yaml", read_file=FILES.__getitem__)


def _raw() -> Template:
    """A template built in code: its job spec is named as the raw job_spec it is."""
    return Template(
        name="raw",
        display_name="raw-{run_id}",
        job_spec={"workerPoolSpecs": [POOL], "serviceAccount": SERVICE_ACCOUNT},
        placements=(PersistentResourcePlacement(resource_id="a100-pool"),),
        timeout=timedelta(hours=1),
    )


CASES = [
    # the friendly form: each worker pool key
    ("pools", f"{A}.containerSpec.imageUri", None, f"{T}.worker_pools[0].image"),
    ("pools", f"{A}.machineSpec.machineType", None, f"{T}.worker_pools[0].machine_type"),
    ("pools", f"{A}.machineSpec.acceleratorType", None, f"{T}.worker_pools[0].accelerator.type"),
    ("pools", f"{A}.machineSpec.acceleratorCount", 2, f"{T}.worker_pools[0].accelerator.count"),
    ("pools", f"{A}.replicaCount", None, f"{T}.worker_pools[0].replicas"),
    ("pools", f"{A}.diskSpec.bootDiskType", None, f"{T}.worker_pools[0].disk.type"),
    ("pools", f"{A}.diskSpec.bootDiskSizeGb", None, f"{T}.worker_pools[0].disk.size_gb"),
    ("pools", f"{A}.containerSpec.args[1]", None, f"{T}.worker_pools[0].args[1]"),
    ("pools", f"{A}.containerSpec.command", None, f"{T}.worker_pools[0].command"),
    ("pools", B, None, f"{T}.worker_pools[1]"),
    ("pools", f"{B}.machineSpec", None, f"{T}.worker_pools[1]"),
    (
        "pools",
        f"{B}.pythonPackageSpec.executorImageUri",
        None,
        f"{T}.worker_pools[1].python_package.executor_image",
    ),
    (
        "pools",
        f"{B}.pythonPackageSpec.pythonModule",
        None,
        f"{T}.worker_pools[1].python_package.module",
    ),
    ("pools", "jobSpec.workerPoolSpecs", None, f"{T}.worker_pools"),
    ("pools", "jobSpec", None, T),
    ("pools", "encryptionSpec.kmsKeyName", None, f"{T}.encryption_key"),
    # the template's own keys, written or not
    ("pools", "jobSpec.scheduling.timeout", 2, f"{T}.timeout"),
    ("pools", "jobSpec.serviceAccount", None, f"{T}.service_account"),
    ("pools", "jobSpec.network", None, f"{T}.network"),
    ("pools", "displayName", None, f"{T}.display_name"),
    ("pools", "labels.team", None, f"{T}.labels.team"),
    # the placement a job was rendered for
    ("pools", "region", 0, f"{T}.placement[0].region"),
    ("pools", "region", 1, f"{T}.placement[1].flex_start.region"),
    ("pools", "region", None, f"{T}.placement"),
    ("pools", "jobSpec.persistentResourceId", 0, f"{T}.placement[0].persistent_resource"),
    ("pools", "jobSpec.scheduling.maxWaitDuration", 2, f"{T}.placement[2].flex_start.max_wait"),
    ("pools", "jobSpec.scheduling.strategy", 2, f"{T}.placement[2]"),
    # ...whose machine override replaces every pool's machine, and nothing else
    (
        "pools",
        f"{A}.machineSpec.acceleratorType",
        1,
        f"{T}.placement[1].flex_start.machine.accelerator.type",
    ),
    ("pools", f"{B}.machineSpec", 1, f"{T}.placement[1].flex_start.machine"),
    (
        "pools",
        f"{A}.machineSpec.machineType",
        1,
        f"{T}.placement[1].flex_start.machine.machine_type",
    ),
    ("pools", f"{A}.containerSpec.imageUri", 1, f"{T}.worker_pools[0].image"),
    # a gcloud file: named inside it, as docs/configuration.md promises
    ("gc", f"{A}.containerSpec.imageUri", 0, f"{GC}.workerPoolSpecs[0].containerSpec.imageUri"),
    ("gc", "jobSpec.workerPoolSpecs", None, f"{GC}.workerPoolSpecs"),
    ("gc", "jobSpec", None, GC),
    ("gc", "jobSpec.scheduling.timeout", 0, f"{GC}.scheduling.timeout"),  # the file alone
    ("gc", "jobSpec.serviceAccount", 0, "templates.gc.service_account"),  # the template wins
    ("gc", "jobSpec.network", 0, "templates.gc.network"),  # neither: where to add it
    ("gc", "displayName", 0, "templates.gc.display_name"),
    ("gc", "jobSpec.scheduling.maxWaitDuration", 0, f"{GC}.scheduling.maxWaitDuration"),
    ("gc", "jobSpec.scheduling.strategy", 0, f"{GC}.scheduling.strategy"),
    ("gc", "region", 0, "templates.gc.placement"),  # the chain came from the file
    # a REST body file: the job spec is its jobSpec; display name and labels are its own
    ("rb", f"{A}.replicaCount", 0, f"{RB}.jobSpec.workerPoolSpecs[0].replicaCount"),
    ("rb", "displayName", 0, f"{RB}.displayName"),
    ("rb", "labels.team", 0, f"{RB}.labels.team"),
    ("rb", "jobSpec.scheduling.timeout", 0, "templates.rb.timeout"),
    (
        "rb",
        "jobSpec.scheduling.maxWaitDuration",
        0,
        "templates.rb.placement[0].flex_start.max_wait",
    ),
    # a template built in code: its raw job_spec
    (
        "raw",
        f"{A}.containerSpec.imageUri",
        0,
        "templates.raw.job_spec.workerPoolSpecs[0].containerSpec.imageUri",
    ),
    ("raw", "jobSpec.serviceAccount", 0, "templates.raw.job_spec.serviceAccount"),
    ("raw", "jobSpec", None, "templates.raw.job_spec"),
    ("raw", "jobSpec.scheduling.timeout", 0, "templates.raw.timeout"),
    ("raw", "jobSpec.persistentResourceId", 0, "templates.raw.placement[0].persistent_resource"),
]


@pytest.fixture(scope="module")
def templates() -> dict[str, Template]:
    return {**_config().templates, "raw": _raw()}


@pytest.mark.parametrize(
    ("template", "field", "placement", "expected"),
    CASES,
    ids=[f"{case[0]}:{case[1]}@{case[2]}" for case in CASES],
)
def test_a_job_field_is_named_where_the_user_wrote_it(
    templates: dict[str, Template],
    template: str,
    field: str,
    placement: int | None,
    expected: str,
) -> None:
    assert user_path(templates[template], field, placement) == expected


# --- problems found while loading: named the same way, root causes only --------------------

TEMPLATE = "templates.resnet"
FRIENDLY_POOL = f"{TEMPLATE}.worker_pools[0]"


@pytest.mark.parametrize(
    ("path", "value", "reported_at", "rule"),
    [
        (f"{FRIENDLY_POOL}.image", "docker.io/x/y:1", f"{FRIENDLY_POOL}.image", "guard-image"),
        (
            FRIENDLY_POOL,
            {
                "machine_type": "a2-highgpu-1g",
                "python_package": {
                    "executor_image": "docker.io/x/py:1",
                    "package_uris": ["gs://acme-packages/t.tar.gz"],
                    "module": "t.task",
                },
            },
            f"{FRIENDLY_POOL}.python_package.executor_image",
            "guard-image",
        ),
        (
            f"{TEMPLATE}.service_account",
            "other@acme-ml.iam.gserviceaccount.com",
            f"{TEMPLATE}.service_account",
            "guard-service-account",
        ),
        (
            f"{TEMPLATE}.placement[0].region",
            "europe-west4",
            f"{TEMPLATE}.placement[0].region",
            "guard-region",
        ),
        (f"{TEMPLATE}.timeout", "7d", f"{TEMPLATE}.timeout", "guard-gpu-hours"),
        (f"{FRIENDLY_POOL}.replicas", 9, TEMPLATE, "guard-gpus"),
        (f"{FRIENDLY_POOL}.replica", 2, f"{FRIENDLY_POOL}.replica", "config"),
    ],
)
def test_a_load_problem_names_the_users_key_and_its_rule(
    path: str, value: object, reported_at: str, rule: str
) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(with_value(base_config(), path, value))
    found = [(p.path, p.rule) for p in raised.value.problems]
    assert (reported_at, rule) in found, [str(p) for p in raised.value.problems]
    assert all(path.startswith(TEMPLATE) for path, _ in found)


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        # unreadable, so the guards saw no timeout: "is required" would be noise
        (f"{TEMPLATE}.timeout", "2 days", "not a duration"),
        # unreadable, so the guards saw no account: "not in guards.service_accounts" likewise
        (f"{TEMPLATE}.service_account", "Trainer@acme", "a service account email"),
        # unreadable, so the guards saw the default region us-central1... which is allowed here
        (f"{TEMPLATE}.placement[1].flex_start.region", "Mars", "a Google Cloud region"),
    ],
)
def test_a_value_that_does_not_read_is_reported_once(path: str, value: object, says: str) -> None:
    config = base_config()
    config["guards"]["regions"] = ["us-east4"]  # the default region is outside the guard
    config["templates"]["resnet"]["placement"] = [
        {"persistent_resource": "a100-pool", "region": "us-east4"},
        {"flex_start": {"max_wait": "2h", "region": "us-east4"}},
    ]
    with pytest.raises(InvalidConfig) as raised:
        parse(with_value(config, path, value))
    [problem] = raised.value.problems
    assert (problem.path, problem.rule) == (path, "config")
    assert says in problem.message


def test_an_unreadable_timeout_in_a_file_is_reported_once() -> None:
    files = {
        "job.yaml": yaml.safe_dump(
            {**yaml.safe_load(FILES["gc.yaml"]), "serviceAccount": SERVICE_ACCOUNT}
        )
    }
    files["job.yaml"] = files["job.yaml"].replace("timeout: 1h", "timeout: 2 days")
    config = base_config()
    config["templates"]["resnet"] = {"gcloud_config": "job.yaml", "params": ["dataset_uri"]}
    with pytest.raises(InvalidConfig) as raised:
        parse(config, read_file=files.__getitem__)
    assert [(p.path, p.rule) for p in raised.value.problems] == [
        ("templates.resnet.gcloud_config(job.yaml).scheduling.timeout", "config")
    ]


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("GUARD_IMAGE", Rule.GUARD_IMAGE),
        ("GUARD_SERVICE_ACCOUNT", Rule.GUARD_SERVICE_ACCOUNT),
        ("GUARD_REGION", Rule.GUARD_REGION),
        ("GUARD_GPUS", Rule.GUARD_GPUS),
        ("GUARD_GPU_HOURS", Rule.GUARD_GPU_HOURS),
    ],
)
def test_a_guard_broken_at_load_carries_the_rendered_jobs_rule_id(name: str, rule: Rule) -> None:
    assert getattr(config_guards, name) == rule.value
