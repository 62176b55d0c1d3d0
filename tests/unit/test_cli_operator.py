"""The operator subcommands' pure parts: the status table, and what they refuse without a config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.cli import main, status_table
from shared.ledger import Attempt, RetryPlan, Run, RunStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PARENT = "projects/acme-ml/locations/us-central1"


def run(status: RunStatus, *attempts: Attempt, **extra: object) -> Run:
    return Run(
        run_id="r-0123456789abcdef01234567",
        run_key="gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
        route="imagenet-daily",
        template="resnet-a100",
        trigger={},
        status=status,
        attempts=attempts,
        **extra,  # type: ignore[arg-type]
    )


def attempt(number: int, placement: dict[str, object], state: str, job: str | None) -> Attempt:
    return Attempt(
        number=number,
        placement=placement,
        region="us-central1",
        parent=PARENT,
        intent_at=NOW - timedelta(hours=1),
        job_name=f"{PARENT}/customJobs/{job}" if job else None,
        state=state,
    )


@pytest.mark.parametrize(
    ("the_run", "row"),
    [
        pytest.param(
            run(RunStatus.ACCEPTED),
            "r-0123456789abcdef01234567  ACCEPTED  resnet-a100  -  -  -  -  -  -",
            id="no-attempt-yet",
        ),
        pytest.param(
            run(
                RunStatus.RUNNING,
                attempt(1, {"persistent_resource": "a100-pool"}, "JOB_STATE_RUNNING", "42"),
            ),
            "r-0123456789abcdef01234567  RUNNING  resnet-a100  1  pool a100-pool  RUNNING  - - 42",
            id="running-on-a-pool",
        ),
        pytest.param(
            run(
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
            "us-east4  FAILED  #3 in 90s (infrastructure)  no_placement  43",
            id="waiting-for-its-backoff",
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
        run(RunStatus.ACCEPTED),
        run(RunStatus.RUNNING, attempt(1, {"persistent_resource": "p"}, "JOB_STATE_RUNNING", "7")),
    ]
    lines = status_table(runs, NOW).splitlines()

    assert lines[-1] == "2 runs"
    header, accepted, running = lines[:3]
    assert accepted.index("ACCEPTED") == running.index("RUNNING") == header.index("STATUS")
    assert accepted.index("resnet-a100") == running.index("resnet-a100") == header.index("TEMPLATE")


@pytest.mark.parametrize("argv", [["status"], ["retry", "r-x"], ["cancel", "r-x"]])
def test_operator_commands_need_a_config(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VERTEX_DISPATCH_CONFIG", raising=False)

    assert main(argv) == 1
    assert "pass --config FILE or set VERTEX_DISPATCH_CONFIG" in capsys.readouterr().err
