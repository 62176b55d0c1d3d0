"""`vertex-dispatch status` on the emulators for runs WAITING_DATA: the objects of a quiet dataset
counted live in the Cloud Storage emulator, a manifest's missing files from the ledger, and a
dataset whose bucket cannot be read shown from the ledger with the reason.

The runs are opened directly through the ledger (Firestore emulator), as dispatch opens them
(key ``dataset_version_run_key(bucket, prefix, 1)``, a ``QuietWait``). The config is built in code
and handed to the command in place of loading ``--config``: the loader of ``completion: quiet`` is
built beside this (issue 16); once it is in, a YAML file can replace ``_config_in_code``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta

import pytest

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator, StorageEmulator
from shared.adapters import clients, storage
from shared.adapters.ledger import DEFAULT_COLLECTION, Ledger
from shared.config.model import Completion, Config, GcsRoute, QuietRule
from shared.model import runkeys
from shared.model.data_waits import ManifestWait, QuietWait
from shared.model.runs import Run, RunStatus, utc_now
from tooling import main

ROUTE = "exports-quiet"
MATCH = "exports/*/part-*.parquet"
RULE = QuietRule("exports/{date}/", quiet_for=timedelta(minutes=10), min_objects=5)
SHARDS = 1_005  # more than one listing page (1,000)


def quiet_config(bucket: str) -> Config:
    return Config(
        project=LOCAL_PROJECT,
        region="us-central1",
        source="status-it (in code)",
        alerts_topic="status-it-alerts",
        routes=(GcsRoute(ROUTE, bucket, MATCH, "train", Completion.QUIET, quiet=RULE),),
    )


@pytest.fixture
def ledger(clean_firestore: FirestoreEmulator) -> Ledger:
    """The ledger the CLI reads: the default runs collection of the local project."""
    return Ledger(clients.firestore_client(LOCAL_PROJECT), DEFAULT_COLLECTION)


@pytest.fixture
def use_config(monkeypatch: pytest.MonkeyPatch) -> Callable[[Config], None]:
    def use(config: Config) -> None:
        monkeypatch.setattr("tooling.operator.load_config_or_report", lambda *_a, **_k: config)

    return use


def open_waiting(ledger: Ledger, bucket: str, prefix: str, route: str = ROUTE) -> Run:
    key = runkeys.dataset_version_run_key(bucket, prefix, 1)
    wait = QuietWait(f"gs://{bucket}/{prefix}", version=1, since=utc_now(), latest_version=1)
    run = Run(
        run_id=runkeys.run_id(key),
        run_key=key,
        route=route,
        template="train",
        trigger={"kind": "ObjectFinalized", "bucket": bucket, "name": f"{prefix}part-0.parquet"},
        status=RunStatus.WAITING_DATA,
        data_wait=wait,
    )
    snapshot, created = ledger.open_run(run)
    assert created
    return snapshot.run


def status(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["status", *argv, "--config", "status-it.yaml"])
    return code, capsys.readouterr().out


def test_status_counts_a_waiting_dataset_live_and_says_when_it_completes(
    ledger: Ledger,
    storage_emulator: StorageEmulator,
    fresh_name: Callable[[str], str],
    use_config: Callable[[Config], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("status"))
    prefix = "exports/2026-12-01/"
    for n in range(SHARDS):
        bucket.blob(f"{prefix}part-{n:05d}.parquet").upload_from_string(b"x")
    bucket.blob(f"{prefix}_tmp/scratch").upload_from_string(b"x")  # not matched: not counted
    newest = max(o.updated for o in storage.list_objects(bucket.name, prefix))
    use_config(quiet_config(bucket.name))
    waiting = open_waiting(ledger, bucket.name, prefix)
    manifest_key = "gcs:other/m.json@1"
    ledger.open_run(
        Run(
            run_id=runkeys.run_id(manifest_key),
            run_key=manifest_key,
            route="manifests",
            template="train",
            trigger={},
            status=RunStatus.WAITING_DATA,
            data_wait=ManifestWait(
                "gs://other/m.json", 4, 1, ("gs://other/part-3",), since=utc_now()
            ),
        )
    )
    accepted = Run("r-ffffffffffffffffffffffff", "k", ROUTE, "train", {})
    ledger.open_run(accepted)

    code, table = status(["--waiting"], capsys)
    json_code, printed = status(["--waiting", "--json"], capsys)

    assert code == json_code == 0
    lines = table.splitlines()
    assert lines[-1] == "2 runs, 2 waiting for data"
    assert accepted.run_id not in table
    row = next(i for i, line in enumerate(lines) if line.startswith(waiting.run_id))
    assert lines[row + 1] == (
        f"  dataset gs://{bucket.name}/{prefix} (version 1), waiting since "
        f"{waiting.data_wait.since.isoformat(timespec='seconds').replace('+00:00', 'Z')}"  # type: ignore[union-attr]
    )
    complete_at = (newest + RULE.quiet_for).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert lines[row + 2].startswith(f"  {SHARDS} objects, newest written ")
    assert re.search(
        rf"; complete at {complete_at} \(in \d+m\d\ds\) if nothing more", lines[row + 2]
    )
    assert "  manifest gs://other/m.json, waiting since " in table
    assert "1 of 4 files missing (not checked yet)" in table
    assert "  missing gs://other/part-3" in table
    documents = {run["run_id"]: run for run in json.loads(printed)["runs"]}
    found = documents[waiting.run_id]["waiting_for"]
    assert found["listed"] is True
    assert found["objects"] == SHARDS
    assert found["complete_at"] == complete_at
    assert found["min_objects"] == 5 and found["quiet_for_seconds"] == 600


def test_a_dataset_whose_bucket_cannot_be_read_is_shown_from_the_ledger_with_why(
    ledger: Ledger,
    storage_emulator: StorageEmulator,
    fresh_name: Callable[[str], str],
    use_config: Callable[[Config], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    bucket = fresh_name("status-gone")  # never created
    use_config(quiet_config(bucket))
    waiting = open_waiting(ledger, bucket, "exports/2026-12-02/")
    named = open_waiting(ledger, bucket, "exports/2026-12-03/", route="no-such-route")

    code, table = status([waiting.run_id, named.run_id], capsys)

    assert code == 0
    assert (
        f"  objects not counted (Cloud Storage not read: gs://{bucket}/exports/2026-12-02/ does "
        "not exist): the ledger keeps no count"
    ) in table.splitlines()
    assert (
        "  objects not counted (route 'no-such-route' is not in config status-it (in code)): "
        "the ledger keeps no count"
    ) in table.splitlines()
