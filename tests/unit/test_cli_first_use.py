"""What a newcomer meets first with `vertex-dispatch`: one clear line, never a traceback.

A `gs://` config without credentials, output piped into `head`, a retry message planned, the
demo's help, and the wording of two config and job messages.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_test_support import CREDENTIALS_FIX, EXAMPLE_CONFIG, REPO, VALID_RUN_ID, remove_credentials

from shared.adapters import clients
from tooling import main

GS_CONFIG = "gs://acme-config/vertex-dispatch.yaml"


@pytest.fixture
def without_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    remove_credentials(monkeypatch)
    yield
    clients.forget_clients()


# --- a gs:// config without credentials ------------------------------------------------------


@pytest.mark.parametrize("command", ["validate", "deploy-plan", "plan"])
def test_a_gs_config_without_credentials_is_one_line(
    command: str,
    without_credentials: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    event = tmp_path / "event.json"
    event.write_text("{}")
    extra = ["--event", str(event)] if command == "plan" else []

    assert main([command, "--config", GS_CONFIG, *extra]) == 1

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"vertex-dispatch {command}: error: cannot read the config {GS_CONFIG}: no usable Google "
        f"Cloud credentials (Your default credentials were not found); {CREDENTIALS_FIX}"
    ]


@pytest.mark.parametrize("command", ["validate", "deploy-plan"])
def test_a_gs_config_without_credentials_still_answers_json(
    command: str, without_credentials: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--config", GS_CONFIG, "--json"]) == 1

    captured = capsys.readouterr()
    document = json.loads(captured.out)  # the shape a config that does not load has
    assert document["ok"] is False and document["config"] == GS_CONFIG
    problems = "problems" if command == "validate" else "config_problems"
    assert document[problems] == []
    assert document["error"].startswith(f"cannot read the config {GS_CONFIG}: no usable Google")
    assert document["error"].endswith(CREDENTIALS_FIX)
    assert captured.err == ""


def test_deploy_plan_tfvars_needs_a_local_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "vars.json"
    assert main(["deploy-plan", "--config", GS_CONFIG, "--tfvars", str(out)]) == 2
    assert "--tfvars needs a local config file" in capsys.readouterr().err
    assert not out.exists()


# --- output into a pipe that closes ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "--config", EXAMPLE_CONFIG],
        ["deploy-plan", "--config", EXAMPLE_CONFIG, "--json"],
    ],
)
def test_a_reader_that_leaves_ends_the_command_quietly(argv: list[str]) -> None:
    """As `status --all | head`: the reader is gone before the command writes anything."""
    command = subprocess.Popen(
        [sys.executable, "-m", "tooling", *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert command.stdout is not None and command.stderr is not None
    command.stdout.close()  # long before the interpreter has imported the CLI
    error = command.stderr.read().decode()
    exit_code = command.wait(timeout=60)

    assert error == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert exit_code == 141  # 128 + SIGPIPE: the output was cut, not a verdict (1 is one)


# --- plan of a retry message -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "described"), [("", "attempt 2"), ("capacity", "attempt 2 (capacity)")]
)
def test_plan_of_a_retry_message_shows_its_reason_only_when_it_has_one(
    reason: str, described: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = {"run_id": VALID_RUN_ID, "attempt": 2, "placement_index": 0, "reason": reason}
    event = tmp_path / "retry.json"
    event.write_text(
        json.dumps(
            {
                "message": {
                    "data": base64.b64encode(json.dumps(body).encode()).decode(),
                    "attributes": {"vertex_dispatch_kind": "retry"},
                    "messageId": "9876543210",
                    "publishTime": "2026-12-01T02:00:03.412Z",
                },
                "subscription": "projects/acme-ml/subscriptions/push-requests",
            }
        )
    )

    status = main(
        [
            "plan",
            "--config",
            EXAMPLE_CONFIG,
            "--event",
            str(event),
            "--topic",
            "projects/acme-ml/topics/training-requests",
        ]
    )

    first = capsys.readouterr().out.splitlines()[0]
    assert status == 2  # a retry message continues a run: only the ledger can plan it
    assert first == f"event: retry of run {VALID_RUN_ID}, {described}"


# --- the demo's help -------------------------------------------------------------------------


def test_demo_help_lists_the_eleven_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--help"])

    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "short story" not in text
    assert "eleven scenarios" in text
    for number in range(1, 12):
        assert f"{number:>3}. " in text
    assert "SIGTERM" in text


# --- message wording -------------------------------------------------------------------------


MINIMAL_CONFIG = """\
project: acme-ml
region: us-central1
alerts_topic: training-alerts
routes:
  - name: legacy
    gcs: {bucket: acme-datasets, match: "legacy/*/_SUCCESS"}
    template: legacy
templates:
  legacy:
    worker_pools:
      - machine_type: MACHINE
        accelerator: {type: NVIDIA_TESLA_K80, count: 1}
        image: us-docker.pkg.dev/acme-ml/train/legacy:1.0
    placement: [{persistent_resource: legacy-pool}]
"""


def test_an_unknown_key_with_no_close_match_reads_as_a_sentence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(MINIMAL_CONFIG.replace("MACHINE", "n1-standard-4") + "outcome_rules: {}\n")

    assert main(["validate", "--config", str(config)]) == 1

    report = capsys.readouterr().out
    assert "outcome_rules: config: unknown key 'outcome_rules'; allowed here: alert_webhook, " in (
        report
    )


def test_a_k80_on_an_a2_machine_is_pointed_at_n1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(MINIMAL_CONFIG.replace("MACHINE", "a2-highgpu-1g"))

    assert main(["validate", "--config", str(config)]) == 1

    [problem] = [line for line in capsys.readouterr().out.splitlines() if "comes with" in line]
    assert problem.endswith(
        "a2-highgpu-1g comes with NVIDIA_TESLA_A100, not NVIDIA_TESLA_K80; set acceleratorType "
        "to NVIDIA_TESLA_A100, or for NVIDIA_TESLA_K80 pick an n1-* machine type "
        "(e.g. n1-standard-8) and attach it there"
    )
    assert "none" not in problem
