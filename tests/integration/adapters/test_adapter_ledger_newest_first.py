"""``Ledger.list_runs(newest_first=True)`` and ``vertex-dispatch status --limit``: the newest runs,
ordered by the Firestore query itself, when the ledger holds more runs than the limit."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.ledger import Ledger, Run, RunStatus
from tooling import main
from tooling import operator as operator_cli

EXAMPLE_CONFIG = Path(__file__).resolve().parents[3] / "examples" / "config.yaml"
T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
RUNS = 12
LIMIT = 5


def _stepping_clock() -> Callable[[], datetime]:
    """A clock one minute later at each call: every write has its own time."""
    ticks: Iterator[int] = iter(range(10_000))
    return lambda: T0 + timedelta(minutes=next(ticks))


def _run(run_id: str) -> Run:
    return Run(
        run_id=run_id,
        run_key=f"pubsub:training-requests/{run_id}",
        route="on-request",
        template="resnet-a100",
        trigger={"kind": "MessagePublished", "message_id": run_id},
        params={"dataset_uri": "gs://acme-datasets/imagenet/2026-12-01/"},
    )


@pytest.fixture
def stepped_ledger(
    firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]
) -> Ledger:
    return Ledger(
        clients.firestore_client(LOCAL_PROJECT),
        collection=fresh_name("runs"),
        clock=_stepping_clock(),
    )


def _open_runs(ledger: Ledger, statuses: list[RunStatus]) -> list[str]:
    """Open one run per status, oldest first; their ids sort in no relation to that order (the
    unordered query returns runs by document id), so only an ordered query finds the newest."""
    ids = [f"r-{number:024x}" for number in random.Random(7).sample(range(10**6), len(statuses))]
    for run_id, status in zip(ids, statuses, strict=True):
        ledger.open_run(replace(_run(run_id), status=status))
    return ids


def test_list_runs_newest_first_returns_the_newest_runs_of_the_statuses_in_order(
    stepped_ledger: Ledger,
) -> None:
    statuses = [RunStatus.SUCCEEDED if i % 3 == 0 else RunStatus.SUBMITTED for i in range(RUNS)]
    ids = _open_runs(stepped_ledger, statuses)
    opened = list(zip(ids, statuses, strict=True))
    submitted_newest_first = [i for i, status in opened[::-1] if status is RunStatus.SUBMITTED]
    assert len(submitted_newest_first) > LIMIT

    listed = stepped_ledger.list_runs([RunStatus.SUBMITTED], limit=LIMIT, newest_first=True)

    assert [snapshot.run.run_id for snapshot in listed] == submitted_newest_first[:LIMIT]


def test_list_runs_newest_first_over_every_status(stepped_ledger: Ledger) -> None:
    ids = _open_runs(stepped_ledger, [RunStatus.SUBMITTED, RunStatus.FAILED] * (RUNS // 2))

    listed = stepped_ledger.list_runs(list(RunStatus), limit=LIMIT, newest_first=True)

    assert [snapshot.run.run_id for snapshot in listed] == ids[::-1][:LIMIT]


def test_status_limit_shows_the_newest_runs(
    stepped_ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = _open_runs(stepped_ledger, [RunStatus.RUNNING] * RUNS)
    monkeypatch.setattr(operator_cli, "_operator_ledger", lambda config: stepped_ledger)

    code = main(["status", "--config", str(EXAMPLE_CONFIG), "--limit", str(LIMIT), "--json"])

    assert code == 0
    shown = [run["run_id"] for run in json.loads(capsys.readouterr().out)["runs"]]
    assert shown == ids[::-1][:LIMIT]
