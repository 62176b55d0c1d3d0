"""End to end on the local stack: triggers go in through the bucket and the requests topic only."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable

import pytest

from emulator_stack.local_stack import LocalStack
from emulator_stack.observe import TopicReader, VertexAdmin, upload_object
from shared.adapters.ledger import Ledger, Run, RunStatus

pytestmark = pytest.mark.integration

WAIT_SECONDS = 30.0


def wait_for_run(ledger: Ledger, which: Callable[[Run], bool], done: Callable[[Run], bool]) -> Run:
    deadline = time.monotonic() + WAIT_SECONDS
    last: Run | None = None
    while time.monotonic() < deadline:
        runs = [snapshot.run for snapshot in ledger.list_runs(list(RunStatus), limit=500)]
        last = next((run for run in runs if which(run)), last)
        if last is not None and done(last):
            return last
        time.sleep(0.3)
    raise AssertionError(f"run not done within {WAIT_SECONDS:g} s; last seen: {last}")


def publish(stack: LocalStack, body: dict[str, object]) -> str:
    topic = stack.config.requests_topic or ""
    return stack.pubsub.publish(topic, json.dumps(body).encode(), {"kind": "train"})


def by_message(message_id: str) -> Callable[[Run], bool]:
    return lambda run: run.run_key == f"request-message:{message_id}"


def test_a_marker_among_shards_starts_exactly_one_flex_start_job(
    local_stack: LocalStack, ledger: Ledger, vertex: VertexAdmin
) -> None:
    prefix = "imagenet/e2e-2026-12-02"
    for index in range(5):
        upload_object(local_stack.storage.url, "demo-datasets", f"{prefix}/s-{index}", b"x")
    upload_object(local_stack.storage.url, "demo-datasets", f"{prefix}/_SUCCESS", b"\n")

    # Wait for the job's name, not just the claim: the job is created after the intent is written.
    run = wait_for_run(
        ledger,
        lambda r: f"/{prefix}/" in r.run_key,
        lambda r: bool(r.attempts) and r.attempts[0].job_name is not None,
    )

    jobs = [j for j in vertex.created_jobs() if j.get("labels", {}).get("vd-run") == run.run_id]
    assert len(jobs) == 1
    assert jobs[0]["jobSpec"]["scheduling"]["strategy"] in ("FLEX_START", 6)


@pytest.mark.parametrize(
    ("template", "final_statuses", "attempt_regions", "alert_reason"),
    [
        # No H100 in us-central1: the 20m wait expires, the next placement is us-east4.
        ("llm-h100", {"RUNNING", "SUCCEEDED"}, ["us-central1", "us-east4"], None),
        # User code fails twice; the policy allows one user-code retry, then alerts.
        ("flaky-eval", {"FAILED"}, ["us-central1", "us-central1"], "retries_exhausted"),
    ],
)
def test_a_request_ends_as_its_failure_class_says(
    local_stack: LocalStack,
    ledger: Ledger,
    alerts: TopicReader,
    template: str,
    final_statuses: set[str],
    attempt_regions: list[str],
    alert_reason: str | None,
) -> None:
    message_id = publish(
        local_stack, {"template": template, "params": {"dataset_uri": f"gs://d/{template}/"}}
    )

    run = wait_for_run(ledger, by_message(message_id), lambda r: r.status.value in final_statuses)

    assert [attempt.region for attempt in run.attempts] == attempt_regions
    if alert_reason is not None:
        deadline = time.monotonic() + 10
        while alerts.find(lambda a: a.get("run_id") == run.run_id) is None:
            assert time.monotonic() < deadline, "no alert for the run"
            time.sleep(0.3)
        alert = alerts.find(lambda a: a.get("run_id") == run.run_id)
        assert alert is not None and alert["reason"] == alert_reason


def test_an_invalid_request_is_rejected_alerted_and_creates_nothing(
    local_stack: LocalStack, ledger: Ledger, alerts: TopicReader, vertex: VertexAdmin
) -> None:
    message_id = publish(local_stack, {"template": "resnet-a100", "params": {"image": "evil"}})

    run = wait_for_run(ledger, by_message(message_id), lambda r: r.status == RunStatus.REJECTED)

    deadline = time.monotonic() + 10
    while alerts.find(lambda a: a.get("run_id") == run.run_id) is None:
        assert time.monotonic() < deadline, "no alert for the rejected run"
        time.sleep(0.3)
    assert run.attempts == ()
    # Other tests' runs keep the stack busy (fallbacks, retries): count this run's creates only.
    creates_for_run = [
        entry
        for entry in vertex.requests("CreateCustomJob")
        if entry["request"]["customJob"].get("labels", {}).get("vd-run") == run.run_id
    ]
    assert creates_for_run == []


def test_a_full_reservation_is_skipped_and_a_preempted_spot_job_moves_on_to_on_demand(
    local_stack: LocalStack, ledger: Ledger, vertex: VertexAdmin
) -> None:
    reservation = "projects/local-project/zones/us-central1-a/reservations/a100-80gb"
    holder_id = publish(
        local_stack, {"template": "bert-reserved", "params": {"dataset_uri": "gs://d/bert-1/"}}
    )
    holder = wait_for_run(ledger, by_message(holder_id), lambda r: r.status == RunStatus.RUNNING)
    assert holder.attempts[0].skips == ()
    held = vertex.job(holder.attempts[0].job_name or "")["jobSpec"]["workerPoolSpecs"][0]
    assert held["machineSpec"]["reservationAffinity"]["values"] == [reservation]

    message_id = publish(
        local_stack, {"template": "bert-reserved", "params": {"dataset_uri": "gs://d/bert-2/"}}
    )
    run = wait_for_run(ledger, by_message(message_id), lambda r: r.status.is_terminal())

    assert run.status == RunStatus.SUCCEEDED
    spot, landed = run.attempts  # exactly two attempts
    assert [(s.placement["reservation"]["name"], s.skip_class) for s in spot.skips] == [
        (reservation, "unavailable")
    ]
    assert (spot.region, spot.state, (spot.error or {}).get("class")) == (
        "us-central1",
        "JOB_STATE_FAILED",
        "capacity",
    )
    assert "preempted" in vertex.job(spot.job_name or "")["error"]["message"]
    assert (landed.region, landed.state, landed.skips) == ("us-east4", "JOB_STATE_SUCCEEDED", ())
    creates = [
        entry["request"]["customJob"]["jobSpec"]
        for entry in vertex.requests("CreateCustomJob")
        if entry["status"] == "OK"
        and entry["request"]["customJob"].get("labels", {}).get("vd-run") == run.run_id
    ]
    assert [spec["scheduling"]["strategy"] for spec in creates] in (
        ["SPOT", "STANDARD"],
        [4, 3],  # the enum's numbers, had the request been logged without names
    )
    assert not any(
        "reservationAffinity" in pool["machineSpec"]
        for spec in creates
        for pool in spec["workerPoolSpecs"]
    )
    cooling = [c for c in ledger.placement_cooldowns().values() if c.run_id == run.run_id]
    assert [(c.kind, c.region) for c in cooling] == [("spot", "us-central1")]


def test_a_fired_schedule_opens_a_run(local_stack: LocalStack, ledger: Ledger) -> None:
    local_stack.scheduler.fire("nightly-retrain")

    run = wait_for_run(
        ledger,
        lambda r: r.run_key.startswith("schedule:nightly-retrain@"),
        lambda r: bool(r.attempts),
    )

    assert run.template == "resnet-a100"


def test_every_component_is_healthy(local_stack: LocalStack) -> None:
    assert local_stack.health() == dict.fromkeys(local_stack.health(), True)


def test_a_marker_less_upload_starts_exactly_one_job_once_quiet(
    local_stack: LocalStack, ledger: Ledger, vertex: VertexAdmin
) -> None:
    # The nightly-export route (deploy/local/demo/dispatch-config.yaml): quiet_for 1m, at least
    # 20 objects. The whole path: objects written to the bucket, the Eventarc stand-in's events,
    # dispatch, the reconcile ticks of the Scheduler stand-in listing the bucket, the job.
    from emulator_stack.eventarc import finalized_event
    from emulator_stack.functions import OBJECT_FINALIZED

    prefix = "exports/e2e-2026-12-03/"
    written = [
        upload_object(
            local_stack.storage.url, "demo-datasets", f"{prefix}part-{n:05d}.parquet", b"r"
        )
        for n in range(24)
    ]
    # A third of the events delivered once more, last first, as a redelivering Eventarc would.
    url = local_stack.functions[OBJECT_FINALIZED].url
    for resource in written[::-3]:
        headers, body = finalized_event(resource)
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200

    waiting = wait_for_run(
        ledger, lambda r: prefix in r.run_key, lambda r: r.status is RunStatus.WAITING_DATA
    )
    assert vertex_jobs_of(vertex, waiting.run_id) == []
    # Quiet for a minute after the last object, then the next tick (every 2 s) starts it.
    deadline = time.monotonic() + 60 + 45
    started = waiting
    while time.monotonic() < deadline and not started.attempts:
        time.sleep(1)
        snapshot = ledger.get_run(waiting.run_id)
        assert snapshot is not None
        started = snapshot.run
    assert started.attempts, f"not started within a quiet minute and 45 s: {started}"
    assert started.data_wait is not None and started.data_wait.objects == 24

    ended = wait_for_run(
        ledger, lambda r: r.run_id == waiting.run_id, lambda r: r.attempts[-1].job_name is not None
    )
    [job] = vertex_jobs_of(vertex, ended.run_id)
    args = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert f"--data=gs://demo-datasets/{prefix}" in args
    assert (
        len([r for r in ledger.list_runs(list(RunStatus), limit=500) if prefix in r.run.run_key])
        == 1
    )


def vertex_jobs_of(vertex: VertexAdmin, run_id: str) -> list[dict[str, object]]:
    return [j for j in vertex.created_jobs() if j.get("labels", {}).get("vd-run") == run_id]


def wait_for_message(reader: TopicReader, run_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 10
    while (found := reader.find(lambda body: body.get("run_id") == run_id)) is None:
        assert time.monotonic() < deadline, f"no message for run {run_id}"
        time.sleep(0.3)
    return found


def created_for(vertex: VertexAdmin, method: str, field: str, run_id: str) -> list[dict]:
    return [
        entry["request"][field]
        for entry in vertex.requests(method)
        if entry["status"] == "OK"
        and entry["request"][field].get("labels", {}).get("vd-run") == run_id
    ]


def test_a_sweep_waits_for_gpus_then_completes_with_its_best_trial(
    local_stack: LocalStack, ledger: Ledger, vertex: VertexAdmin, completions: TopicReader
) -> None:
    # resnet-sweep (deploy/local/demo/dispatch-config.yaml): 6 trials, 2 at a time, one L4 each
    # under FLEX_START in us-east4, which has no L4 until the test adds two.
    message_id = publish(
        local_stack, {"template": "resnet-sweep", "params": {"dataset_uri": "gs://d/sweep-e2e/"}}
    )
    run = wait_for_run(
        ledger,
        by_message(message_id),
        lambda r: bool(r.attempts) and r.attempts[0].job_name is not None,
    )
    job_name = run.attempts[0].job_name or ""
    assert "/hyperparameterTuningJobs/" in job_name
    time.sleep(2)  # 20 simulated minutes: no trial can have ended without a GPU
    waiting = vertex.job(job_name)
    assert not [t for t in waiting.get("trials", []) if t.get("state") == "SUCCEEDED"]

    vertex.set_capacity("us-east4", "NVIDIA_L4", 2)
    run = wait_for_run(ledger, by_message(message_id), lambda r: r.status == RunStatus.SUCCEEDED)

    (created,) = created_for(
        vertex, "CreateHyperparameterTuningJob", "hyperparameterTuningJob", run.run_id
    )
    assert created["trialJobSpec"]["scheduling"]["strategy"] in ("FLEX_START", 6)
    ended = vertex.job(job_name)
    assert [t["state"] for t in ended["trials"]] == ["SUCCEEDED"] * 6
    completion = wait_for_message(completions, run.run_id)
    assert completion["job_kind"] == "hyperparameter_tuning_job"
    best = completion["best_trial"]
    assert isinstance(best, dict)
    assert {t["id"] for t in ended["trials"]} >= {best["id"]}
    assert set(best["parameters"]) == {"learning_rate", "batch_size"}
    assert set(best["metrics"]) == {"accuracy"}
    assert completion["trials"] == {"succeeded": 6, "infeasible": 0}


def test_a_pipeline_trains_on_the_persistent_resource_and_uploads_its_model(
    local_stack: LocalStack, ledger: Ledger, vertex: VertexAdmin, completions: TopicReader
) -> None:
    message_id = publish(
        local_stack,
        {"template": "resnet-pipeline", "params": {"dataset_uri": "gs://d/pipeline-e2e/"}},
    )

    run = wait_for_run(ledger, by_message(message_id), lambda r: r.status == RunStatus.SUCCEEDED)

    (created,) = created_for(vertex, "CreateTrainingPipeline", "trainingPipeline", run.run_id)
    assert created["trainingTaskInputs"]["persistentResourceId"] == "l4-pool"
    pipeline = vertex.job(run.attempts[-1].job_name or "")
    assert pipeline["state"] == "PIPELINE_STATE_SUCCEEDED"
    model = pipeline["modelToUpload"]
    assert model["displayName"] == f"resnet-{run.run_id}"
    assert model["artifactUri"] == f"gs://demo-models/{run.run_id}/model/"
    completion = wait_for_message(completions, run.run_id)
    assert completion["job_kind"] == "training_pipeline"
    assert completion["model"] == model["name"]
    assert str(completion["model_version"]) == str(model["versionId"])
