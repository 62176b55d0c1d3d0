"""Cloud Storage arrivals through on_object_finalized: datasets start exactly one job.

A marker completes its directory (shards match nothing and cost nothing); a manifest completes
its dataset only once every file it lists exists: an incomplete one is recorded WAITING_DATA and
acknowledged (the reconciler starts it: tests/integration/reconcile/test_reconcile_manifests.py).
Redeliveries, sequential or concurrent, never make a second CreateCustomJob.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from cloudevents.http import CloudEvent
from dispatch_test_support import (
    DATASETS_BUCKET,
    MANIFESTS_BUCKET,
    AlertsReader,
    FunctionUrls,
    VertexAdmin,
    deliver_binary,
    deliver_structured,
    deliver_until_acknowledged,
    object_finalized,
)

from shared.adapters import clients
from shared.adapters.ledger import Ledger, RunStatus
from shared.model.alerts import AlertReason
from shared.model.data_waits import ManifestWait
from shared.model.runkeys import dataset_run_key, run_id

GENERATION = 1733100000000000
SHARDS = 200


def _dataset_run_id(bucket: str, directory: str, generation: int = GENERATION) -> str:
    return run_id(dataset_run_key(bucket, directory, generation))


def test_a_dataset_of_many_shards_starts_one_flex_start_job_on_its_marker(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    directory = f"datasets/{fresh_name('imagenet')}"
    shards = [
        object_finalized(DATASETS_BUCKET, f"{directory}/part-{n:05d}.tfrecord", GENERATION + n)
        for n in range(SHARDS)
    ]
    # Eventarc uses either content mode: half the shards come in each.
    deliveries = [
        (deliver_binary if n % 2 else deliver_structured, functions.object_finalized, shard)
        for n, shard in enumerate(shards)
    ]
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda d: d[0](d[1], d[2]), deliveries))
    assert statuses == [200] * SHARDS
    assert vertex.created_jobs() == []

    marker = object_finalized(DATASETS_BUCKET, f"{directory}/_SUCCESS", GENERATION, size=0)
    assert deliver_binary(functions.object_finalized, marker) == 200

    the_run_id = _dataset_run_id(DATASETS_BUCKET, directory)
    [created] = vertex.created_jobs()
    assert created["labels"]["vd-run"] == the_run_id
    assert created["labels"]["vd-attempt"] == "1"
    assert created["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"
    assert created["jobSpec"]["scheduling"]["maxWaitDuration"] == "7200s"
    args = created["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert f"--data=gs://{DATASETS_BUCKET}/{directory}/" in args
    [job] = vertex.jobs(the_run_id)
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.SUBMITTED
    assert [(a.number, a.job_name) for a in run.attempts] == [(1, job["name"])]
    assert run.attempts[0].placement == {"flex_start": {"max_wait": "7200s"}}
    assert alerts.pull() == []


def _deliver_concurrently(url: str, event: CloudEvent, times: int) -> list[list[int]]:
    """``times`` deliveries at once, each delivered again after a 500 as the platform does."""
    if times == 0:
        return []
    with ThreadPoolExecutor(times) as pool:
        return list(
            pool.map(lambda _: deliver_until_acknowledged(deliver_binary, url, event), range(times))
        )


@pytest.mark.parametrize(
    ("sequential_before", "concurrent", "sequential_after"),
    [
        pytest.param(3, 0, 0, id="three redeliveries in a row"),
        pytest.param(0, 8, 0, id="eight deliveries at once"),
        pytest.param(1, 8, 2, id="once, eight at once, then twice more"),
    ],
)
def test_a_redelivered_marker_makes_one_job(
    sequential_before: int,
    concurrent: int,
    sequential_after: int,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    directory = f"datasets/{fresh_name('redelivered')}"
    marker = object_finalized(DATASETS_BUCKET, f"{directory}/_SUCCESS", GENERATION, size=0)
    url = functions.object_finalized

    answers = [[deliver_binary(url, marker)] for _ in range(sequential_before)]
    answers += _deliver_concurrently(url, marker, concurrent)
    answers += [[deliver_binary(url, marker)] for _ in range(sequential_after)]

    # A 500 is AttemptInProgress or a lost compare-and-set: the platform delivers again.
    assert all(statuses[-1] == 200 for statuses in answers), answers
    assert all(set(statuses) <= {200, 500} for statuses in answers), answers
    the_run_id = _dataset_run_id(DATASETS_BUCKET, directory)
    assert len(vertex.created_jobs(the_run_id)) == 1
    [job] = vertex.jobs(the_run_id)
    run = ledger.get_run(the_run_id).run
    assert [(a.number, a.job_name) for a in run.attempts] == [(1, job["name"])]


def _upload(bucket: str, name: str, data: bytes) -> None:
    clients.storage_client().bucket(bucket).blob(name).upload_from_string(data)


def test_an_incomplete_manifest_is_recorded_waiting_and_acknowledged(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    datasets_buckets: tuple[str, str],
    fresh_name: Callable[[str], str],
) -> None:
    directory = f"corpus/{fresh_name('corpus')}"
    files = ["part-00000.jsonl", "part-00001.jsonl", f"gs://{MANIFESTS_BUCKET}/shared/vocab.txt"]
    _upload(MANIFESTS_BUCKET, f"{directory}/manifest.json", b'{"files": %s}' % _json(files))
    _upload(MANIFESTS_BUCKET, f"{directory}/part-00000.jsonl", b"{}\n")
    manifest = object_finalized(MANIFESTS_BUCKET, f"{directory}/manifest.json", GENERATION)

    # Acknowledged at once: the run is in the ledger while it waits, not in the platform's
    # redelivery queue.
    assert deliver_structured(functions.object_finalized, manifest) == 200
    the_run_id = _dataset_run_id(MANIFESTS_BUCKET, directory)
    run = ledger.get_run(the_run_id).run
    assert run.status is RunStatus.WAITING_DATA
    wait = run.data_wait
    assert isinstance(wait, ManifestWait)
    assert wait.since == wait.checked_at and wait.since <= run.created_at
    assert wait == ManifestWait(
        manifest_uri=f"gs://{MANIFESTS_BUCKET}/{directory}/manifest.json",
        files=3,
        missing_count=2,
        missing=(
            f"gs://{MANIFESTS_BUCKET}/{directory}/part-00001.jsonl",
            f"gs://{MANIFESTS_BUCKET}/shared/vocab.txt",
        ),
        since=wait.since,
        checked_at=wait.since,
    )

    # A redelivery, even once the files are there, finds the run and does nothing more: the
    # reconciler starts it (tests/integration/reconcile/test_reconcile_manifests.py).
    _upload(MANIFESTS_BUCKET, f"{directory}/part-00001.jsonl", b"{}\n")
    _upload(MANIFESTS_BUCKET, "shared/vocab.txt", b"the\n")
    assert deliver_binary(functions.object_finalized, manifest) == 200
    assert ledger.get_run(the_run_id).run == run
    assert vertex.create_calls() == []
    assert alerts.pull() == []


def test_a_manifest_whose_files_all_exist_starts_its_job_at_once(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    datasets_buckets: tuple[str, str],
    fresh_name: Callable[[str], str],
) -> None:
    directory = f"corpus/{fresh_name('corpus')}"
    _upload(MANIFESTS_BUCKET, f"{directory}/part-00000.jsonl", b"{}\n")
    _upload(MANIFESTS_BUCKET, f"{directory}/part-00001.jsonl", b"{}\n")
    manifest_text = b'{"files": ["part-00000.jsonl", {"path": "part-00001.jsonl", "size": 3}]}'
    _upload(MANIFESTS_BUCKET, f"{directory}/manifest.json", manifest_text)
    manifest = object_finalized(MANIFESTS_BUCKET, f"{directory}/manifest.json", GENERATION)

    assert deliver_structured(functions.object_finalized, manifest) == 200
    assert deliver_structured(functions.object_finalized, manifest) == 200

    the_run_id = _dataset_run_id(MANIFESTS_BUCKET, directory)
    [created] = vertex.created_jobs()
    assert created["labels"]["vd-run"] == the_run_id
    args = created["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert f"--data=gs://{MANIFESTS_BUCKET}/{directory}/" in args
    run = ledger.get_run(the_run_id).run
    assert (run.status, run.data_wait) == (RunStatus.SUBMITTED, None)
    assert alerts.pull() == []


@pytest.mark.parametrize(
    ("manifest", "names"),
    [
        pytest.param(b'{"files": []}', "lists no files", id="a manifest listing nothing"),
        pytest.param(b'{"files": ["../escape.jsonl"]}', "escape.jsonl", id="an entry outside"),
        pytest.param(b'{"files": ["a.jsonl",]}', "is not valid JSON", id="not JSON"),
        pytest.param(b"part-0\n", "is not valid JSON", id="a manifest.json of lines"),
        pytest.param(
            b'{"files": ["gs://dispatch-it-datasets/a.jsonl"]}',
            "outside the manifest's bucket",
            id="a file of another bucket",
        ),
        pytest.param(None, "does not exist", id="a manifest deleted before delivery"),
    ],
)
def test_a_manifest_that_cannot_be_read_is_rejected_and_alerted_once(
    manifest: bytes | None,
    names: str,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    datasets_buckets: tuple[str, str],
    fresh_name: Callable[[str], str],
) -> None:
    directory = f"corpus/{fresh_name('corpus')}"
    if manifest is not None:
        _upload(MANIFESTS_BUCKET, f"{directory}/manifest.json", manifest)
    event = object_finalized(MANIFESTS_BUCKET, f"{directory}/manifest.json", GENERATION)

    # Permanent: acknowledged at once, however often delivered (the redelivery has the event's
    # id, so it finds the same REJECTED run and alerts no more), never a retry storm.
    assert deliver_binary(functions.object_finalized, event) == 200
    assert deliver_structured(functions.object_finalized, event) == 200

    assert vertex.create_calls() == []
    [alert] = alerts.pull()
    assert alert["body"]["reason"] == AlertReason.INVALID_REQUEST
    assert names in alert["body"]["message"]
    assert ledger.get_run(alert["body"]["run_id"]).run.status is RunStatus.REJECTED


def _json(files: list[str]) -> bytes:
    import json

    return json.dumps(files).encode()
