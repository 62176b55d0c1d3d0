"""The `vertex-dispatch validate` and `plan` commands, run in-process over real-shaped files."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tooling import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_CONFIG = str(EXAMPLES / "config.yaml")
GENERATION = "1733100000000000"


def storage_event(bucket: str, name: str, generation: object = GENERATION) -> dict[str, object]:
    """A structured-mode CloudEvent as Eventarc delivers an object finalization."""
    return {
        "specversion": "1.0",
        "type": "google.cloud.storage.object.v1.finalized",
        "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "subject": f"objects/{name}",
        "id": "7264937102123456",
        "time": "2026-12-01T01:59:58.123456Z",
        "datacontenttype": "application/json",
        "data": {
            "bucket": bucket,
            "name": name,
            "generation": generation,
            "metageneration": "1",
            "size": "0",
        },
    }


def push_body(body: object, attributes: dict[str, str]) -> dict[str, object]:
    """A plain Pub/Sub push body, as a push subscription posts it."""
    return {
        "message": {
            "data": base64.b64encode(json.dumps(body).encode()).decode(),
            "attributes": attributes,
            "messageId": "9876543210",
            "publishTime": "2026-12-01T02:00:03.412Z",
        },
        "subscription": "projects/acme-ml/subscriptions/push-requests",
    }


MARKER_EVENT = storage_event("acme-datasets", "imagenet/2026-12-01/_SUCCESS")


@pytest.fixture
def write_json(tmp_path: Path):
    def write(document: object, name: str = "event.json") -> str:
        path = tmp_path / name
        path.write_text(json.dumps(document))
        return str(path)

    return write


# --- plan ------------------------------------------------------------------------------------


PLAN_CASES = [
    pytest.param(
        MARKER_EVENT,
        [],
        0,
        [
            "route: imagenet-daily",
            "template: resnet-a100",
            "run key: gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
            "dataset_uri = gs://acme-datasets/imagenet/2026-12-01/",
            "placement[1]: FLEX_START (max wait 7200s)",
            '"strategy": "FLEX_START"',
            '"maxWaitDuration": "7200s"',
            "parent: projects/acme-ml/locations/us-east4",
            "live checks skipped",
            "placement order: 0, 1, 2, 3 (as written: plan reads no history without "
            "--history-from-ledger)",
            "verdict: valid",
        ],
        id="marker-prints-flex-start-jobs",
    ),
    pytest.param(
        storage_event("acme-datasets", "imagenet/2026-12-01/part-00017.tfrecord"),
        [],
        3,
        ["verdict: no_route: no route of", "matches this event"],
        id="unmatched-shard-exits-3",
    ),
    pytest.param(
        storage_event("acme-datasets", "imagenet/2026-12-01/_SUCCESS", generation=17.5),
        [],
        1,
        ["verdict: rejected: MalformedEvent: storage event data.generation must be an int64"],
        id="malformed-event-exits-1-with-the-reason",
    ),
    pytest.param(
        push_body({"template": "dws-seed-rest"}, {"kind": "train"}),
        ["--topic", "projects/acme-ml/topics/training-requests"],
        0,
        ["route: on-request", '"displayName": "MyDwsJob"', '"maxWaitDuration": "1800s"'],
        id="push-body-runs-the-seed-rest-body",
    ),
    pytest.param(
        push_body({"template": "no-such-template"}, {"kind": "train"}),
        ["--topic", "projects/acme-ml/topics/training-requests"],
        1,
        ["verdict: rejected: RequestRejected:", "no-such-template"],
        id="request-for-an-unknown-template-exits-1",
    ),
    pytest.param(
        MARKER_EVENT,
        ["--placement", "3"],
        0,
        ["placement[3]: FLEX_START (max wait 0s) in europe-west4 on a3-highgpu-1g"],
        id="one-placement",
    ),
]


@pytest.mark.parametrize(("event", "extra_args", "exit_code", "printed"), PLAN_CASES)
def test_plan(
    capsys: pytest.CaptureFixture[str],
    write_json,
    event: dict[str, object],
    extra_args: list[str],
    exit_code: int,
    printed: list[str],
) -> None:
    status = main(["plan", "--config", EXAMPLE_CONFIG, "--event", write_json(event), *extra_args])
    out = capsys.readouterr().out
    assert status == exit_code, out
    for text in printed:
        assert text in out


def test_plan_one_placement_prints_only_that_one(
    capsys: pytest.CaptureFixture[str],
    write_json,
) -> None:
    main(
        [
            "plan",
            "--config",
            EXAMPLE_CONFIG,
            "--event",
            write_json(MARKER_EVENT),
            "--placement",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert "placement[1]:" in out
    assert "placement[0]:" not in out
    assert "placement[2]:" not in out


def test_plan_json_is_one_document(
    capsys: pytest.CaptureFixture[str],
    write_json,
) -> None:
    status = main(
        ["plan", "--config", EXAMPLE_CONFIG, "--event", write_json(MARKER_EVENT), "--json"]
    )
    document = json.loads(capsys.readouterr().out)
    assert status == 0
    assert (document["verdict"], document["route"], document["template"]) == (
        "valid",
        "imagenet-daily",
        "resnet-a100",
    )
    placements = document["placements"]
    assert [p["valid"] for p in placements] == [True] * 4
    flex = placements[1]
    assert flex["parent"] == "projects/acme-ml/locations/us-central1"
    assert flex["custom_job"]["jobSpec"]["scheduling"]["maxWaitDuration"] == "7200s"
    assert flex["custom_job"]["labels"]["vd-run"] == document["run_id"]
    # resnet-a100 says placement_order: learned; without --history-from-ledger, as written
    order = document["placement_order"]
    assert (order["order"], order["learned"]) == ([0, 1, 2, 3], False)
    assert "without --history-from-ledger" in order["source"]


# A template that loads but breaks FLEX_START's GPU rule once rendered.
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
    timeout: 1h
    placement: [{flex_start: {max_wait: 30m}}]
"""


def test_plan_of_an_invalid_job_exits_1_naming_field_and_rule(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    write_json,
) -> None:
    config = tmp_path / "k80.yaml"
    config.write_text(K80_FLEX_CONFIG)
    event = write_json(storage_event("acme-datasets", "legacy/2026-12-01/_SUCCESS"))
    status = main(["plan", "--config", str(config), "--event", event])
    out = capsys.readouterr().out
    assert status == 1
    assert (
        "  jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: flex-start-gpu: FLEX_START "
        "serves only L4, A100, H100, H200 and B200 GPUs"
    ) in out
    assert "verdict: invalid: the job on placement[0] breaks the rules above" in out


USAGE_ERRORS = [
    pytest.param(["--placement", "7"], "template 'resnet-a100' has 4 placement(s)", id="placement"),
    pytest.param(
        ["--topic", "projects/acme-ml/topics/t"],
        "--topic applies to a plain Pub/Sub push body only",
        id="topic-with-a-cloud-event",
    ),
]


@pytest.mark.parametrize(("extra_args", "message"), USAGE_ERRORS)
def test_plan_usage_errors_exit_2_on_stderr(
    capsys: pytest.CaptureFixture[str],
    write_json,
    extra_args: list[str],
    message: str,
) -> None:
    args = ["plan", "--config", EXAMPLE_CONFIG, "--event", write_json(MARKER_EVENT), *extra_args]
    status = main(args)
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err.startswith("vertex-dispatch plan: error: ")
    assert message in captured.err


def test_plan_of_a_missing_event_file_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = main(["plan", "--config", EXAMPLE_CONFIG, "--event", str(tmp_path / "none.json")])
    assert status == 2
    assert "cannot read --event" in capsys.readouterr().err


@pytest.mark.parametrize("placement", ["-1", "first"])
def test_plan_refuses_a_placement_that_is_not_an_index(
    capsys: pytest.CaptureFixture[str], placement: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--config", EXAMPLE_CONFIG, "--event", "e.json", "--placement", placement])
    assert exited.value.code == 2
    assert "is not a placement index" in capsys.readouterr().err


# --- validate --------------------------------------------------------------------------------


def test_validate_the_example_config(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["validate", "--config", EXAMPLE_CONFIG])
    assert status == 0
    assert capsys.readouterr().out == "config OK: 10 routes, 8 templates\n"


def test_validate_json_of_the_example_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--config", EXAMPLE_CONFIG, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "config": EXAMPLE_CONFIG,
        "loaded": True,
        "routes": 10,
        "templates": 8,
        "error": None,
        "problems": [],
    }


def test_validate_a_config_whose_job_breaks_a_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "k80.yaml"
    config.write_text(K80_FLEX_CONFIG)
    status = main(["validate", "--config", str(config)])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert status == 1
    assert captured.err == ""
    assert lines[0].startswith(
        "templates.k80-flex.worker_pools[0].accelerator.type: flex-start-gpu: "
        "FLEX_START serves only"
    )
    assert lines[-1] == f"config {config}: 1 problem"


BROKEN_CONFIGS = [
    pytest.param(
        K80_FLEX_CONFIG.replace("count: 1", "count: lots"),
        "templates.k80-flex.worker_pools[0].accelerator.count",
        id="accelerator-count-not-a-number",
    ),
    pytest.param(
        K80_FLEX_CONFIG.replace("template: k80-flex", "template: k80-flexx"),
        "routes[0].template",
        id="route-names-an-unknown-template",
    ),
    pytest.param(
        K80_FLEX_CONFIG.replace("max_wait: 30m", "max_wait: soon"),
        "templates.k80-flex.placement[0].flex_start.max_wait",
        id="max-wait-not-a-duration",
    ),
]


@pytest.mark.parametrize(("text", "key_path"), BROKEN_CONFIGS)
def test_plan_of_a_broken_config_exits_1_naming_the_key_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, write_json, text: str, key_path: str
) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text(text)
    status = main(["plan", "--config", str(config), "--event", write_json(MARKER_EVENT)])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == ""
    assert captured.err.startswith(f"vertex-dispatch plan: error: config {config} has ")
    assert key_path in captured.err


@pytest.mark.parametrize(("text", "key_path"), BROKEN_CONFIGS)
def test_validate_reports_a_config_that_does_not_load_like_a_broken_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, key_path: str
) -> None:
    """One format for both: PATH: RULE: MESSAGE on stdout, a summary, exit 1."""
    config = tmp_path / "broken.yaml"
    config.write_text(text)
    status = main(["validate", "--config", str(config)])
    captured = capsys.readouterr()
    *problems, summary = captured.out.splitlines()
    assert status == 1
    assert captured.err == ""
    assert [line.partition(": config: ")[0] for line in problems] == [key_path]
    assert summary.startswith(f"config {config}: 1 problem; it does not load")


def test_validate_names_a_problem_of_the_whole_document_top_level(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("project: [acme-ml\n")
    assert main(["validate", "--config", str(config)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("(top level): config: YAML syntax error at line 2")


def test_validate_json_of_a_broken_config_lists_each_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text(K80_FLEX_CONFIG.replace("max_wait: 30m", "max_wait: soon"))
    assert main(["validate", "--config", str(config), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False
    assert document["loaded"] is False
    assert document["routes"] is None and document["error"] is None
    [problem] = document["problems"]
    assert problem == {
        "path": "templates.k80-flex.placement[0].flex_start.max_wait",
        "rule": "config",
        "message": problem["message"],
        "kind": "invalid",
        "field": None,
        "placements": [],
    }
    assert "not a duration" in problem["message"]


def test_validate_json_of_a_broken_rule_has_the_same_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "k80.yaml"
    config.write_text(K80_FLEX_CONFIG)
    assert main(["validate", "--config", str(config), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["ok"], document["loaded"], document["templates"]) == (False, True, 1)
    [problem] = document["problems"]
    assert problem == {
        "path": "templates.k80-flex.worker_pools[0].accelerator.type",
        "rule": "flex-start-gpu",
        "message": problem["message"],
        "kind": "invalid",
        "field": "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType",
        "placements": [0],
    }


def test_validate_a_missing_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    assert main(["validate", "--config", str(missing)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing to report on: the command itself failed
    assert captured.err.startswith(
        f"vertex-dispatch validate: error: config file {missing} does not exist"
    )


def test_validate_json_of_a_missing_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.yaml"
    assert main(["validate", "--config", str(missing), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["ok"], document["loaded"], document["problems"]) == (False, False, [])
    assert document["error"].startswith(f"config file {missing} does not exist")


def test_validate_needs_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["validate"])
    assert exited.value.code == 2
    assert "--config" in capsys.readouterr().err


# --- the installed console script ------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("validate", "vertex-dispatch validate --config examples/config.yaml"),
        ("plan", "vertex-dispatch plan --config examples/config.yaml --event"),
    ],
)
def test_the_console_script_shows_help_with_examples(command: str, expected: str) -> None:
    script = shutil.which("vertex-dispatch") or str(
        Path(__file__).resolve().parents[2] / ".venv" / "bin" / "vertex-dispatch"
    )
    result = subprocess.run([script, command, "--help"], capture_output=True, text=True, check=True)
    assert expected in result.stdout
    assert "Exit status:" in result.stdout
