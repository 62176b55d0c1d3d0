"""tooling.planning: real-shaped events against the example config, planned without side effects."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import flask
import pytest
from cloudevents.http import CloudEvent
from functions_framework import event_conversion

from shared.adapters.config_source import load_config
from shared.config.loader import parse_config
from shared.config.model import Config, GcsRoute, Guards, QuietRule
from shared.model.errors import ConfigError, MalformedEvent
from shared.model.job_kinds import JobKind
from shared.model.runkeys import dataset_run_key, run_id
from shared.model.runs import Attempt, Run
from shared.policy.records import placement_record
from tooling.planning import (
    LIVE_CHECKS_FLEX_START,
    LIVE_CHECKS_ON_DEMAND,
    LIVE_CHECKS_PERSISTENT_RESOURCE,
    LIVE_CHECKS_RESERVATION,
    LIVE_CHECKS_SPOT,
    HistoryUnavailable,
    Plan,
    PlanUsageError,
    PlanVerdict,
    QuietPlan,
    cloud_event_from_json,
    plan_event,
    plan_event_json,
    push_body_to_cloud_event,
)

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "config.yaml"
GENERATION = "1733100000000000"
PUBLISH_TIME = "2026-12-01T02:00:03.412Z"
TOPIC = "projects/acme-ml/topics/training-requests"


@pytest.fixture(scope="module")
def config() -> Config:
    return load_config(str(EXAMPLE_CONFIG))


def object_event(bucket: str, name: str, *, event_type: str | None = None) -> CloudEvent:
    """A Cloud Storage event as Eventarc delivers it: int64 fields are JSON strings."""
    return CloudEvent(
        {
            "type": event_type or "google.cloud.storage.object.v1.finalized",
            "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
            "subject": f"objects/{name}",
            "id": "7264937102123456",
            "time": "2026-12-01T01:59:58.123456Z",
        },
        {
            "bucket": bucket,
            "name": name,
            "generation": GENERATION,
            "metageneration": "1",
            "size": "0",
            "contentType": "application/octet-stream",
        },
    )


def push_body(body: object, attributes: dict[str, str] | None = None) -> dict[str, object]:
    """A plain Pub/Sub push body, as a push subscription posts it."""
    message: dict[str, object] = {
        "data": base64.b64encode(json.dumps(body).encode()).decode(),
        "messageId": "9876543210",
        "message_id": "9876543210",
        "publishTime": PUBLISH_TIME,
        "publish_time": PUBLISH_TIME,
    }
    if attributes is not None:
        message["attributes"] = attributes
    return {"message": message, "subscription": "projects/acme-ml/subscriptions/push-requests"}


def message_event(body: object, attributes: dict[str, str]) -> CloudEvent:
    return push_body_to_cloud_event(push_body(body, attributes), topic=TOPIC)


MARKER = "imagenet/2026-12-01/_SUCCESS"
EXPORT_SHARD = "exports/2026-12-01/part-00042.parquet"

PLANS = [
    pytest.param(
        object_event("acme-datasets", MARKER),
        PlanVerdict.VALID,
        "imagenet-daily",
        "resnet-a100",
        4,
        id="marker-starts-the-four-placement-chain",
    ),
    pytest.param(
        object_event("acme-datasets", "corpus/2026/12/manifest.json"),
        PlanVerdict.VALID,
        "text-corpus",
        "bert-package",
        1,
        id="manifest-route",
    ),
    pytest.param(
        object_event("acme-eval", "incoming/shard-00007.tfrecord"),
        PlanVerdict.VALID,
        "eval-shards",
        "dws-seed-rest",
        1,
        id="every-object-route-on-the-seed-rest-body",
    ),
    pytest.param(
        message_event({"template": "persistent-sample"}, {"kind": "train"}),
        PlanVerdict.VALID,
        "on-request",
        "persistent-sample",
        1,
        id="request-names-its-template",
    ),
    pytest.param(
        message_event({"job": {"kind": "finetune"}}, {"team": "nlp"}),
        PlanVerdict.VALID,
        "finetune-request",
        "bert-package",
        1,
        id="request-matched-on-a-body-field",
    ),
    pytest.param(
        message_event(
            {"schedule": "weekly-dws-check", "time": "2026-12-07T06:00:00Z"},
            {"vertex_dispatch_kind": "schedule"},
        ),
        PlanVerdict.VALID,
        "weekly-seed-check",
        "dws-seed-gcloud",
        1,
        id="scheduler-tick-on-the-seed-gcloud-config",
    ),
    pytest.param(
        object_event("acme-datasets", EXPORT_SHARD),
        PlanVerdict.VALID,
        "nightly-export",
        "llm-finetune",
        5,
        id="shard-of-a-quiet-route-plans-its-datasets-run",
    ),
    pytest.param(
        object_event("acme-datasets", "imagenet/2026-12-01/part-00001.tfrecord"),
        PlanVerdict.NO_ROUTE,
        "",
        "",
        0,
        id="shard-of-the-dataset-matches-nothing",
    ),
    pytest.param(
        object_event("acme-datasets", MARKER, event_type="google.cloud.storage.object.v1.deleted"),
        PlanVerdict.REJECTED,
        "",
        "",
        0,
        id="deleted-event-is-malformed",
    ),
    pytest.param(
        message_event({"template": "resnet-a100", "params": {"epochs": "3"}}, {"kind": "train"}),
        PlanVerdict.REJECTED,
        "",
        "",
        0,
        id="request-fills-an-undeclared-param",
    ),
    pytest.param(
        message_event(
            {"run_id": "r-3f2a9c0d1e4b5a6978877665", "attempt": 2, "placement_index": 1},
            {"vertex_dispatch_kind": "retry"},
        ),
        PlanVerdict.NOT_ROUTED,
        "",
        "",
        0,
        id="retry-continues-a-ledger-run",
    ),
]


@pytest.mark.parametrize(("event", "verdict", "route", "template", "placements"), PLANS)
def test_plan_event_over_the_example_config(
    config: Config,
    event: CloudEvent,
    verdict: PlanVerdict,
    route: str,
    template: str,
    placements: int,
) -> None:
    plan = plan_event(config, event)
    assert (plan.verdict, plan.route, plan.template) == (verdict, route, template)
    assert len(plan.placements) == placements
    if verdict is PlanVerdict.VALID:
        assert all(placement.valid for placement in plan.placements)
    else:
        assert plan.reason


def test_a_marker_plans_flex_start_with_its_max_wait(config: Config) -> None:
    plan = plan_event(config, object_event("acme-datasets", MARKER))
    expected_key = dataset_run_key("acme-datasets", "imagenet/2026-12-01", int(GENERATION))
    assert (plan.run_key, plan.run_id) == (expected_key, run_id(expected_key))
    assert plan.params["dataset_uri"] == "gs://acme-datasets/imagenet/2026-12-01/"
    jobs = [json.loads(placement.job_json or "{}") for placement in plan.placements]
    scheduling = [job["jobSpec"]["scheduling"] for job in jobs]
    assert [s.get("strategy") for s in scheduling] == [
        None,
        "FLEX_START",
        "FLEX_START",
        "FLEX_START",
    ]
    assert [s.get("maxWaitDuration") for s in scheduling] == [None, "7200s", "21600s", "0s"]
    assert jobs[0]["jobSpec"]["persistentResourceId"] == "a100-pool"
    assert [p.parent for p in plan.placements] == [
        "projects/acme-ml/locations/us-central1",
        "projects/acme-ml/locations/us-central1",
        "projects/acme-ml/locations/us-east4",
        "projects/acme-ml/locations/europe-west4",
    ]
    assert jobs[1]["labels"]["vd-run"] == plan.run_id
    assert jobs[1]["labels"]["vd-attempt"] == "1"
    assert [p.skipped_checks for p in plan.placements] == [
        LIVE_CHECKS_PERSISTENT_RESOURCE,
        *[LIVE_CHECKS_FLEX_START] * 3,
    ]


def test_a_chain_of_every_kind_plans_each_kinds_scheduling(config: Config) -> None:
    body = {"template": "llm-finetune", "params": {"dataset_uri": "gs://acme-datasets/llm/x/"}}
    plan = plan_event(config, message_event(body, {"kind": "train"}))
    assert plan.verdict is PlanVerdict.VALID
    assert all(placement.valid for placement in plan.placements)
    jobs = [json.loads(placement.job_json or "{}") for placement in plan.placements]
    assert [job["jobSpec"]["scheduling"].get("strategy") for job in jobs] == [
        None,  # a reservation: unset, which Vertex AI reads as STANDARD
        None,  # a persistent resource
        "SPOT",
        "FLEX_START",
        "STANDARD",
    ]
    reserved = "projects/acme-ml/zones/us-central1-a/reservations/a100-reserved"
    assert jobs[0]["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["reservationAffinity"] == {
        "reservationAffinityType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": [reserved],
    }
    assert all(
        "reservationAffinity" not in job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
        for job in jobs[1:]
    )
    assert [p.parent.rsplit("/", 1)[-1] for p in plan.placements if p.parent] == [
        "us-central1",
        "us-central1",
        "us-east4",
        "us-central1",
        "us-central1",
    ]
    # the key of each job's own region
    assert [job["encryptionSpec"]["kmsKeyName"].split("/")[3] for job in jobs] == [
        "us-central1",
        "us-central1",
        "us-east4",
        "us-central1",
        "us-central1",
    ]
    assert [p.skipped_checks for p in plan.placements] == [
        LIVE_CHECKS_RESERVATION,
        LIVE_CHECKS_PERSISTENT_RESOURCE,
        LIVE_CHECKS_SPOT,
        LIVE_CHECKS_FLEX_START,
        LIVE_CHECKS_ON_DEMAND,
    ]


def test_a_manifest_route_names_the_manifest_it_does_not_read(config: Config) -> None:
    plan = plan_event(config, object_event("acme-datasets", "corpus/2026/12/manifest.json"))
    assert plan.manifest_uri == "gs://acme-datasets/corpus/2026/12/manifest.json"


def test_only_a_quiet_route_plans_a_dataset(config: Config) -> None:
    assert plan_event(config, object_event("acme-datasets", MARKER)).quiet is None
    assert plan_event(config, object_event("acme-eval", "incoming/a.tfrecord")).quiet is None


def test_a_quiet_shard_names_its_dataset_and_the_job_its_run_submits_once_quiet(
    config: Config,
) -> None:
    plan = plan_event(config, object_event("acme-datasets", EXPORT_SHARD))
    directory = "gs://acme-datasets/exports/2026-12-01/"
    assert plan.quiet == QuietPlan(
        dataset_uri=directory,
        captures={"date": "2026-12-01"},
        quiet_for="10m",
        min_objects=64,
        after_start="new_run",
    )
    assert plan.quiet.waiting_text() == (
        f"this object opens or joins the dataset {directory}, which waits (WAITING_DATA) until "
        "no object under it was written for 10m and at least 64 exist; then its run submits the "
        "job below, once (objects written after it started: new_run)"
    )
    assert plan.params["dataset_uri"] == directory
    jobs = [json.loads(placement.job_json or "{}") for placement in plan.placements]
    assert {job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"][0] for job in jobs} == {
        f"--data={directory}"
    }


def test_a_quiet_route_with_one_object_and_the_default_rule_says_no_count(config: Config) -> None:
    route = next(r for r in config.routes if r.name == "nightly-export")
    assert isinstance(route, GcsRoute) and route.quiet is not None
    plain = replace(route, quiet=QuietRule(dataset=route.quiet.dataset))
    plan = plan_event(replace(config, routes=(plain,)), object_event("acme-datasets", EXPORT_SHARD))
    assert plan.quiet is not None
    assert (plan.quiet.min_objects, plan.quiet.after_start) == (1, "ignore")
    assert "written for 10m; then its run" in plan.quiet.waiting_text()


def test_an_object_of_a_quiet_route_under_no_dataset_is_the_configs_fault(config: Config) -> None:
    # The loader refuses a dataset that does not cover match; a Config built by hand may not.
    route = next(r for r in config.routes if r.name == "nightly-export")
    assert isinstance(route, GcsRoute) and route.quiet is not None
    stray = replace(route, match="exports/*")
    with pytest.raises(ConfigError, match="lies under no directory"):
        plan_event(replace(config, routes=(stray,)), object_event("acme-datasets", "exports/a"))


@pytest.mark.parametrize(
    ("placement_index", "expected_wait"),
    [(1, "7200s"), (3, "0s")],
)
def test_one_placement_is_planned_on_request(
    config: Config, placement_index: int, expected_wait: str
) -> None:
    plan = plan_event(
        config, object_event("acme-datasets", MARKER), placement_index=placement_index
    )
    (only,) = plan.placements
    assert only.index == placement_index
    assert json.loads(only.job_json or "{}")["jobSpec"]["scheduling"]["maxWaitDuration"] == (
        expected_wait
    )


@pytest.mark.parametrize("placement_index", [4, 99])
def test_a_placement_outside_the_chain_is_a_usage_error(
    config: Config, placement_index: int
) -> None:
    with pytest.raises(
        PlanUsageError, match=r"--placement .*has 4 placement\(s\), numbered 0 to 3"
    ):
        plan_event(config, object_event("acme-datasets", MARKER), placement_index=placement_index)


# A template that loads (the loader checks guards) but breaks FLEX_START's GPU rule on rendering.
K80_FLEX_CONFIG = """\
project: acme-ml
region: us-central1
alerts_topic: training-alerts
routes:
  - name: k80-marker
    gcs: {bucket: acme-datasets, match: "legacy/*/_SUCCESS"}
    template: k80-flex
templates:
  k80-flex:
    worker_pools:
      - machine_type: n1-standard-4
        accelerator: {type: NVIDIA_TESLA_K80, count: 1}
        image: us-docker.pkg.dev/acme-ml/train/legacy:1.0
        args: ["--data={dataset_uri}"]
    timeout: 1h
    placement:
      - flex_start: {max_wait: 30m}
      - persistent_resource: k80-pool
"""


def test_a_job_breaking_a_rule_is_invalid_with_each_violation_named() -> None:
    config = parse_config(K80_FLEX_CONFIG, "k80.yaml")
    plan = plan_event(config, object_event("acme-datasets", "legacy/2026-12-01/_SUCCESS"))
    assert plan.verdict is PlanVerdict.INVALID
    flex, persistent = plan.placements
    assert [(v.field, str(v.rule)) for v in flex.violations] == [
        ("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType", "flex-start-gpu")
    ]
    assert "NVIDIA_TESLA_K80" in flex.violations[0].message
    assert persistent.valid  # the chain's later placement is still shown, and is fine offline


def test_the_verdict_follows_the_first_planned_placement() -> None:
    config = parse_config(K80_FLEX_CONFIG, "k80.yaml")
    event = object_event("acme-datasets", "legacy/2026-12-01/_SUCCESS")
    assert plan_event(config, event, placement_index=1).verdict is PlanVerdict.VALID


# --- reading event files ----------------------------------------------------------------------


def framework_conversion(body: dict[str, object], path: str) -> CloudEvent:
    """What functions-framework itself makes of a push body posted to ``path``."""
    app = flask.Flask(__name__)
    with app.test_request_context(path, method="POST", json=body):
        return event_conversion.background_event_to_cloud_event(flask.request)


@pytest.mark.parametrize(
    ("body", "topic", "path"),
    [
        pytest.param(
            push_body({"template": "x"}, {"kind": "train"}), TOPIC, f"/{TOPIC}", id="topic"
        ),
        pytest.param(push_body({}, None), None, "/", id="no-topic-no-attributes"),
        pytest.param(
            {**push_body({"schedule": "nightly-retrain"}), "deliveryAttempt": 3},
            "projects/acme-ml/topics/requests",
            "/projects/acme-ml/topics/requests",
            id="extra-envelope-field",
        ),
    ],
)
def test_a_push_body_converts_as_functions_framework_converts_it(
    body: dict[str, object], topic: str | None, path: str
) -> None:
    ours = cloud_event_from_json(json.dumps(body), topic=topic)
    theirs = framework_conversion(body, path)
    assert ours.get_attributes() == theirs.get_attributes()
    assert ours.get_data() == theirs.get_data()


def test_a_push_body_without_publish_time_is_stamped_now() -> None:
    body = push_body({"template": "x"})
    message = body["message"]
    assert isinstance(message, dict)
    del message["publishTime"]
    stamped = datetime(2026, 12, 1, 2, 0, 3, 412000, tzinfo=UTC)
    event = cloud_event_from_json(json.dumps(body), now=lambda: stamped)
    assert event["time"] == "2026-12-01T02:00:03.412000Z"
    assert event.get_data()["message"]["publishTime"] == "2026-12-01T02:00:03.412000Z"


MARKER_DATA = {
    "bucket": "acme-datasets",
    "name": MARKER,
    "generation": GENERATION,
    "metageneration": "1",
    "size": "0",
}
STRUCTURED_MARKER = {
    "specversion": "1.0",
    "type": "google.cloud.storage.object.v1.finalized",
    "source": "//storage.googleapis.com/projects/_/buckets/acme-datasets",
    "subject": f"objects/{MARKER}",
    "id": "7264937102123456",
    "time": "2026-12-01T01:59:58.123456Z",
    "data": MARKER_DATA,
}


def test_a_structured_cloud_event_is_read_as_is() -> None:
    event = cloud_event_from_json(json.dumps(STRUCTURED_MARKER))
    assert event["id"] == "7264937102123456"
    assert event.get_data()["name"] == MARKER


def test_data_base64_is_decoded_like_data() -> None:
    document = dict(STRUCTURED_MARKER)
    del document["data"]
    document["data_base64"] = base64.b64encode(json.dumps(MARKER_DATA).encode()).decode()
    event = cloud_event_from_json(json.dumps(document))
    assert event.get_data() == MARKER_DATA


@pytest.mark.parametrize(
    ("text", "message_part"),
    [
        pytest.param("{not json", "the event file is not JSON", id="not-json"),
        pytest.param("[1, 2]", "must hold a JSON object", id="array"),
        pytest.param(
            json.dumps({k: v for k, v in STRUCTURED_MARKER.items() if k != "source"}),
            "not a structured-mode CloudEvent (Missing required attributes: {'source'})",
            id="cloud-event-without-source",
        ),
        pytest.param(
            json.dumps({**STRUCTURED_MARKER, "specversion": "0.2"}),
            "not a structured-mode CloudEvent",
            id="unknown-spec-version",
        ),
        pytest.param(
            json.dumps({"message": {"data": "e30="}, "subscription": "s"}),
            "must be an object with data and messageId",
            id="push-body-without-message-id",
        ),
        pytest.param(
            json.dumps({"message": "hello", "subscription": "s"}),
            "must be an object with data and messageId",
            id="push-body-message-not-an-object",
        ),
    ],
)
def test_unreadable_event_files_are_malformed(text: str, message_part: str) -> None:
    with pytest.raises(MalformedEvent) as raised:
        cloud_event_from_json(text)
    assert message_part in str(raised.value)


@pytest.mark.parametrize(
    ("document", "topic", "message_part"),
    [
        pytest.param(STRUCTURED_MARKER, TOPIC, "--topic applies to a plain Pub/Sub push body only"),
        pytest.param(push_body({}), "training-requests", "is not a topic name"),
        pytest.param(push_body({}), "projects/p/topics/t/extra", "is not a topic name"),
    ],
)
def test_a_misused_topic_is_a_usage_error(
    document: dict[str, object], topic: str, message_part: str
) -> None:
    with pytest.raises(PlanUsageError, match=message_part):
        cloud_event_from_json(json.dumps(document), topic=topic)


def test_an_unreadable_event_file_plans_as_rejected(config: Config) -> None:
    plan = plan_event_json(config, '{"message": {}, "subscription": "s"}')
    assert plan == Plan(
        PlanVerdict.REJECTED,
        reason=(
            "MalformedEvent: Pub/Sub push body message must be an object with data and "
            "messageId: functions-framework converts no other push body; publish through "
            "Pub/Sub, which sets both"
        ),
    )


def test_an_unmatched_event_does_not_import_vertex_ai(tmp_path: Path) -> None:
    """Planning a shard must stay as cheap as dispatching it: no aiplatform_v1 import."""
    event = tmp_path / "shard.json"
    shard_name = "imagenet/2026-12-01/part-00001.tfrecord"
    data = {**MARKER_DATA, "name": shard_name}
    shard = {**STRUCTURED_MARKER, "subject": f"objects/{shard_name}", "data": data}
    event.write_text(json.dumps(shard))
    script = (
        "import sys; from shared.adapters.config_source import load_config; "
        "from tooling.planning import plan_event_json; "
        f"plan = plan_event_json(load_config({str(EXAMPLE_CONFIG)!r}), "
        f"open({str(event)!r}).read()); "
        "print(plan.verdict.value, 'google.cloud.aiplatform_v1' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["no_route", "False"]


# --- sweeps and pipelines: the job created, with FLEX_START inside what runs -------------------

EXAMPLE_EVENTS = EXAMPLE_CONFIG.parent / "events"


def _placement_jobs(config: Config, event: str) -> tuple[Plan, list[dict[str, Any]]]:
    plan = plan_event_json(config, (EXAMPLE_EVENTS / event).read_text())
    assert plan.verdict is PlanVerdict.VALID, plan
    return plan, [json.loads(p.job_json or "null") for p in plan.placements]


def test_a_sweep_marker_plans_a_tuning_job_whose_trials_wait_under_flex_start(
    config: Config,
) -> None:
    plan, jobs = _placement_jobs(config, "sweep-marker.json")
    assert plan.template == "resnet-sweep"
    assert [p.kind for p in plan.placements] == [JobKind.HYPERPARAMETER_TUNING_JOB] * 2
    for placement, job in zip(plan.placements, jobs, strict=True):
        assert not placement.violations
        assert placement.skipped_checks == LIVE_CHECKS_FLEX_START
        assert set(job) >= {"studySpec", "maxTrialCount", "parallelTrialCount", "trialJobSpec"}
        assert "jobSpec" not in job  # the created message is the tuning job, not a CustomJob
        assert job["trialJobSpec"]["scheduling"]["strategy"] == "FLEX_START"
        assert job["labels"]["vd-run"] == plan.run_id
        assert job["studySpec"]["metrics"] == [{"metricId": "accuracy", "goal": "MAXIMIZE"}]
    assert [job["trialJobSpec"]["scheduling"]["maxWaitDuration"] for job in jobs] == [
        "7200s",
        "21600s",
    ]


def test_a_pipeline_tick_plans_a_training_pipeline_on_the_resource_then_flex_start(
    config: Config,
) -> None:
    plan, jobs = _placement_jobs(config, "pipeline-tick.json")
    assert plan.template == "resnet-pipeline"
    assert [p.kind for p in plan.placements] == [JobKind.TRAINING_PIPELINE] * 2
    assert [p.skipped_checks for p in plan.placements] == [
        LIVE_CHECKS_PERSISTENT_RESOURCE,
        LIVE_CHECKS_FLEX_START,
    ]
    on_resource, flex = (job["trainingTaskInputs"] for job in jobs)
    assert on_resource["persistentResourceId"] == "a100-pool"
    assert "strategy" not in on_resource.get("scheduling", {})
    assert flex["scheduling"]["strategy"] == "FLEX_START"
    assert "persistentResourceId" not in flex
    for job in jobs:
        assert job["trainingTaskDefinition"].endswith("/custom_task_1.0.0.yaml")
        assert job["modelToUpload"]["displayName"] == f"resnet-{plan.run_id}"
        assert job["labels"]["vd-run"] == plan.run_id


def test_a_sweep_that_breaks_a_rule_plans_as_invalid_naming_the_field(config: Config) -> None:
    # 1 GPU per trial x parallel_trials 4 is over a ceiling of 3 (set after loading: the loader
    # would refuse it first). A sweep's own rules (trial counts, study) are the loader's alone.
    sweep = config.templates["resnet-sweep"]
    assert sweep.hyperparameter_tuning is not None
    assert sweep.hyperparameter_tuning.parallel_trials == 4
    text = (EXAMPLE_EVENTS / "sweep-marker.json").read_text()
    plan = plan_event_json(replace(config, guards=Guards(max_gpus_per_job=3)), text)
    assert plan.verdict is PlanVerdict.INVALID
    assert [(v.rule.value, v.field) for v in plan.placements[0].violations] == [
        ("guard-gpus", "parallelTrialCount")
    ]


@pytest.mark.parametrize(
    ("event", "kind", "inner"),
    [
        ("sweep-marker.json", "hyperparameter_tuning_job", "trialJobSpec"),
        ("pipeline-tick.json", "training_pipeline", "trainingTaskInputs"),
        ("success-marker.json", "custom_job", "jobSpec"),
    ],
)
def test_plan_prints_the_job_of_the_templates_kind(
    event: str, kind: str, inner: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooling import EXIT_OK, main

    arguments = ["plan", "--config", str(EXAMPLE_CONFIG), "--event", str(EXAMPLE_EVENTS / event)]
    assert main([*arguments, "--json"]) == EXIT_OK
    (first, *_) = json.loads(capsys.readouterr().out)["placements"]
    assert first["job_kind"] == kind
    assert inner in first["job"]
    # "custom_job" keeps its meaning: the CustomJob a CustomJob template creates, else null.
    assert first["custom_job"] == (first["job"] if kind == "custom_job" else None)
    assert main(arguments) == EXIT_OK
    resource = JobKind(kind).resource
    assert f"kind: {resource}\n{{" in capsys.readouterr().out


# --- the placement order ---------------------------------------------------------------------

PLAN_NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def a_started_run(config: Config, template: str, index: int, waited: timedelta) -> Run:
    """A recent run of ``template`` whose job on placement ``index`` started ``waited`` after
    its create."""
    placement = config.templates[template].placements[index]
    region = placement.region or config.region
    created = PLAN_NOW - timedelta(hours=2)
    attempt = Attempt(
        number=1,
        placement=placement_record(placement),
        region=region,
        parent=f"projects/acme-ml/locations/{region}",
        intent_at=created,
        job_created_at=created,
        started_at=created + waited,
    )
    return Run(f"old-{index}", f"key-{index}", "nightly", template, {}, attempts=(attempt,))


def nightly_event() -> CloudEvent:
    return object_event("acme-datasets", "imagenet/2026-12-01/_SUCCESS")


def test_a_learned_template_plans_its_chain_in_the_order_its_history_gives(
    config: Config,
) -> None:
    history = [
        a_started_run(config, "resnet-a100", 0, timedelta(hours=3)),
        a_started_run(config, "resnet-a100", 2, timedelta(minutes=4)),
    ]
    asked: list[str] = []

    def read(template: str) -> list[Run]:
        asked.append(template)
        return history

    plan = plan_event(config, nightly_event(), history=read, now=lambda: PLAN_NOW)

    assert asked == ["resnet-a100"]
    order = plan.placement_order
    assert order is not None and order.learned
    assert order.order[:2] == (2, 0)
    assert [placement.index for placement in plan.placements] == list(order.order)
    assert "median time-to-start 4m" in order.reasons[2]
    assert "untried" in order.reasons[1]
    assert "2 most recent run(s)" in order.source


@pytest.mark.parametrize(
    ("history", "says"),
    [
        pytest.param(None, "plan reads no history without --history-from-ledger", id="no-flag"),
        pytest.param("unreadable", "the ledger could not be read (no ledger here)", id="no-ledger"),
    ],
)
def test_a_learned_template_without_its_history_plans_the_chain_as_written(
    config: Config, history: str | None, says: str
) -> None:
    def unreadable(template: str) -> list[Run]:
        raise HistoryUnavailable("no ledger here")

    reader = unreadable if history else None
    plan = plan_event(config, nightly_event(), history=reader, now=lambda: PLAN_NOW)
    order = plan.placement_order
    assert order is not None and not order.learned
    assert order.order == (0, 1, 2, 3)
    assert says in order.source
    assert [placement.index for placement in plan.placements] == [0, 1, 2, 3]


def test_an_as_written_template_reads_no_history(config: Config) -> None:
    def never(template: str) -> list[Run]:
        raise AssertionError("an as_written template must not read the ledger")

    body = {"template": "llm-finetune", "params": {"dataset_uri": "gs://acme-datasets/llm/x/"}}
    plan = plan_event(config, message_event(body, {"kind": "train"}), history=never)
    assert plan.placement_order is not None
    assert (plan.placement_order.order, plan.placement_order.source) == (
        (0, 1, 2, 3, 4),
        "as written",
    )


def test_one_placement_of_a_learned_order_is_planned_on_request(config: Config) -> None:
    history = [a_started_run(config, "resnet-a100", 2, timedelta(minutes=4))]
    plan = plan_event(
        config, nightly_event(), placement_index=1, history=lambda _: history, now=lambda: PLAN_NOW
    )
    assert [placement.index for placement in plan.placements] == [1]
    assert plan.placement_order is not None and plan.placement_order.order[0] == 2
