"""shared.decode.routing: real-shaped triggers against a real-shaped config."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from shared.config.model import (
    Completion,
    Config,
    FlexStartPlacement,
    GcsRoute,
    PersistentResourcePlacement,
    PubSubRoute,
    ScheduleRoute,
    Template,
)
from shared.decode.routing import (
    RequestRejected,
    RouteMatch,
    fill_placeholders,
    glob_regex,
    route,
)
from shared.model.errors import ConfigError
from shared.model.runkeys import run_id
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick

GENERATION = 1733100000000000
PUBLISHED_AT = datetime(2026, 12, 1, 2, 0, 3, 412000, tzinfo=UTC)

# The seed page's job: a2-highgpu-1g with one A100.
A100_JOB_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {
                "machineType": "a2-highgpu-1g",
                "acceleratorType": "NVIDIA_TESLA_A100",
                "acceleratorCount": 1,
            },
            "replicaCount": "1",
            "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
            "containerSpec": {
                "imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4",
                "args": ["--data={dataset_uri}", "--epochs={epochs}"],
            },
        }
    ]
}


def template(name: str, params: tuple[str, ...]) -> Template:
    return Template(
        name=name,
        display_name=f"{name}-{{run_id}}",
        job_spec=A100_JOB_SPEC,
        placements=(
            PersistentResourcePlacement(resource_id="a100-pool"),
            FlexStartPlacement(max_wait=timedelta(hours=2)),
        ),
        params=params,
    )


CONFIG = Config(
    project="acme-ml",
    region="us-central1",
    source="/etc/vertex-dispatch/config.yaml",
    alerts_topic="projects/acme-ml/topics/training-alerts",
    routes=(
        GcsRoute(
            name="imagenet-daily",
            bucket="acme-datasets",
            match="imagenet/*/_SUCCESS",
            template="resnet-a100",
            params={"output": "gs://acme-outputs/{dirname}/{run_id}/"},
        ),
        GcsRoute(
            name="coco-manifest",
            bucket="acme-datasets",
            match="coco/**/manifest.json",
            template="resnet-a100",
            completion=Completion.MANIFEST,
        ),
        GcsRoute(
            name="inbox-csv",
            bucket="acme-inbox",
            match="*.csv",
            template="resnet-a100",
            completion=Completion.EVERY_OBJECT,
        ),
        PubSubRoute(
            name="eval-requests",
            body_field="job.kind",
            body_value="eval",
            template="eval-l4",
            params={"suite": "nightly"},
        ),
        PubSubRoute(name="train-requests", attributes={"kind": "train"}),
        ScheduleRoute(name="nightly", schedule="nightly-retrain", template="resnet-a100"),
    ),
    templates={
        "resnet-a100": template("resnet-a100", ("dataset_uri", "epochs")),
        "eval-l4": template("eval-l4", ("checkpoint", "suite")),
    },
)


def finalized(name: str, bucket: str = "acme-datasets") -> ObjectFinalized:
    return ObjectFinalized(
        bucket=bucket,
        name=name,
        generation=GENERATION,
        metageneration=1,
        size=0,
        event_id="7264937102123456",
    )


def request(body: dict[str, object], idempotency_key: str | None = None, **attributes: str):
    return JobRequest(
        message_id="9876543210",
        attributes=attributes,
        body=body,
        publish_time=PUBLISHED_AT,
        idempotency_key=idempotency_key,
    )


def tick(schedule: str) -> ScheduleTick:
    return ScheduleTick(
        message_id="5555", schedule=schedule, tick_time=datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    )


MARKER_KEY = f"gcs:acme-datasets/imagenet/2026-12-01/@{GENERATION}"
MARKER_ID = run_id(MARKER_KEY)


def test_a_marker_starts_its_directory_with_every_builtin() -> None:
    assert route(finalized("imagenet/2026-12-01/_SUCCESS"), CONFIG) == RouteMatch(
        route="imagenet-daily",
        template="resnet-a100",
        params={
            "run_id": MARKER_ID,
            "bucket": "acme-datasets",
            "object": "imagenet/2026-12-01/_SUCCESS",
            "dirname": "imagenet/2026-12-01",
            "basename": "_SUCCESS",
            "generation": str(GENERATION),
            "dataset_uri": "gs://acme-datasets/imagenet/2026-12-01/",
            "output": f"gs://acme-outputs/imagenet/2026-12-01/{MARKER_ID}/",
        },
        run_key=MARKER_KEY,
        run_id=MARKER_ID,
    )


def test_of_ten_thousand_shards_and_one_marker_only_the_marker_matches() -> None:
    names = [f"imagenet/2026-12-01/train-{i:05d}-of-10000.tfrecord" for i in range(10_000)]
    names.insert(5_000, "imagenet/2026-12-01/_SUCCESS")
    matches = [m for m in (route(finalized(n), CONFIG) for n in names) if m is not None]
    assert [m.params["object"] for m in matches] == ["imagenet/2026-12-01/_SUCCESS"]


OBJECT_ROUTES = [
    ("acme-datasets", "imagenet/2026-12-01/_SUCCESS", "imagenet-daily"),
    ("acme-datasets", "imagenet/2026-12-01/part-00000", None),  # a shard beside the marker
    ("acme-datasets", "imagenet/2026/12/01/_SUCCESS", None),  # `*` does not cross "/"
    ("acme-datasets", "imagenet/_SUCCESS", None),
    ("acme-datasets", "imagenet/2026-12-01/_SUCCESS.tmp", None),
    ("acme-other", "imagenet/2026-12-01/_SUCCESS", None),  # another bucket
    ("acme-datasets", "coco/manifest.json", "coco-manifest"),  # `**/` matches no directory
    ("acme-datasets", "coco/2026/12/manifest.json", "coco-manifest"),
    ("acme-datasets", "coco/2026/12/part-1.json", None),
    ("acme-inbox", "batch-17.csv", "inbox-csv"),
    ("acme-inbox", "uploads/batch-17.csv", None),
]


@pytest.mark.parametrize(("bucket", "name", "expected_route"), OBJECT_ROUTES)
def test_object_routes(bucket: str, name: str, expected_route: str | None) -> None:
    match = route(finalized(name, bucket), CONFIG)
    assert (match.route if match else None) == expected_route


def test_a_manifest_names_itself_for_verification_and_keys_its_directory() -> None:
    match = route(finalized("coco/2026/12/manifest.json"), CONFIG)
    assert match is not None
    assert match.manifest_uri == "gs://acme-datasets/coco/2026/12/manifest.json"
    assert match.run_key == f"gcs:acme-datasets/coco/2026/12/@{GENERATION}"
    assert match.params["dataset_uri"] == "gs://acme-datasets/coco/2026/12/"


def test_a_manifest_at_the_root_has_the_bucket_as_dataset() -> None:
    match = route(finalized("coco/manifest.json"), CONFIG)
    assert match is not None
    assert match.params["dataset_uri"] == "gs://acme-datasets/coco/"


def test_every_object_route_keys_the_object_and_points_at_it() -> None:
    match = route(finalized("batch-17.csv", "acme-inbox"), CONFIG)
    assert match is not None
    assert (match.run_key, match.manifest_uri) == (
        f"gcs:acme-inbox/batch-17.csv@{GENERATION}",
        None,
    )
    assert match.params["dataset_uri"] == "gs://acme-inbox/batch-17.csv"
    assert match.params["dirname"] == ""


GLOBS = [
    ("imagenet/*/_SUCCESS", "imagenet/2026-12-01/_SUCCESS", True),
    ("imagenet/*/_SUCCESS", "imagenet/a/b/_SUCCESS", False),
    ("imagenet/**/_SUCCESS", "imagenet/a/b/_SUCCESS", True),
    ("imagenet/**", "imagenet/a/b/c", True),
    ("data/part-?.csv", "data/part-7.csv", True),
    ("data/part-?.csv", "data/part-/.csv", False),
    ("data/part-[0-4].csv", "data/part-3.csv", True),
    ("data/part-[0-4].csv", "data/part-5.csv", False),
    ("data/part-[!0-4].csv", "data/part-5.csv", True),
    ("data/part-[!0-4].csv", "data/part-/.csv", False),
    ("data/v1.0+final(1).csv", "data/v1.0+final(1).csv", True),  # regex characters are literal
    ("data/v1.0+final(1).csv", "data/v1x0+final(1).csv", False),
    ("data/[unclosed", "data/[unclosed", True),
    ("models/*", "models/a\nb", True),
]


@pytest.mark.parametrize(("pattern", "name", "matches"), GLOBS)
def test_glob_semantics(pattern: str, name: str, matches: bool) -> None:
    assert (glob_regex(pattern).fullmatch(name) is not None) is matches


def test_an_invalid_character_class_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"glob 'data/\[z-a\]'"):
        glob_regex("data/[z-a]")


REQUEST_ROUTES = [
    (request({"template": "resnet-a100"}, kind="train"), "train-requests", "resnet-a100"),
    (request({"job": {"kind": "eval"}}, kind="train"), "eval-requests", "eval-l4"),
    (
        request({"job": {"kind": "train"}, "template": "resnet-a100"}, kind="train"),
        "train-requests",
        "resnet-a100",
    ),
    (request({"template": "resnet-a100"}, kind="eval"), None, None),
    (request({"template": "resnet-a100"}), None, None),
    (request({"job": "eval"}), None, None),
]


@pytest.mark.parametrize(("trigger", "expected_route", "expected_template"), REQUEST_ROUTES)
def test_request_routes(
    trigger: JobRequest, expected_route: str | None, expected_template: str | None
) -> None:
    match = route(trigger, CONFIG)
    found = (match.route, match.template) if match else (None, None)
    assert found == (expected_route, expected_template)


def test_a_request_fills_declared_params_over_the_builtins() -> None:
    body = {
        "template": "resnet-a100",
        "params": {"dataset_uri": "gs://acme-datasets/x/", "epochs": "90"},
    }
    match = route(request(body, "retrain-2026-12-01", kind="train"), CONFIG)
    assert match == RouteMatch(
        route="train-requests",
        template="resnet-a100",
        params={
            "run_id": run_id("request-key:retrain-2026-12-01"),
            "message_id": "9876543210",
            "dataset_uri": "gs://acme-datasets/x/",
            "epochs": "90",
        },
        run_key="request-key:retrain-2026-12-01",
        run_id=run_id("request-key:retrain-2026-12-01"),
    )


def test_a_request_without_idempotency_key_is_keyed_by_message_id() -> None:
    match = route(request({"template": "resnet-a100"}, kind="train"), CONFIG)
    assert match is not None and match.run_key == "request-message:9876543210"


def test_a_request_value_is_never_expanded_again() -> None:
    body = {"template": "resnet-a100", "params": {"epochs": "{run_id}"}}
    match = route(request(body, kind="train"), CONFIG)
    assert match is not None and match.params["epochs"] == "{run_id}"


EVAL = {"job": {"kind": "eval"}}
REJECTED = [
    (
        {"template": "resnet-a100", "params": {"lr": "0.1"}},
        "body.params.lr: template 'resnet-a100' does not declare",
    ),
    (
        {"template": "resnet-a100", "params": {"epochs": 90}},
        "body.params.epochs: values must be JSON strings",
    ),
    ({"template": "resnet-a100", "params": {"epochs": "90\n--evil"}}, "control character"),
    ({"template": "resnet-a100", "params": {"epochs": "9" * 1025}}, "over the limit of 1024"),
    (
        {"template": "resnet-a100", "params": {"region": "europe-west4"}},
        "body.params.region: the route, the trigger or dispatch sets",
    ),
    (
        {"template": "resnet-a100", "params": {"message_id": "x"}},
        "body.params.message_id: the route, the trigger or dispatch sets",
    ),
    ({"template": "gpt-h100"}, "body.template 'gpt-h100' names no template"),
    ({}, "has no body.template"),
    ({**EVAL, "template": "resnet-a100"}, "route 'eval-requests' fixes the template to 'eval-l4'"),
    (
        {**EVAL, "params": {"suite": "full"}},
        "body.params.suite: the route, the trigger or dispatch sets",
    ),
]


@pytest.mark.parametrize(("body", "message_part"), REJECTED)
def test_a_request_may_not_widen_its_route_or_template(
    body: dict[str, object], message_part: str
) -> None:
    with pytest.raises(RequestRejected) as caught:
        route(request(body, kind="train"), CONFIG)
    assert message_part in str(caught.value)


def test_a_request_naming_the_template_its_route_fixes_is_accepted() -> None:
    body = {**EVAL, "template": "eval-l4", "params": {"checkpoint": "gs://acme-ckpt/7/"}}
    match = route(request(body), CONFIG)
    assert match is not None
    assert (match.template, match.params["checkpoint"], match.params["suite"]) == (
        "eval-l4",
        "gs://acme-ckpt/7/",
        "nightly",
    )


def test_a_tick_starts_its_schedule() -> None:
    key = "schedule:nightly-retrain@2026-12-01T02:00:00Z"
    assert route(tick("nightly-retrain"), CONFIG) == RouteMatch(
        route="nightly",
        template="resnet-a100",
        params={
            "run_id": run_id(key),
            "message_id": "5555",
            "schedule": "nightly-retrain",
            "schedule_time": "2026-12-01T02:00:00Z",
        },
        run_key=key,
        run_id=run_id(key),
    )


def test_an_unknown_schedule_matches_nothing() -> None:
    assert route(tick("weekly-eval"), CONFIG) is None


def test_a_retry_is_not_routed() -> None:
    retry = RetryRequest(
        message_id="1", run_id=MARKER_ID, attempt=2, placement_index=1, reason="capacity"
    )
    with pytest.raises(TypeError, match="ledger"):
        route(retry, CONFIG)


def config_with_route_params(params: dict[str, str]) -> Config:
    gcs = GcsRoute(name="r", bucket="b", match="*", template="resnet-a100", params=params)
    return Config(
        project="p", region="us-central1", source="cfg.yaml", alerts_topic="t", routes=(gcs,)
    )


@pytest.mark.parametrize(
    ("params", "message_part"),
    [
        ({"run_id": "mine"}, "cfg.yaml: route 'r' params.run_id: 'run_id' is filled by dispatch"),
        ({"attempt": "1"}, "cfg.yaml: route 'r' params.attempt: 'attempt' is filled by dispatch"),
        (
            {"out": "gs://o/{message_id}/"},
            "cfg.yaml: route 'r' params.out: placeholder {message_id}",
        ),
    ],
)
def test_a_bad_route_param_is_a_config_error(params: dict[str, str], message_part: str) -> None:
    with pytest.raises(ConfigError) as caught:
        route(finalized("x", "b"), config_with_route_params(params))
    assert message_part in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--data={dataset_uri}", "--data=gs://d/"),
        ('{"json": {dataset_uri}}', '{"json": gs://d/}'),  # only {identifier} is a placeholder
        ("{ dataset_uri }", "{ dataset_uri }"),
        ("{{dataset_uri}}", "{gs://d/}"),
    ],
)
def test_fill_placeholders(text: str, expected: str) -> None:
    assert fill_placeholders(text, {"dataset_uri": "gs://d/"}, where="w") == expected


def test_routing_a_miss_imports_no_google_cloud_client() -> None:
    program = """
import json, sys
already_loaded = set(sys.modules)  # google.cloud itself is a namespace a .pth file preloads
from cloudevents.http import CloudEvent
from shared.config.model import Config, GcsRoute
from shared.decode.events import decode
from shared.decode.routing import route
config = Config(project="p", region="r", source="s", alerts_topic="t",
                routes=(GcsRoute(name="n", bucket="b", match="x/*/_SUCCESS", template="t"),))
event = CloudEvent({"type": "google.cloud.storage.object.v1.finalized", "source": "s"},
                   {"bucket": "b", "name": "x/1/part-0", "generation": "1",
                    "metageneration": "1", "size": "5"})
assert route(decode(event), config) is None
heavy = ("google.cloud.", "google.api_core", "google.auth", "google.protobuf", "grpc", "proto")
loaded = set(sys.modules) - already_loaded
print(json.dumps(sorted(m for m in loaded if m.startswith(heavy))))
"""
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []
