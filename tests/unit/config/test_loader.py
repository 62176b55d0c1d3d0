"""shared.config.loader: valid configs load; each broken rule is reported at its key path."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from config_builders import DELETE, SOURCE, base_config, parse, with_value

from shared.adapters.config_source import (
    CONFIG_VARIABLE,
    config_from_env,
    forget_config,
    load_config,
)
from shared.config.loader import parse_config
from shared.config.model import (
    Completion,
    FailureClass,
    FlexStartPlacement,
    GcsRoute,
    ParameterType,
    PersistentResourcePlacement,
    Placement,
    PlacementOrder,
    PubSubRoute,
    ScheduleRoute,
)
from shared.config.problems import InvalidConfig
from shared.model.errors import ConfigError, PermanentError
from shared.model.job_kinds import JobKind

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "config.yaml"


def test_the_base_config_loads() -> None:
    config = parse(base_config())
    template = config.templates["resnet"]
    assert config.alerts_topic == "projects/acme-ml/topics/training-alerts"
    assert template.placements == (
        PersistentResourcePlacement(resource_id="a100-pool"),
        FlexStartPlacement(max_wait=timedelta(hours=2)),
    )
    assert template.job_spec["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
    assert template.display_name == "resnet-{run_id}"
    assert [type(route) for route in config.routes] == [GcsRoute, PubSubRoute, ScheduleRoute]


def test_the_example_config_exercises_every_feature() -> None:
    config = load_config(str(EXAMPLE))
    kinds = {type(route) for route in config.routes}
    completions = {route.completion for route in config.routes if isinstance(route, GcsRoute)}
    placements = {type(p) for t in config.templates.values() for p in t.placements}
    sources = {
        key
        for key in ("containerSpec", "pythonPackageSpec")
        for t in config.templates.values()
        for pool in t.job_spec["workerPoolSpecs"]
        if key in pool
    }
    assert kinds == {GcsRoute, PubSubRoute, ScheduleRoute}
    assert completions == set(Completion)
    assert placements == set(get_args(Placement))
    assert any(t.encryption_key for t in config.templates.values())
    assert sources == {"containerSpec", "pythonPackageSpec"}
    assert any(
        p.machine
        for t in config.templates.values()
        for p in t.placements
        if isinstance(p, FlexStartPlacement)
    )
    assert config.completions_topic == "projects/acme-ml/topics/training-completions"
    assert config.templates["bert-package"].max_queue == timedelta(hours=12)
    assert config.templates["bert-package"].no_placement_give_up == timedelta(days=2)
    assert config.cooldown == timedelta(minutes=30)
    assert config.templates["bert-package"].cooldown == timedelta(hours=1)
    resnet = config.templates["resnet-a100"]
    assert resnet.retry.attempts == 4
    assert resnet.retry.retry_on == {
        FailureClass.CAPACITY,
        FailureClass.INFRASTRUCTURE,
        FailureClass.UNKNOWN,
    }
    # The location is the job's region, filled at render time (fallbacks change region).
    assert resnet.job_spec["experimentRun"] == (
        "projects/acme-ml/locations/{region}/metadataStores/default/contexts/"
        "resnet-imagenet-{run_id}"
    )
    assert resnet.job_spec["workerPoolSpecs"][0]["containerSpec"]["env"][0] == {
        "name": "EPOCHS",
        "value": "90",
    }
    # every job kind, each reachable by a route (plan --event shows them)
    assert {t.kind for t in config.templates.values()} == set(JobKind)
    routed = {config.templates[route.template].kind for route in config.routes if route.template}
    assert routed == set(JobKind)
    sweep = config.templates["resnet-sweep"].hyperparameter_tuning
    assert sweep is not None
    assert {parameter.type for parameter in sweep.parameters} == set(ParameterType)
    assert sweep.algorithm is not None and sweep.parallel_trials > 1
    assert any(parameter.scale for parameter in sweep.parameters)
    assert [type(p) for p in config.templates["resnet-sweep"].placements] == [
        FlexStartPlacement,
        FlexStartPlacement,
    ]
    pipeline = config.templates["resnet-pipeline"]
    assert pipeline.training_pipeline is not None and pipeline.training_pipeline.model
    assert [type(p) for p in pipeline.placements] == [
        PersistentResourcePlacement,
        FlexStartPlacement,
    ]


@pytest.mark.parametrize(
    ("template", "display_name", "placement", "timeout", "container"),
    [
        pytest.param(
            "dws-seed-gcloud",
            "dws-seed-gcloud-{run_id}",
            FlexStartPlacement(max_wait=timedelta(seconds=7200)),
            timedelta(hours=2),
            {
                "imageUri": "gcr.io/ucaip-test/ucaip-training-test",
                "args": ["port=8500"],
                "command": ["start"],
            },
            id="gcloud-config",
        ),
        pytest.param(
            "dws-seed-rest",
            "MyDwsJob",
            FlexStartPlacement(max_wait=timedelta(seconds=1800)),
            timedelta(minutes=30),
            {"imageUri": "python:3.10", "command": ["sleep"], "args": ["100"]},
            id="rest-body",
        ),
    ],
)
def test_the_seed_pages_files_load_as_templates(
    template: str,
    display_name: str,
    placement: FlexStartPlacement,
    timeout: timedelta,
    container: dict[str, Any],
) -> None:
    loaded = load_config(str(EXAMPLE)).templates[template]
    pool = loaded.job_spec["workerPoolSpecs"][0]
    assert loaded.display_name == display_name
    assert loaded.placements == (placement,)
    assert loaded.timeout == timeout
    assert pool["machineSpec"] == {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
    assert pool["containerSpec"] == container
    assert "scheduling" not in loaded.job_spec  # placement owns strategy and wait


T = "templates.resnet"
POOL = f"{T}.worker_pools[0]"


@pytest.mark.parametrize(
    ("path", "value", "reported_at", "says"),
    [
        # top level
        ("regoin", "us-central1", "regoin", "did you mean 'region'"),
        ("project", DELETE, "project", "required"),
        ("project", "ACME", "project", "project ID"),
        ("region", "central", "region", "region such as"),
        ("alerts_topic", "goog-alerts", "alerts_topic", "topic ID"),
        ("routes", [], "routes", "at least one route"),
        ("templates", DELETE, "templates", "at least one template"),
        # guards
        ("guards.images", ["x/"], "guards.images", "did you mean 'image_prefixes'"),
        ("guards.max_gpus_per_job", -1, "guards.max_gpus_per_job", "0 or more"),
        ("guards.max_gpu_hours_per_job", "lots", "guards.max_gpu_hours_per_job", "number"),
        ("guards.regions", ["us_central1"], "guards.regions[0]", "region such as"),
        # routes
        ("routes[0].gcs.bucket", "gs://acme-datasets", "routes[0].gcs.bucket", "no gs://"),
        ("routes[0].gcs.completion", "sucess", "routes[0].gcs.completion", "every_object"),
        ("routes[0].gcs.match", "/imagenet/*", "routes[0].gcs.match", "no leading /"),
        ("routes[0].template", "resnt", "routes[0].template", "'resnt' is not defined"),
        ("routes[0].params.epochs", "90", "routes[0].params.epochs", "does not declare"),
        (
            "routes[0].params.dataset_uri",
            "{message_id}",
            "routes[0].params.dataset_uri",
            "not a field of a gcs trigger",
        ),
        ("routes[0].params.run_id", "x", "routes[0].params.run_id", "filled by dispatch"),
        ("routes[0].pubsub", {"attributes": {"a": "b"}}, "routes[0]", "exactly one trigger kind"),
        ("routes[0].tempalte", "resnet", "routes[0].tempalte", "did you mean 'template'"),
        ("routes[1].pubsub.body_value", "train", "routes[1].pubsub.body_value", "needs body_field"),
        ("routes[1].pubsub.body_field", "kind..x", "routes[1].pubsub.body_field", "dotted path"),
        ("routes[2].name", "daily", "routes[2].name", "unique"),
        ("routes[2].template", DELETE, "routes[2].template", "required"),
        ("routes[2].params", DELETE, "routes[2].params", "{dataset_uri}"),
        (
            "routes[2].schedule",
            {"name": "n", "cron": "daily"},
            "routes[2].schedule.cron",
            "unix-cron",
        ),
        # the friendly worker pool
        (f"{POOL}.accelerator.count", 0, f"{POOL}.accelerator.count", "from 1 to 16"),
        (f"{POOL}.accelerator.type", "a100", f"{POOL}.accelerator.type", "AcceleratorType"),
        (f"{POOL}.machine_type", "A2", f"{POOL}.machine_type", "machine type"),
        (f"{POOL}.replicas", "two", f"{POOL}.replicas", "whole number"),
        (f"{POOL}.replica", 2, f"{POOL}.replica", "did you mean 'replicas'"),
        (f"{POOL}.disk", {"type": "ssd"}, f"{POOL}.disk.type", "pd-ssd"),
        (f"{POOL}.disk", {"size_gb": 5}, f"{POOL}.disk.size_gb", "from 10"),
        (
            f"{POOL}.python_package",
            {"executor_image": "x", "package_uris": ["gs://b/p.tgz"], "module": "m"},
            POOL,
            "exactly one of image",
        ),
        (f"{POOL}.env", {"1BAD": "x"}, f"{POOL}.env.1BAD", "environment variable"),
        (f"{POOL}.args", "--epochs=90", f"{POOL}.args", "expected a list"),
        (f"{POOL}.args[0]", "--data={dataseturi}", f"{POOL}.args[0]", "{dataseturi}"),
        (
            f"{POOL}.image",
            "us-docker.pkg.dev/acme-ml/train/r:{tag}",
            f"{POOL}.image",
            "stay literal",
        ),
        (f"{T}.worker_pools", [], f"{T}.worker_pools", "at least one worker pool"),
        # the template around it
        (f"{T}.gcloud_config", "seed.yaml", T, "exactly one of worker_pools"),
        (f"{T}.placement", DELETE, f"{T}.placement", "is required"),
        (f"{T}.params", ["run_id"], f"{T}.params[0]", "filled by dispatch"),
        (f"{T}.timeout", "0s", f"{T}.timeout", "longer than 0s"),
        (f"{T}.timeout", "2 days", f"{T}.timeout", "not a duration"),
        (f"{T}.experiment_run", "{run_id}", f"{T}.experiment_run", "needs experiment"),
        (f"{T}.base_output_dir", "s3://runs/", f"{T}.base_output_dir", "gs://"),
        (f"{T}.service_account", "trainer", f"{T}.service_account", "service account email"),
        (f"{T}.display_name", "x" * 129, f"{T}.display_name", "allows 128"),
        (f"{T}.labels", {"Team": "vision"}, f"{T}.labels.Team", "lowercase"),
        (f"{T}.labels", {"team": "Vision"}, f"{T}.labels.team", "lowercase"),
        (f"{T}.labels", {"vd-run": "x"}, f"{T}.labels.vd-run", "set by vertex-dispatch"),
        # placement
        (f"{T}.placement", [], f"{T}.placement", "at least one placement"),
        (f"{T}.placement[1].flex_start", {}, f"{T}.placement[1].flex_start.max_wait", "required"),
        (
            f"{T}.placement[1].flex_start.max_wait",
            "2 hours",
            f"{T}.placement[1].flex_start.max_wait",
            "not a duration",
        ),
        (
            f"{T}.placement[1].flex_start.machine",
            {"accelerator": {"type": "NVIDIA_L4", "count": 1}},
            f"{T}.placement[1].flex_start.machine.machine_type",
            "required",
        ),
        (
            f"{T}.placement[0].persistent_resource",
            "A100_pool",
            f"{T}.placement[0].persistent_resource",
            "persistent resource ID",
        ),
        (
            f"{T}.placement[1].persistent_resource",
            "a100-pool",
            f"{T}.placement[1]",
            "exactly one of persistent_resource, flex_start, spot, on_demand or reservation",
        ),
        (f"{T}.placement[1].max_wait", "2h", f"{T}.placement[1].max_wait", "inside flex_start"),
        # retry policy
        (f"{T}.retry", {"attempts": 0}, f"{T}.retry.attempts", "from 1 to 20"),
        (f"{T}.retry", {"attempts": 21}, f"{T}.retry.attempts", "from 1 to 20"),
        (
            f"{T}.retry",
            {"backoff": {"base": "1h", "cap": "1m"}},
            f"{T}.retry.backoff",
            "longer than cap",
        ),
        (f"{T}.retry", {"backoff": {"base": 0}}, f"{T}.retry.backoff.base", "longer than 0s"),
        (f"{T}.retry", {"retry_on": ["cancelled"]}, f"{T}.retry.retry_on[0]", "never retried"),
        (f"{T}.retry", {"retry_on": ["user_code"]}, f"{T}.retry.retry_on[0]", "user_failures"),
        (f"{T}.retry", {"retry_on": ["oom"]}, f"{T}.retry.retry_on[0]", "not a failure class"),
        (
            f"{T}.retry",
            {"attempts": 2, "user_failures": 2},
            f"{T}.retry.user_failures",
            "raise attempts to 3",
        ),
        (f"{T}.retry", {"user_failures": -1}, f"{T}.retry.user_failures", "0 or more"),
        # guards against the template
        (
            f"{POOL}.image",
            "docker.io/evil/miner:1",
            f"{POOL}.image",
            "outside guards.image_prefixes",
        ),
        (
            f"{T}.service_account",
            "other@acme-ml.iam.gserviceaccount.com",
            f"{T}.service_account",
            "not in guards.service_accounts",
        ),
        (f"{T}.service_account", DELETE, f"{T}.service_account", "no service account"),
        (
            f"{T}.placement[1].flex_start.region",
            "europe-west4",
            f"{T}.placement[1].flex_start.region",
            "outside guards.regions",
        ),
        (f"{POOL}.replicas", 9, T, "guards.max_gpus_per_job = 8"),
        (
            f"{T}.placement[1].flex_start.machine",
            {
                "machine_type": "a2-highgpu-8g",
                "accelerator": {"type": "NVIDIA_TESLA_A100", "count": 16},
            },
            T,
            "16 GPUs",
        ),
        (f"{T}.timeout", "7d", f"{T}.timeout", "168 GPU-hours"),
        (f"{T}.max_queue", "soon", f"{T}.max_queue", "not a duration"),
        (f"{T}.max_queue", 0, f"{T}.max_queue", "longer than 0s"),
        (f"{T}.max_queue", "0s", f"{T}.max_queue", "longer than 0s"),
        (f"{T}.max_queue", -60, f"{T}.max_queue", "cannot be negative"),
        (f"{T}.max_qeue", "1h", f"{T}.max_qeue", "did you mean 'max_queue'"),
        ("no_placement_alert", "0m", "no_placement_alert", "longer than 0s"),
        ("no_placement_give_up", "a week", "no_placement_give_up", "not a duration"),
        ("no_placement_give_up", "6h", "no_placement_give_up", "must be longer than"),
        (f"{T}.no_placement_alert", 0, f"{T}.no_placement_alert", "longer than 0s"),
        (f"{T}.no_placement_give_up", "1h", f"{T}.no_placement_give_up", "must be longer than"),
        (f"{T}.no_placement_alert", "8d", f"{T}.no_placement_alert", "must be longer than"),
        (f"{T}.timeout", DELETE, f"{T}.timeout", "max_gpu_hours_per_job"),
        ("cooldown", "a while", "cooldown", "not a duration"),
        ("cooldown", "8d", "cooldown", "out of range"),
        ("cooldown", -60, "cooldown", "cannot be negative"),
        (f"{T}.cooldown", "30d", f"{T}.cooldown", "out of range"),
        (f"{T}.placement_order", "fastest", f"{T}.placement_order", "learned"),
        (f"{T}.placement_order", "fastest", f"{T}.placement_order", "as_written"),
        (f"{T}.placement_order", 1, f"{T}.placement_order", "not a placement order"),
        (f"{T}.start_by", "by dawn", f"{T}.start_by", "not a duration"),
        (f"{T}.start_by", "-6h", f"{T}.start_by", "not a duration"),
        (f"{T}.start_by", -60, f"{T}.start_by", "cannot be negative"),
        (f"{T}.start_by", "0s", f"{T}.start_by", "longer than 0s"),
    ],
)
def test_each_broken_rule_is_reported_at_its_key_path(
    path: str, value: object, reported_at: str, says: str
) -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse(with_value(base_config(), path, value))
    messages = [str(problem) for problem in raised.value.problems]
    assert any(
        problem.path == reported_at and says in problem.message for problem in raised.value.problems
    ), messages
    assert SOURCE in str(raised.value)


def test_the_watchdog_limits_load_with_their_defaults() -> None:
    plain = parse(base_config())
    assert (plain.no_placement_alert, plain.no_placement_give_up) == (
        timedelta(hours=6),
        timedelta(days=7),
    )
    assert plain.templates["resnet"].max_queue is None
    config = with_value(base_config(), f"{T}.max_queue", "90m")
    config = with_value(config, f"{T}.no_placement_give_up", "2d")
    config = with_value(config, "no_placement_alert", "1h")
    loaded = parse(config)
    template = loaded.templates["resnet"]
    assert template.max_queue == timedelta(minutes=90)
    assert (template.no_placement_alert, template.no_placement_give_up) == (
        None,
        timedelta(days=2),
    )
    assert loaded.no_placement_alert == timedelta(hours=1)


def test_placement_order_loads_as_written_by_default_and_learned_when_asked() -> None:
    assert parse(base_config()).templates["resnet"].placement_order is PlacementOrder.AS_WRITTEN
    learned = parse(with_value(base_config(), f"{T}.placement_order", "learned"))
    assert learned.templates["resnet"].placement_order is PlacementOrder.LEARNED


def test_start_by_loads_and_defaults_to_no_deadline() -> None:
    assert parse(base_config()).templates["resnet"].start_by is None
    loaded = parse(with_value(base_config(), f"{T}.start_by", "6h"))
    assert loaded.templates["resnet"].start_by == timedelta(hours=6)


def test_the_cooldown_loads_with_its_default_and_a_templates_own() -> None:
    plain = parse(base_config())
    assert (plain.cooldown, plain.templates["resnet"].cooldown) == (timedelta(minutes=30), None)
    config = with_value(base_config(), "cooldown", "2h")
    config = with_value(config, f"{T}.cooldown", 0)  # off for this template's runs
    loaded = parse(config)
    assert (loaded.cooldown, loaded.templates["resnet"].cooldown) == (
        timedelta(hours=2),
        timedelta(0),
    )
    assert parse(with_value(base_config(), "cooldown", 0)).cooldown == timedelta(0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("project: acme-ml\nproject: acme-ml2\n", "appears twice"),
        ("project: [acme-ml\n", "YAML syntax error at line 2"),
        ("- project: acme-ml\n", "expected a mapping"),
        ("", "expected a mapping"),
        ("!!python/object/apply:os.system ['true']\n", "could not determine a constructor"),
    ],
)
def test_text_that_is_not_a_config_mapping_is_refused(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_config(text, SOURCE)


def test_a_yes_that_yaml_reads_as_boolean_is_explained() -> None:
    text = yaml.safe_dump(base_config()).replace("kind: train", "kind: yes")
    with pytest.raises(InvalidConfig, match=r"routes\[1\].pubsub.attributes.kind: .*quote it"):
        parse_config(text, SOURCE)


def test_every_problem_is_reported_in_one_error() -> None:
    config = with_value(base_config(), f"{POOL}.accelerator.count", 0)
    config = with_value(config, "routes[0].template", "resnt")
    config = with_value(config, f"{T}.retry", {"attempts": 0})
    with pytest.raises(InvalidConfig) as raised:
        parse(config)
    assert {problem.path for problem in raised.value.problems} >= {
        f"{POOL}.accelerator.count",
        "routes[0].template",
        f"{T}.retry.attempts",
    }
    assert "3 problems" in str(raised.value)
    assert isinstance(raised.value, PermanentError)  # a bad config never becomes a retry storm


def test_config_from_env_loads_once_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forget_config()
    monkeypatch.delenv(CONFIG_VARIABLE, raising=False)
    with pytest.raises(ConfigError, match=CONFIG_VARIABLE):
        config_from_env()
    monkeypatch.setenv(CONFIG_VARIABLE, str(EXAMPLE))
    first = config_from_env()
    assert config_from_env() is first
    forget_config()


def test_a_missing_config_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(ConfigError, match=f"{missing}.*does not exist"):
        load_config(str(missing))


def test_loading_a_config_imports_no_google_cloud_client() -> None:
    script = (
        "import sys\n"
        "from shared.adapters.config_source import load_config\n"
        f"load_config({str(EXAMPLE)!r})\n"
        "heavy = ('google.cloud.aiplatform', 'google.cloud.pubsub', 'google.cloud.firestore',\n"
        "         'google.cloud.storage', 'google.api_core')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("uri", ["gs://Bad_Bucket/config.yaml", "gs://ab/config.yaml", "gs://b"])
def test_a_gs_uri_that_names_no_object_is_a_config_error(uri: str) -> None:
    with pytest.raises(ConfigError, match="is not an object URI"):
        load_config(uri)
