"""examples/events/: each shipped event gets its verdict from `plan` against examples/config.yaml,
and the `plan` commands that README.md and `plan --help` print run as written."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from cli_test_support import EXAMPLE_CONFIG, REPO

from tooling import EXIT_NO_ROUTE, EXIT_OK, main
from tooling.linting import PLAN_EPILOG

EVENTS = REPO / "examples" / "events"
REQUESTS_TOPIC = "projects/acme-ml/topics/training-requests"

# file -> (verdict, route, template, exit status)
EXPECTED = {
    "success-marker.json": ("valid", "imagenet-daily", "resnet-a100", EXIT_OK),
    "shard.json": ("no_route", "", "", EXIT_NO_ROUTE),
    "export-shard.json": ("valid", "nightly-export", "llm-finetune", EXIT_OK),
    "job-request.json": ("valid", "on-request", "resnet-a100", EXIT_OK),
    "scheduler-tick.json": ("valid", "nightly", "resnet-a100", EXIT_OK),
    "llm-request.json": ("valid", "on-request", "llm-finetune", EXIT_OK),
    "sweep-marker.json": ("valid", "imagenet-sweep", "resnet-sweep", EXIT_OK),
    "pipeline-tick.json": ("valid", "weekly-pipeline", "resnet-pipeline", EXIT_OK),
}


def test_every_shipped_event_has_an_expected_verdict() -> None:
    assert sorted(path.name for path in EVENTS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plan_gives_each_example_event_its_verdict(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict, route, template, status = EXPECTED[name]
    event = EVENTS / name
    topic = ["--topic", REQUESTS_TOPIC] if "message" in json.loads(event.read_text()) else []

    code = main(["plan", "--config", EXAMPLE_CONFIG, "--event", str(event), *topic, "--json"])

    document = json.loads(capsys.readouterr().out)
    assert (document["verdict"], document["route"], document["template"], code) == (
        verdict,
        route,
        template,
        status,
    )


def test_plan_says_a_quiet_shard_waits_for_its_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    event = str(EVENTS / "export-shard.json")

    assert main(["plan", "--config", EXAMPLE_CONFIG, "--event", event]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert "dataset: gs://acme-datasets/exports/2026-12-01/ (date = 2026-12-01)" in lines
    assert any(line.startswith("waits: this object opens or joins the dataset") for line in lines)
    assert lines[-1] == (
        "verdict: valid: dispatch would record the dataset as waiting; once it is quiet, the job "
        "on placement[0] would be created if its live checks pass"
    )

    assert main(["plan", "--config", EXAMPLE_CONFIG, "--event", event, "--json"]) == EXIT_OK
    quiet = json.loads(capsys.readouterr().out)["quiet"]
    assert {key: quiet[key] for key in ("dataset_uri", "captures", "quiet_for", "min_objects")} == {
        "dataset_uri": "gs://acme-datasets/exports/2026-12-01/",
        "captures": {"date": "2026-12-01"},
        "quiet_for": "10m",
        "min_objects": 64,
    }


def _readme_plan_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^\.venv/bin/vertex-dispatch (plan .*)$", text, flags=re.MULTILINE)
    return [re.sub(r"\s*\[[^]]*\]", "", command) for command in commands]  # drop [--optional]


def _help_plan_commands() -> list[str]:
    text = PLAN_EPILOG.replace("\\\n", " ")
    return re.findall(r"^\s+vertex-dispatch (plan .*)$", text, flags=re.MULTILINE)


@pytest.mark.parametrize(
    "command",
    [
        *(pytest.param(c, id=f"README:{c}") for c in _readme_plan_commands()),
        *(pytest.param(c, id=f"help:{c}") for c in _help_plan_commands()),
    ],
)
def test_the_documented_plan_commands_run_as_written(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)  # the commands are written from the repository's root

    assert main(shlex.split(command)) == EXIT_OK
    assert "valid" in capsys.readouterr().out


def test_the_documents_name_only_shipped_events() -> None:
    named = {
        *re.findall(r"examples/events/([\w.-]+\.json)", (REPO / "README.md").read_text()),
        *re.findall(r"examples/events/([\w.-]+\.json)", PLAN_EPILOG),
        *re.findall(r"`([\w.-]+\.json)`", (EVENTS / "README.md").read_text()),
    }
    assert named == set(EXPECTED)
