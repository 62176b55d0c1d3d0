"""The operator subcommands' pure parts: the status table, and what they refuse without a server.

Without a config, a well-formed run id or credentials, each command refuses in one line (or an
argparse usage error) before it reaches any Google Cloud service.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from cli_test_support import CREDENTIALS_FIX, EXAMPLE_CONFIG, VALID_RUN_ID, remove_credentials
from run_builders import NOW, PARENT, a_run, an_attempt

from shared.adapters import clients
from shared.adapters.ledger import Attempt, RetryPlan, Run, RunStatus
from shared.model.job_kinds import JobKind
from tooling import main, status_table


def attempt(number: int, placement: dict[str, object], state: str, job: str | None) -> Attempt:
    """Attempt ``number`` on ``placement``, claimed an hour ago; its job ``job`` (the id the
    table shows) in ``state``."""
    return an_attempt(
        number,
        placement=placement,
        intent_at=NOW - timedelta(hours=1),
        job_name=f"{PARENT}/customJobs/{job}" if job else None,
        state=state,
    )


@pytest.mark.parametrize(
    ("the_run", "row"),
    [
        pytest.param(
            a_run(RunStatus.ACCEPTED),
            "r-0123456789abcdef01234567  ACCEPTED  resnet-a100  -  -  -  -  -  -  -",
            id="no-attempt-yet",
        ),
        pytest.param(
            a_run(
                RunStatus.RUNNING,
                attempt(1, {"persistent_resource": "a100-pool"}, "JOB_STATE_RUNNING", "42"),
            ),
            "r-0123456789abcdef01234567  RUNNING  resnet-a100  1  pool a100-pool  RUNNING  - - "
            "CustomJob 42",
            id="running-on-a-pool",
        ),
        pytest.param(
            a_run(
                RunStatus.WAITING_RETRY,
                attempt(
                    2,
                    {"flex_start": {"max_wait": "21600s", "region": "us-east4"}},
                    "JOB_STATE_FAILED",
                    "43",
                ),
                alerts=("no_placement",),
                next_retry=RetryPlan(NOW + timedelta(seconds=90), 3, 0, "infrastructure"),
            ),
            "r-0123456789abcdef01234567  WAITING_RETRY  resnet-a100  2  flex_start 21600s "
            "us-east4  FAILED  #3 in 90s (infrastructure)  no_placement  CustomJob 43",
            id="waiting-for-its-backoff",
        ),
        pytest.param(
            a_run(
                RunStatus.WAITING_RETRY,
                alerts=(
                    "no_placement@2026-12-01T06:00:00Z/day0",
                    "no_placement@2026-12-01T06:00:00Z/day1",
                    "watchdog_overdue_wait@attempt1",
                ),
                next_retry=RetryPlan(NOW, 1, 0, "no placement could take the job"),
            ),
            "r-0123456789abcdef01234567  WAITING_RETRY  resnet-a100  -  -  -  "
            "#1 due (no placement could take the job)  no_placement,watchdog_overdue_wait  -  -",
            id="alert-claims-shown-by-reason",
        ),
        pytest.param(
            a_run(
                RunStatus.RUNNING,
                attempt(1, {"spot": {"region": "us-east4"}}, "JOB_STATE_RUNNING", "44"),
            ),
            "r-0123456789abcdef01234567  RUNNING  resnet-a100  1  spot us-east4  RUNNING  - - "
            "CustomJob 44",
            id="running-on-spot",
        ),
        pytest.param(
            a_run(
                RunStatus.RUNNING,
                attempt(
                    1,
                    {
                        "reservation": {
                            "name": "projects/acme-ml/zones/us-central1-a/reservations/a100-res",
                            "region": "us-central1",
                        }
                    },
                    "JOB_STATE_RUNNING",
                    "45",
                ),
            ),
            "r-0123456789abcdef01234567  RUNNING  resnet-a100  1  reservation a100-res "
            "us-central1  RUNNING  - - CustomJob 45",
            id="running-on-a-reservation",
        ),
        pytest.param(
            a_run(RunStatus.RUNNING, attempt(1, {"on_demand": {}}, "JOB_STATE_RUNNING", "46")),
            "r-0123456789abcdef01234567  RUNNING  resnet-a100  1  on_demand  RUNNING  - - "
            "CustomJob 46",
            id="running-on-demand",
        ),
        pytest.param(
            a_run(
                RunStatus.RUNNING,
                replace(
                    attempt(1, {"flex_start": {"max_wait": "3600s"}}, "JOB_STATE_RUNNING", None),
                    job_name=f"{PARENT}/hyperparameterTuningJobs/47",
                    job_kind=JobKind.HYPERPARAMETER_TUNING_JOB,
                ),
            ),
            "r-0123456789abcdef01234567  RUNNING  resnet-a100  1  flex_start 3600s  RUNNING  - - "
            "HyperparameterTuningJob 47",
            id="a-sweep-shows-its-kind",
        ),
        pytest.param(
            a_run(
                RunStatus.SUBMITTING,
                replace(
                    attempt(1, {"persistent_resource": "a100-pool"}, "INTENT", None),
                    job_kind=JobKind.TRAINING_PIPELINE,
                ),
            ),
            "r-0123456789abcdef01234567  SUBMITTING  resnet-a100  1  pool a100-pool  INTENT  - - "
            "TrainingPipeline -",
            id="a-pipeline-being-created-shows-its-kind",
        ),
    ],
)
def test_status_table_row(the_run: Run, row: str) -> None:
    header, line, footer = status_table([the_run], NOW).splitlines()

    assert header.split()[:3] == ["RUN", "STATUS", "TEMPLATE"]
    assert " ".join(line.split()) == " ".join(row.split())
    assert footer == "1 run"


def test_status_table_aligns_columns() -> None:
    runs = [
        a_run(RunStatus.ACCEPTED),
        a_run(
            RunStatus.RUNNING, attempt(1, {"persistent_resource": "p"}, "JOB_STATE_RUNNING", "7")
        ),
    ]
    lines = status_table(runs, NOW).splitlines()

    assert lines[-1] == "2 runs"
    header, accepted, running = lines[:3]
    assert accepted.index("ACCEPTED") == running.index("RUNNING") == header.index("STATUS")
    assert accepted.index("resnet-a100") == running.index("resnet-a100") == header.index("TEMPLATE")


@pytest.mark.parametrize("argv", [["status"], ["retry", VALID_RUN_ID], ["cancel", VALID_RUN_ID]])
def test_operator_commands_need_a_config(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VERTEX_DISPATCH_CONFIG", raising=False)

    assert main(argv) == 1
    assert "pass --config FILE or set VERTEX_DISPATCH_CONFIG" in capsys.readouterr().err


@pytest.fixture
def no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building any Google Cloud client fails the test: the command must refuse before."""

    def built(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a Google Cloud client was built")

    for name in ("firestore_client", "publisher_client", "job_service_client"):
        monkeypatch.setattr(clients, name, built)


@pytest.mark.parametrize("command", ["status", "retry", "cancel"])
@pytest.mark.parametrize(
    "run_id",
    [
        "bogus",
        "r-0123/abc",  # a slash would address a Firestore sub-collection: ValueError
        "r-0123456789ABCDEF01234567",  # upper case
        "r-0123456789abcdef0123456",  # 23 digits
        "0123456789abcdef01234567",
        "",
    ],
)
def test_a_malformed_run_id_is_a_usage_error_before_any_client(
    command: str,
    run_id: str,
    no_client: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("VERTEX_DISPATCH_CONFIG", raising=False)  # the id is checked first

    with pytest.raises(SystemExit) as exited:
        main([command, run_id, "--config", EXAMPLE_CONFIG])

    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"vertex-dispatch {command}: error: argument RUN: {run_id!r} is not a run id" in error
    assert "r- and 24 lowercase hex digits, e.g. r-0123456789abcdef01234567" in error


@pytest.fixture
def without_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    remove_credentials(monkeypatch)
    yield
    clients.forget_clients()


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["status"], "cannot read the run ledger (Firestore)"),
        (["status", "--json", "--all"], "cannot read the run ledger (Firestore)"),
        (
            ["retry", VALID_RUN_ID],
            "cannot read the run ledger (Firestore) or publish the retry (Pub/Sub)",
        ),
        (
            ["cancel", VALID_RUN_ID],
            "cannot read the run ledger (Firestore) or cancel the job (Vertex AI)",
        ),
    ],
)
def test_without_credentials_an_operator_command_says_so_in_one_line(
    argv: list[str], what: str, without_credentials: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--config", EXAMPLE_CONFIG]) == 1

    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"vertex-dispatch {argv[0]}: error: {what}: no usable Google Cloud")
    assert "Your default credentials were not found)" in line
    assert line.endswith(CREDENTIALS_FIX)
    assert captured.out == ""


def test_the_placements_table_shows_each_cooldown_and_how_long_it_has_left() -> None:
    from shared.model.cooldowns import Cooldown
    from tooling.operator import placements_table

    cooling = Cooldown(
        "spot|us-central1|a2-highgpu-1g",
        "spot",
        "us-central1",
        "a2-highgpu-1g",
        since=NOW - timedelta(minutes=5),
        until=NOW + timedelta(minutes=25),
        reason="Resources are insufficient in region: us-central1\n(preempted)",
        run_id="r-0123456789abcdef01234567",
    )
    ended = Cooldown(
        "flex_start|us-east4|a2-highgpu-1g",
        "flex_start",
        "us-east4",
        "a2-highgpu-1g",
        since=NOW - timedelta(hours=1),
        until=NOW - timedelta(minutes=30),
        reason="x" * 200,
    )

    lines = placements_table([cooling, ended], NOW).splitlines()

    assert lines[0].split() == [
        *("KIND", "REGION", "MACHINE", "COOLING", "UNTIL", "LEFT", "SINCE", "RUN", "REASON")
    ]
    assert lines[1].split()[:7] == [
        "spot",
        "us-central1",
        "a2-highgpu-1g",
        "2026-12-01T12:25:00Z",
        "25m00s",
        "2026-12-01T11:55:00Z",
        "r-0123456789abcdef01234567",
    ]
    assert "insufficient in region: us-central1 (preempted)" in lines[1]
    assert " ended " in lines[2] and lines[2].endswith("…")
    assert lines[-1].startswith("1 placement cooling down")
