"""Manifests that wait visibly: the reconciler, not a redelivery, starts a waiting manifest's run.

Dispatch opens the run of an incomplete manifest WAITING_DATA (the Cloud Storage emulator holds
the manifest and its files); each tick lists the files again, and the tick after the last one
lands publishes the first attempt on the requests topic, which dispatch turns into one job on
the Vertex AI emulator. A pin that does not hold keeps it waiting; data_timeout ends it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from cloudevents.http import CloudEvent
from reconcile_test_support import World, of_run

from emulator_stack import LOCAL_PROJECT, StorageEmulator
from shared.adapters import clients
from shared.adapters.config_source import load_config
from shared.adapters.ledger import RunStatus
from shared.handlers import manifest_waits
from shared.handlers.dispatch import dispatch_event
from shared.handlers.services import Services
from shared.model.alerts import AlertReason
from shared.model.data_waits import ManifestWait
from shared.model.results import DispatchOutcome
from shared.model.runkeys import dataset_run_key, run_id

CONFIG = Path(__file__).parent / "configs" / "manifests.yaml"
BUCKET = "reconcile-it-manifests"
GENERATION = 1733100000000000


@pytest.fixture
def manifests(world: World, storage_emulator: StorageEmulator) -> Iterator[World]:
    """``world`` with the manifest route's config (same ledger, clock and topics)."""
    storage = clients.storage_client(LOCAL_PROJECT)
    if storage.lookup_bucket(BUCKET) is None:
        storage.create_bucket(BUCKET)
    ledger = world.services.ledger
    world.services = Services(load_config(str(CONFIG)), now=world.vertex.now, _ledger=ledger)
    yield world


def _upload(name: str, data: bytes) -> None:
    clients.storage_client(LOCAL_PROJECT).bucket(BUCKET).blob(name).upload_from_string(data)


def _finalized(name: str) -> CloudEvent:
    return CloudEvent(
        {
            "type": "google.cloud.storage.object.v1.finalized",
            "source": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
            "subject": f"objects/{name}",
            "id": f"{GENERATION}-{name}",
            "time": "2026-12-01T02:00:00.000Z",
        },
        {
            "bucket": BUCKET,
            "name": name,
            "generation": str(GENERATION),
            "metageneration": "1",
            "size": "64",
        },
    )


def _open_waiting(world: World, directory: str, files: list[object]) -> str:
    """Write the manifest, deliver its event: the run is opened WAITING_DATA. Its id."""
    _upload(f"{directory}/manifest.json", json.dumps({"files": files}).encode())
    result = dispatch_event(_finalized(f"{directory}/manifest.json"), world.services)
    assert result.outcome is DispatchOutcome.WAITING_DATA, result
    assert result.run_id == run_id(dataset_run_key(BUCKET, directory, GENERATION))
    assert world.run(result.run_id).status is RunStatus.WAITING_DATA
    return result.run_id


def _wait(world: World, the_run_id: str) -> ManifestWait:
    wait = world.run(the_run_id).data_wait
    assert isinstance(wait, ManifestWait)
    return wait


def _uri(directory: str, name: str) -> str:
    return f"gs://{BUCKET}/{directory}/{name}"


def test_a_waiting_manifest_starts_one_job_on_the_tick_after_its_last_file_lands(
    manifests: World, fresh_name: Callable[[str], str]
) -> None:
    world = manifests
    directory = f"corpus/{fresh_name('corpus')}"
    _upload(f"{directory}/part-0.jsonl", b"{}\n")
    the_run_id = _open_waiting(world, directory, ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"])
    assert (_wait(world, the_run_id).files, _wait(world, the_run_id).missing) == (
        3,
        (_uri(directory, "part-1.jsonl"), _uri(directory, "part-2.jsonl")),
    )

    # Nothing new: the tick checks, finds the same files missing, and writes nothing.
    before = world.services.ledger.get_run(the_run_id)
    world.vertex.advance(60)
    world.reconcile()
    assert world.services.ledger.get_run(the_run_id) == before

    # One more file: the wait shows one missing.
    _upload(f"{directory}/part-1.jsonl", b"{}\n")
    world.vertex.advance(60)
    world.reconcile()
    wait = _wait(world, the_run_id)
    assert (wait.missing_count, wait.missing) == (1, (_uri(directory, "part-2.jsonl"),))
    assert wait.checked_at == world.vertex.now()
    assert world.run(the_run_id).status is RunStatus.WAITING_DATA
    assert of_run(world.retries.pull(), the_run_id) == []

    # The last file: the next tick makes the run ready and publishes its first attempt.
    _upload(f"{directory}/part-2.jsonl", b"{}\n")
    world.vertex.advance(60)
    world.reconcile()
    run = world.run(the_run_id)
    assert run.status is RunStatus.ACCEPTED
    assert isinstance(run.data_wait, ManifestWait) and run.data_wait.complete
    [retry] = of_run(world.retries.pull(), the_run_id)
    [started] = world.deliver_retries([retry])
    assert started.outcome is DispatchOutcome.SUBMITTED
    [create] = world.creates(the_run_id)
    args = create["request"]["customJob"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert f"--data=gs://{BUCKET}/{directory}/" in args["args"]

    # Later ticks and a redelivered manifest event start nothing more.
    world.reconcile()
    again = dispatch_event(_finalized(f"{directory}/manifest.json"), world.services)
    assert again.outcome is DispatchOutcome.DUPLICATE
    assert len(world.creates(the_run_id)) == 1
    assert of_run(world.retries.pull(), the_run_id) == []
    assert world.alerts.pull() == []


def test_a_pinned_file_whose_md5_differs_keeps_the_run_waiting(
    manifests: World, fresh_name: Callable[[str], str]
) -> None:
    world = manifests
    directory = f"corpus/{fresh_name('pinned')}"
    right = base64.b64encode(hashlib.md5(b"right\n").digest()).decode()
    _upload(f"{directory}/part-0.jsonl", b"wrong\n")
    the_run_id = _open_waiting(world, directory, [{"path": "part-0.jsonl", "md5": right}])
    [shown] = _wait(world, the_run_id).missing
    assert shown.startswith(_uri(directory, "part-0.jsonl") + " (md5 is ")
    assert shown.endswith(f", pinned {right})")

    world.vertex.advance(60)
    world.reconcile()
    assert world.run(the_run_id).status is RunStatus.WAITING_DATA

    _upload(f"{directory}/part-0.jsonl", b"right\n")
    world.vertex.advance(60)
    world.reconcile()
    assert world.run(the_run_id).status is RunStatus.ACCEPTED
    assert len(of_run(world.retries.pull(), the_run_id)) == 1


def test_a_manifest_never_complete_ends_failed_with_one_data_timeout_alert(
    manifests: World, fresh_name: Callable[[str], str]
) -> None:
    world = manifests
    directory = f"corpus/{fresh_name('never')}"
    the_run_id = _open_waiting(world, directory, ["part-0.jsonl"])
    timeout = world.services.config.data_timeout

    world.vertex.advance((timeout - timedelta(minutes=1)).total_seconds())
    world.reconcile()
    assert world.run(the_run_id).status is RunStatus.WAITING_DATA
    world.vertex.advance(60)
    world.reconcile()
    world.reconcile()

    run = world.run(the_run_id)
    assert run.status is RunStatus.FAILED
    [alert] = of_run(world.alerts.pull(), the_run_id)
    assert alert.body()["reason"] == AlertReason.DATA_TIMEOUT
    assert _uri(directory, "part-0.jsonl") in alert.body()["message"]
    assert of_run(world.retries.pull(), the_run_id) == []
    assert world.creates(the_run_id) == []


def test_a_waiting_manifest_deleted_ends_its_run_failed_with_one_alert(
    manifests: World, fresh_name: Callable[[str], str]
) -> None:
    world = manifests
    directory = f"corpus/{fresh_name('deleted')}"
    the_run_id = _open_waiting(world, directory, ["part-0.jsonl"])
    clients.storage_client(LOCAL_PROJECT).bucket(BUCKET).blob(f"{directory}/manifest.json").delete()

    world.reconcile()
    world.reconcile()

    assert world.run(the_run_id).status is RunStatus.FAILED
    [alert] = of_run(world.alerts.pull(), the_run_id)
    assert alert.body()["reason"] == AlertReason.INVALID_REQUEST
    assert "cannot be read any more" in alert.body()["message"]


def test_a_crowded_directory_is_not_listed_whole_its_files_are_read_one_by_one(
    manifests: World, fresh_name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of two objects: a directory of many objects beside the manifest's two files is
    # listed for at most (1 + 1) pages, then its files are read one by one. (Real pages are
    # 1,000 objects; the rule is the same.)
    monkeypatch.setattr(manifest_waits.manifests, "LIST_PAGE_OBJECTS", 2)
    directory = f"crowded/{fresh_name('d')}"
    for n in range(12):
        _upload(f"{directory}/other-{n:02d}", b"x")  # not in the manifest
    _upload(f"{directory}/a-wanted", b"a")  # no prefix in common with z-wanted: the listing
    # is of the whole directory, 15 objects, more than the 4 (2 pages of 2) it may show
    _upload(f"{directory}/manifest.json", json.dumps({"files": ["a-wanted", "z-wanted"]}).encode())
    manifest_uri = f"gs://{BUCKET}/{directory}/manifest.json"
    generation = (
        clients.storage_client(LOCAL_PROJECT)
        .bucket(BUCKET)
        .get_blob(f"{directory}/manifest.json")
        .generation
    )

    waiting = manifest_waits.check_files(manifest_uri, generation)
    _upload(f"{directory}/z-wanted", b"z")
    complete = manifest_waits.check_files(manifest_uri, generation)

    assert waiting.missing == (f"gs://{BUCKET}/{directory}/z-wanted",)
    assert complete.missing == ()
    # One page cut short (one call), then the two files read one by one.
    assert waiting.list_calls == complete.list_calls == 1 + 2
