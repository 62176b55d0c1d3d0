"""Sweeps (HyperparameterTuningJob) and training pipelines (TrainingPipeline) through on_request:
the job dispatch creates for each kind, where it lands, and what a request may not change.

Real functions under functions-framework, the real Vertex AI emulator (JobService and
PipelineService) and Firestore; the tests read only state: the emulator's request log and jobs,
the ledger, the alerts topic.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from dispatch_test_support import (
    CONFIG,
    PIPELINE_POOL_ID,
    AlertsReader,
    FunctionUrls,
    PubSubMessage,
    VertexAdmin,
    deliver_push,
    job_request,
    persistent_resource,
)
from kinds_test_support import NEW_KINDS, TEMPLATE_OF_KIND, KindAdmin

from emulator_stack import VertexAIEmulator
from shared.adapters.ledger import Ledger, RunStatus
from shared.model.alerts import AlertReason
from shared.model.job_kinds import JobKind, kind_of_job_name
from shared.model.runkeys import request_run_key, run_id
from tooling import main

DATASET = "gs://dispatch-it-datasets/datasets/kinds/"


@pytest.fixture
def kinds(
    vertex: VertexAdmin, vertex_ai_emulator: VertexAIEmulator
) -> Callable[[JobKind], KindAdmin]:
    return lambda kind: KindAdmin(vertex, vertex_ai_emulator.address, kind)


def _request(fresh_name: Callable[[str], str], kind: JobKind) -> tuple[PubSubMessage, str]:
    message = job_request(fresh_name(kind.value), TEMPLATE_OF_KIND[kind], {"dataset_uri": DATASET})
    return message, run_id(request_run_key(message.message_id, None))


def test_a_sweep_request_creates_one_tuning_job_whose_trials_wait_under_flex_start(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    kinds: Callable[[JobKind], KindAdmin],
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    sweeps = kinds(JobKind.HYPERPARAMETER_TUNING_JOB)
    request, the_run_id = _request(fresh_name, JobKind.HYPERPARAMETER_TUNING_JOB)

    assert deliver_push(functions.request, request) == 200

    [call] = sweeps.create_calls(the_run_id)
    sweep = call["job"]
    assert sweep["labels"] == {
        "vd-run": the_run_id,
        "vd-attempt": "1",
        "vd-template": "sweep-a100",
    }
    assert (sweep["maxTrialCount"], sweep["parallelTrialCount"]) == (4, 2)
    assert [m["metricId"] for m in sweep["studySpec"]["metrics"]] == ["accuracy"]
    scheduling = sweep["trialJobSpec"]["scheduling"]
    assert (scheduling["strategy"], scheduling["maxWaitDuration"]) == ("FLEX_START", "7200s")
    args = sweep["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert f"--data={DATASET}" in args
    assert vertex.create_calls(the_run_id) == []  # no CustomJob of its own
    [job] = sweeps.jobs(the_run_id)
    [attempt] = ledger.get_run(the_run_id).run.attempts
    assert (attempt.job_kind, attempt.job_name) == (JobKind.HYPERPARAMETER_TUNING_JOB, job["name"])
    assert kind_of_job_name(job["name"]) is JobKind.HYPERPARAMETER_TUNING_JOB
    assert ledger.get_run(the_run_id).run.status is RunStatus.SUBMITTED
    assert alerts.pull() == []


@pytest.mark.parametrize(
    ("state", "expected_placement"),
    [
        pytest.param(
            "RUNNING", {"persistent_resource": PIPELINE_POOL_ID}, id="on the persistent resource"
        ),
        pytest.param("STOPPING", {"flex_start": {"max_wait": "7200s"}}, id="a stopping pool: flex"),
    ],
)
def test_a_pipeline_request_creates_one_training_pipeline_that_uploads_its_model(
    state: str,
    expected_placement: dict[str, object],
    functions: FunctionUrls,
    vertex: VertexAdmin,
    kinds: Callable[[JobKind], KindAdmin],
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    pipelines = kinds(JobKind.TRAINING_PIPELINE)
    vertex.put_persistent_resource(
        persistent_resource(state=state, replicas=1, resource_id=PIPELINE_POOL_ID)
    )
    request, the_run_id = _request(fresh_name, JobKind.TRAINING_PIPELINE)

    assert deliver_push(functions.request, request) == 200

    [call] = pipelines.create_calls(the_run_id)
    pipeline = call["job"]
    assert pipeline["trainingTaskDefinition"].endswith("/custom_task_1.0.0.yaml")
    task = pipeline["trainingTaskInputs"]
    if "persistent_resource" in expected_placement:
        assert task["persistentResourceId"] == PIPELINE_POOL_ID
        assert "strategy" not in task.get("scheduling", {})
    else:
        assert "persistentResourceId" not in task
        assert task["scheduling"]["strategy"] == "FLEX_START"
    assert pipeline["modelToUpload"]["displayName"] == f"resnet-{the_run_id}"
    assert (
        pipeline["modelToUpload"]["artifactUri"] == f"gs://dispatch-it-models/{the_run_id}/model/"
    )
    assert pipeline["labels"]["vd-run"] == the_run_id
    [job] = pipelines.jobs(the_run_id)
    [attempt] = ledger.get_run(the_run_id).run.attempts
    assert attempt.placement == expected_placement
    assert (attempt.job_kind, attempt.job_name) == (JobKind.TRAINING_PIPELINE, job["name"])
    assert alerts.pull() == []


def test_a_pipeline_refused_by_the_persistent_resource_moves_on_in_the_same_delivery(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    kinds: Callable[[JobKind], KindAdmin],
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    kind = JobKind.TRAINING_PIPELINE
    admin = kinds(kind)
    vertex.put_persistent_resource(
        persistent_resource(state="RUNNING", replicas=1, resource_id=PIPELINE_POOL_ID)
    )
    resource = (
        f"projects/local-project/locations/us-central1/persistentResources/{PIPELINE_POOL_ID}"
    )
    # The live read says RUNNING; the service refuses anyway (it stopped in between).
    vertex.add_fault(
        method=admin.create_method,
        code="FAILED_PRECONDITION",
        message=f"Persistent resource {resource} is in state STOPPING; it must be RUNNING to "
        "run jobs.",
        count=1,
    )
    request, the_run_id = _request(fresh_name, kind)

    assert deliver_push(functions.request, request) == 200

    calls = admin.create_calls(the_run_id)
    assert [call["status"] for call in calls] == ["FAILED_PRECONDITION", "OK"]
    [job] = admin.jobs(the_run_id)
    [attempt] = ledger.get_run(the_run_id).run.attempts
    assert attempt.placement == {"flex_start": {"max_wait": "7200s"}}
    assert attempt.job_name == job["name"]
    assert [skip.placement for skip in attempt.skips] == [{"persistent_resource": PIPELINE_POOL_ID}]


@pytest.mark.parametrize("kind", NEW_KINDS, ids=lambda kind: kind.value)
@pytest.mark.parametrize(
    ("body_extra", "params_extra", "names"),
    [
        pytest.param({}, {"max_trials": "100"}, "body.params.max_trials", id="params.max_trials"),
        pytest.param({}, {"parameters": "{}"}, "body.params.parameters", id="params.parameters"),
        pytest.param({}, {"metrics": "loss"}, "body.params.metrics", id="params.metrics"),
        pytest.param(
            {"hyperparameter_tuning": {"max_trials": 100}},
            {},
            "hyperparameter_tuning",
            id="body.hyperparameter_tuning",
        ),
        pytest.param({"max_trials": 100}, {}, "max_trials", id="body.max_trials"),
    ],
)
def test_a_request_that_tries_to_change_the_sweep_creates_nothing(
    kind: JobKind,
    body_extra: dict[str, object],
    params_extra: dict[str, str],
    names: str,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    kinds: Callable[[JobKind], KindAdmin],
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
) -> None:
    body = {
        "template": TEMPLATE_OF_KIND[kind],
        "params": {"dataset_uri": DATASET, **params_extra},
        **body_extra,
    }
    message = PubSubMessage(fresh_name("change"), json.dumps(body).encode(), {"kind": "train"})

    assert deliver_push(functions.request, message) == 200
    assert deliver_push(functions.request, message) == 200  # redelivered: still one alert

    the_run_id = run_id(request_run_key(message.message_id, None))
    assert kinds(kind).create_calls(the_run_id) == []
    assert kinds(kind).jobs(the_run_id) == []
    [alert] = alerts.pull()
    assert alert["attributes"]["reason"] == AlertReason.INVALID_REQUEST
    assert names in alert["body"]["message"]
    run = ledger.get_run(the_run_id).run
    assert (run.status, run.attempts) == (RunStatus.REJECTED, ())


@pytest.mark.parametrize("kind", NEW_KINDS, ids=lambda kind: kind.value)
def test_vertex_dispatch_cancel_cancels_the_job_of_its_kind_and_status_shows_the_kind(
    kind: JobKind,
    functions: FunctionUrls,
    vertex: VertexAdmin,
    kinds: Callable[[JobKind], KindAdmin],
    ledger: Ledger,
    capsys: pytest.CaptureFixture[str],
    fresh_name: Callable[[str], str],
) -> None:
    admin = kinds(kind)
    vertex.put_persistent_resource(
        persistent_resource(state="RUNNING", replicas=1, resource_id=PIPELINE_POOL_ID)
    )
    request, the_run_id = _request(fresh_name, kind)
    assert deliver_push(functions.request, request) == 200
    [job] = admin.jobs(the_run_id)

    assert main(["status", the_run_id, "--config", str(CONFIG)]) == 0
    header, row, _ = capsys.readouterr().out.splitlines()
    assert row.split()[-2:] == [kind.resource, job["name"].rsplit("/", 1)[-1]]
    assert header.split()[-2:] == ["KIND", "JOB"]
    assert main(["cancel", the_run_id, "--config", str(CONFIG)]) == 0

    [cancelled] = admin.jobs(the_run_id)
    prefix = "PIPELINE_STATE_" if kind is JobKind.TRAINING_PIPELINE else "JOB_STATE_"
    assert cancelled["state"] in (f"{prefix}CANCELLING", f"{prefix}CANCELLED")
    [cancel] = vertex.call("GET", f"requests?method=Cancel{kind.resource}")["requests"]
    assert cancel["resource"] == job["name"]
    [attempt] = ledger.get_run(the_run_id).run.attempts
    assert attempt.cancel_requested_at is not None
