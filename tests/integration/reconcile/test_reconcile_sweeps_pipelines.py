"""Sweeps (HyperparameterTuningJob) and training pipelines (TrainingPipeline) to their ends, on the
emulators: a capacity end falls back to the next placement, a user-code end is retried per the
template's policy then alerted once, a success publishes the completion with the best trial / the
uploaded model, and `vertex-dispatch cancel` ends the run cancelled, never retried.

Dispatch, the job-state function and the reconciler run in this process (the reconcile world: the
in-process Vertex AI emulator's clock is the only clock), with configs/kinds.yaml. The emulator
runs each sweep's trials and each pipeline's training task as jobs under its capacity model and
outcome rules (``job_kind`` and ``trials`` keys: docs/vertex-ai-emulator.md), so a test makes 3
of a sweep's trials fail, or a training task stock out. Each test resets the emulator, so a rule
naming only the kind matches only the test's own jobs. Some ends are read from a hint (the
job-state function), others by a reconcile tick (no event). Assertions read state only: the
ledger, the alerts / requests / completions topics, the emulator's jobs and request log. The
stories of a success and of a cancel run on both transports of our Vertex AI clients (gRPC, REST).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from reconcile_test_support import EAST_REGION, REGION, Message, Subscription, World, of_run

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients, vertex
from shared.adapters.config_source import load_config
from shared.adapters.ledger import DEFAULT_COLLECTION, Ledger, RunStatus
from shared.decode.hints import job_state_message
from shared.handlers.jobstate import JobStateOutcome
from shared.handlers.services import Services
from shared.model.alerts import AlertReason
from shared.model.job_kinds import JobKind, kind_of_job_name
from shared.model.results import DispatchOutcome
from tooling import main
from vertex_ai_emulator.server import EmulatorServer

CONFIG = Path(__file__).parent / "configs" / "kinds.yaml"
COMPLETIONS_TOPIC = f"projects/{LOCAL_PROJECT}/topics/reconcile-it-completions"
SWEEP = "sweep-two-regions"
PIPELINE = "pipeline-two-regions"
TEMPLATE_OF_KIND = {JobKind.HYPERPARAMETER_TUNING_JOB: SWEEP, JobKind.TRAINING_PIPELINE: PIPELINE}
A100 = "NVIDIA_TESLA_A100"
PROVISIONING = 2 * 60  # the world's PENDING time on new machines
RUNS = 10 * 60  # the world's default outcome: succeeded after 10 minutes RUNNING
MAX_WAIT = 60 * 60  # the first placement's FLEX_START max_wait
BACKOFF_CAP = 10 * 60  # the templates' retry backoff cap
SWEEP_TRIALS, SWEEP_PARALLEL, SWEEP_ALLOWED_FAILURES = 6, 2, 2
# Every trial of a sweep to its end: the trials run in waves of SWEEP_PARALLEL.
SWEEP_RUNS = (SWEEP_TRIALS // SWEEP_PARALLEL) * (PROVISIONING + RUNS) + 60
CENTRAL_FLEX = {"flex_start": {"max_wait": "3600s"}}
EAST_FLEX = {"flex_start": {"max_wait": "7200s", "region": EAST_REGION}}


@pytest.fixture(scope="module")
def completions_topic(topics: None) -> str:
    from google.api_core.exceptions import AlreadyExists

    with contextlib.suppress(AlreadyExists):
        clients.publisher_client().create_topic(name=COMPLETIONS_TOPIC)
    return COMPLETIONS_TOPIC


class Story:
    """The reconcile world on configs/kinds.yaml, and a subscription to its completions."""

    def __init__(self, world: World, completions: Subscription, transport: str) -> None:
        self.world = world
        self.completions = completions
        self.transport = transport

    @property
    def vertex(self) -> Any:
        return self.world.vertex

    def start(self, kind: JobKind) -> str:
        """A request for the kind's template, dispatched: the run id (its job created)."""
        started = self.world.request_run(TEMPLATE_OF_KIND[kind])
        assert started.outcome is DispatchOutcome.SUBMITTED, started
        assert kind_of_job_name(started.job_name or "") is kind
        return started.run_id

    def run(self, run_id: str) -> Any:
        return self.world.run(run_id)

    def hint(self, job_name: str) -> list[JobStateOutcome]:
        """The hint a log sink or the reconciler would publish for the job (its view's state
        now), delivered twice, as an at-least-once delivery may: the outcomes."""
        state = vertex.get_job(job_name).state.name
        message = Message(*job_state_message(job_name, state), f"hint-{job_name}-{state}")
        return [result.outcome for result in self.world.deliver_hints([message, message])]

    def deliver_due_retry(self, run_id: str) -> dict[str, Any]:
        """The retry the functions published for the run, dispatched twice (one job): the one
        the decision published when its backoff had passed already, else the one a tick
        publishes once it is due (the clock is moved there). Its body."""
        published = of_run(self.world.retries.pull(), run_id)
        if not published:
            next_retry = self.run(run_id).next_retry
            assert next_retry is not None
            wait = (next_retry.at - self.vertex.now()).total_seconds()
            assert 0 <= wait <= BACKOFF_CAP  # the template's backoff, capped
            self.vertex.advance(wait)
            self.world.reconcile()
            published = of_run(self.world.retries.pull(), run_id)
        [message] = published
        retried, again = self.world.deliver_retries([message, message])
        assert retried.outcome is DispatchOutcome.SUBMITTED, retried
        assert again.outcome is DispatchOutcome.DUPLICATE, again
        return message.body()

    def creates(self, run_id: str, kind: JobKind) -> list[tuple[str, str]]:
        """The kind's create calls logged for the run: each (status, region of the parent)."""
        field = kind.resource[0].lower() + kind.resource[1:]
        return [
            (entry["status"], entry["request"]["parent"].split("/")[3])
            for entry in self.vertex.requests(f"Create{kind.resource}")
            if entry["request"][field].get("labels", {}).get("vd-run") == run_id
        ]

    def transports(self) -> set[str]:
        """The transports of every Vertex AI call the emulator logged."""
        return {entry["transport"] for entry in self.vertex.call("GET", "requests")["requests"]}

    def alerts(self, run_id: str) -> list[dict[str, Any]]:
        return [m.body() for m in of_run(self.world.alerts.pull(), run_id)]

    def completions_of(self, run_id: str) -> list[dict[str, Any]]:
        return [m.body() for m in of_run(self.completions.pull(), run_id)]


@pytest.fixture
def transport() -> str:
    """How our Vertex AI clients reach the emulator: gRPC (the world's), or REST when a test
    is parametrized with ``indirect=["transport"]``."""
    return "grpc"


@pytest.fixture
def story(
    world: World,
    completions_topic: str,
    fresh_name: Callable[[str], str],
    transport: str,
    vertex_server: EmulatorServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Story]:
    from google.cloud import pubsub_v1

    if transport == "rest":
        monkeypatch.delenv(clients.VERTEX_GRPC_EMULATOR_VARIABLE)
        monkeypatch.setenv(
            clients.VERTEX_REST_EMULATOR_VARIABLE, vertex_server.rest_url.removeprefix("http://")
        )
        assert clients.vertex_endpoint(REGION).transport is clients.VertexTransport.EMULATOR_REST

    services = Services(
        load_config(str(CONFIG)), now=world.vertex.now, _ledger=world.services.ledger
    )
    subscriber = pubsub_v1.SubscriberClient()
    name = f"projects/{LOCAL_PROJECT}/subscriptions/{fresh_name('completions')}"
    subscriber.create_subscription(name=name, topic=completions_topic)
    yield Story(replace(world, services=services), Subscription(subscriber, name), transport)
    subscriber.delete_subscription(subscription=name)
    subscriber.close()


def _sweep(name: str) -> Any:
    """The tuning job as the service holds it (its trials), through the real client."""
    return clients.job_service_client(vertex.region_of(name)).get_hyperparameter_tuning_job(
        name=name
    )


def _pipeline(name: str) -> Any:
    return clients.pipeline_service_client(vertex.region_of(name)).get_training_pipeline(name=name)


def _best_trial(sweep: Any) -> tuple[str, float]:
    """The id and accuracy of the sweep's best succeeded trial, read here from its trials."""
    scored = [
        (trial.final_measurement.metrics[0].value, -int(trial.id), trial.id)
        for trial in sweep.trials
        if trial.state.name == "SUCCEEDED"
    ]
    accuracy, _, trial_id = max(scored)
    return trial_id, accuracy


# -- a capacity end falls back to the next placement ----------------------------------------


@pytest.mark.parametrize("transport", ["grpc", "rest"], indirect=True)
def test_a_sweep_whose_trials_wait_past_max_wait_moves_on_and_reports_its_best_trial(
    story: Story,
) -> None:
    # No A100 in us-central1: the FLEX_START trials wait until the placement's max wait runs
    # out, and the sweep fails as a trial's capacity end.
    story.vertex.call("PUT", "capacity", {"region": REGION, "acceleratorType": A100, "count": 0})
    run_id = story.start(JobKind.HYPERPARAMETER_TUNING_JOB)
    first = story.run(run_id).attempts[0]
    assert (first.job_kind, first.placement, first.region) == (
        JobKind.HYPERPARAMETER_TUNING_JOB,
        CENTRAL_FLEX,
        REGION,
    )

    story.vertex.advance(MAX_WAIT + 60)
    assert _sweep(first.job_name).state.name == "JOB_STATE_FAILED"
    # No event: the reconcile tick lists the tuning jobs, reads the end and decides it.
    tick = story.world.reconcile()
    assert tick.decisions_made == 1
    assert story.world.vertex.requests("ListCustomJobs") == []  # no CustomJob watched
    waiting = story.run(run_id)
    assert waiting.status is RunStatus.WAITING_RETRY
    error = waiting.attempts[0].error
    assert error is not None and error["class"] == "capacity"
    assert "A trial could not get its resources. Trial 1:" in error["message"]
    assert "max wait duration" in error["message"]
    assert waiting.next_retry is not None
    assert (waiting.next_retry.attempt, waiting.next_retry.placement_index) == (2, 1)

    # The retry: a new tuning job (the same kind) on the next placement, in us-east4.
    assert story.deliver_due_retry(run_id)["placement_index"] == 1
    second = story.run(run_id).attempts[1]
    assert (second.job_kind, second.placement, second.region) == (
        JobKind.HYPERPARAMETER_TUNING_JOB,
        EAST_FLEX,
        EAST_REGION,
    )
    assert kind_of_job_name(second.job_name or "") is JobKind.HYPERPARAMETER_TUNING_JOB
    assert f"/locations/{EAST_REGION}/" in (second.job_name or "")

    story.vertex.advance(SWEEP_RUNS)
    sweep = _sweep(second.job_name)
    assert sweep.state.name == "JOB_STATE_SUCCEEDED"
    assert story.hint(second.job_name or "") == [JobStateOutcome.DECIDED, JobStateOutcome.DROPPED]

    run = story.run(run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert [a.state for a in run.attempts] == ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"]
    assert story.creates(run_id, JobKind.HYPERPARAMETER_TUNING_JOB) == [
        ("OK", REGION),
        ("OK", EAST_REGION),
    ]
    assert story.vertex.requests("CreateCustomJob") == []  # trials are the sweep's, not ours
    [completion] = story.completions_of(run_id)
    best_id, best_accuracy = _best_trial(sweep)
    assert completion["job_kind"] == "hyperparameter_tuning_job"
    assert completion["job_name"] == second.job_name
    assert completion["state"] == "JOB_STATE_SUCCEEDED"
    assert completion["trials"] == {"succeeded": SWEEP_TRIALS, "infeasible": 0}
    assert completion["best_trial"]["id"] == best_id
    assert completion["best_trial"]["metrics"] == {"accuracy": pytest.approx(best_accuracy)}
    assert set(completion["best_trial"]["parameters"]) == {"learning_rate", "optimizer"}
    assert "model" not in completion
    assert story.alerts(run_id) == []
    assert story.transports() == {story.transport}


def test_a_sweep_whose_third_trial_stocks_out_fails_as_capacity_and_moves_on(
    story: Story,
) -> None:
    # Trials 1 and 2 succeed; trial 3 stocks out (code 8): the whole sweep fails at once as
    # capacity, trial 4 is stopped, and the next placement runs a new sweep from trial 1.
    story.vertex.call(
        "POST",
        "outcomes",
        {"job_kind": "hyperparameter_tuning_job", "trials": [3], "result": "stockout", "times": 1},
    )
    run_id = story.start(JobKind.HYPERPARAMETER_TUNING_JOB)
    first = story.run(run_id).attempts[0]

    story.vertex.advance(2 * (PROVISIONING + RUNS) + 60)
    sweep = _sweep(first.job_name)
    assert sweep.state.name == "JOB_STATE_FAILED"
    assert [t.state.name for t in list(sweep.trials)[:3]] == [
        "SUCCEEDED",
        "SUCCEEDED",
        "INFEASIBLE",
    ]
    assert story.hint(first.job_name or "") == [JobStateOutcome.DECIDED, JobStateOutcome.DROPPED]
    waiting = story.run(run_id)
    error = waiting.attempts[0].error
    assert error is not None and error["class"] == "capacity"
    assert "Trial 3: Resources are insufficient in region: us-central1" in error["message"]
    assert waiting.next_retry is not None and waiting.next_retry.placement_index == 1

    story.deliver_due_retry(run_id)
    second = story.run(run_id).attempts[1]
    assert (second.job_kind, second.placement) == (JobKind.HYPERPARAMETER_TUNING_JOB, EAST_FLEX)
    story.vertex.advance(SWEEP_RUNS)
    assert story.world.reconcile().decisions_made == 1
    assert story.run(run_id).status is RunStatus.SUCCEEDED
    [completion] = story.completions_of(run_id)
    assert completion["job_name"] == second.job_name  # the best of the sweep that succeeded
    assert completion["best_trial"]["id"] == _best_trial(_sweep(second.job_name))[0]
    assert story.alerts(run_id) == []


@pytest.mark.parametrize("transport", ["grpc", "rest"], indirect=True)
def test_a_pipeline_whose_training_task_stocks_out_moves_on_and_reports_its_model(
    story: Story,
) -> None:
    # The first training task stocks out at the end of its provisioning (code 8).
    story.vertex.call(
        "POST", "outcomes", {"job_kind": "training_pipeline", "result": "stockout", "times": 1}
    )
    run_id = story.start(JobKind.TRAINING_PIPELINE)
    first = story.run(run_id).attempts[0]
    assert (first.job_kind, first.placement) == (JobKind.TRAINING_PIPELINE, CENTRAL_FLEX)

    story.vertex.advance(PROVISIONING + 30)
    assert _pipeline(first.job_name).state.name == "PIPELINE_STATE_FAILED"
    # Its end comes as a hint (the view's state: PIPELINE_STATE_FAILED is JOB_STATE_FAILED).
    assert story.hint(first.job_name or "") == [JobStateOutcome.DECIDED, JobStateOutcome.DROPPED]
    waiting = story.run(run_id)
    assert waiting.status is RunStatus.WAITING_RETRY
    error = waiting.attempts[0].error
    assert error is not None and error["class"] == "capacity"
    assert "Resources are insufficient in region: us-central1" in error["message"]

    assert story.deliver_due_retry(run_id)["placement_index"] == 1
    second = story.run(run_id).attempts[1]
    assert (second.job_kind, second.placement, second.region) == (
        JobKind.TRAINING_PIPELINE,
        EAST_FLEX,
        EAST_REGION,
    )

    story.vertex.advance(PROVISIONING + RUNS + 60)
    pipeline = _pipeline(second.job_name)
    assert pipeline.state.name == "PIPELINE_STATE_SUCCEEDED"
    # No event: the reconcile tick lists the pipelines and decides the end.
    assert story.world.reconcile().decisions_made == 1

    run = story.run(run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert story.creates(run_id, JobKind.TRAINING_PIPELINE) == [("OK", REGION), ("OK", EAST_REGION)]
    assert story.vertex.requests("CreateCustomJob") == []
    [completion] = story.completions_of(run_id)
    assert completion["job_kind"] == "training_pipeline"
    assert completion["job_name"] == second.job_name
    assert completion["output_directory"] == f"gs://reconcile-it-models/{run_id}/"
    assert completion["model"] == pipeline.model_to_upload.name
    assert completion["model"].startswith("projects/")
    assert "/models/" in completion["model"]
    assert completion["model_version"] == "1"
    assert "best_trial" not in completion
    assert story.alerts(run_id) == []
    assert story.transports() == {story.transport}


# -- a completion whose result cannot be read -------------------------------------------------


def _succeeded_sweep(story: Story) -> tuple[str, str]:
    """A sweep run to its successful end, not yet read by anyone: (run id, job name)."""
    run_id = story.start(JobKind.HYPERPARAMETER_TUNING_JOB)
    job_name = story.run(run_id).attempts[0].job_name or ""
    story.vertex.advance(SWEEP_RUNS)
    assert _sweep(job_name).state.name == "JOB_STATE_SUCCEEDED"
    return run_id, job_name


def test_a_denied_result_read_holds_the_completion_until_the_read_succeeds(
    story: Story, caplog: pytest.LogCaptureFixture
) -> None:
    run_id, job_name = _succeeded_sweep(story)
    denied = {"method": "GetHyperparameterTuningJob", "code": "PERMISSION_DENIED", "count": 1}
    story.vertex.call("POST", "faults", denied)

    tick = story.world.reconcile()  # decides the end; the completion's read is denied
    assert tick.decisions_made == 1
    assert story.run(run_id).status is RunStatus.SUCCEEDED
    assert story.completions_of(run_id) == []  # not published with a null best trial
    assert tick.result_reads == 1
    assert tick.vertex_calls == tick.list_calls + tick.result_reads
    assert any("aiplatform.hyperparameterTuningJobs.get" in error for error in tick.errors)
    [logged] = [r for r in caplog.records if r.getMessage().startswith("completion not published")]
    assert logged.levelname == "ERROR"

    # IAM fixed (the fault spent): the next tick reads the result and publishes, once.
    again = story.world.reconcile()
    assert again.actions_taken.get("completions") == 1
    [completion] = story.completions_of(run_id)
    assert completion["job_name"] == job_name
    assert completion["best_trial"]["id"] == _best_trial(_sweep(job_name))[0]
    assert completion["trials"] == {"succeeded": SWEEP_TRIALS, "infeasible": 0}
    story.world.reconcile()
    assert story.completions_of(run_id) == []


def test_a_sweep_vertex_no_longer_has_gets_its_completion_with_null_results(
    story: Story, caplog: pytest.LogCaptureFixture
) -> None:
    run_id, job_name = _succeeded_sweep(story)
    # Every read of the sweep answers NOT_FOUND from now on (deleted): but the tick lists it.
    story.vertex.call(
        "POST", "faults", {"method": "GetHyperparameterTuningJob", "code": "NOT_FOUND"}
    )

    tick = story.world.reconcile()
    assert tick.decisions_made == 1
    assert tick.result_reads == 1
    [completion] = story.completions_of(run_id)
    assert completion["job_name"] == job_name
    assert completion["state"] == "JOB_STATE_SUCCEEDED"
    assert completion["best_trial"] is None and completion["trials"] is None
    [logged] = [r for r in caplog.records if "no longer has the job" in r.getMessage()]
    assert logged.levelname == "WARNING"
    assert story.world.reconcile().result_reads == 0  # published: nothing more to read


def test_a_throttled_result_read_pauses_the_tick_and_the_paused_tick_makes_no_read(
    story: Story,
) -> None:
    run_id, job_name = _succeeded_sweep(story)
    throttled = {"method": "GetHyperparameterTuningJob", "code": "RESOURCE_EXHAUSTED", "count": 1}
    story.vertex.call("POST", "faults", throttled)

    tick = story.world.reconcile()
    assert tick.decisions_made == 1
    assert (tick.result_reads, tick.vertex_pace) == (1, "throttled")
    assert tick.vertex_calls == tick.list_calls + 1
    assert story.completions_of(run_id) == []

    paused = story.world.reconcile()  # within the pause: no Vertex AI call, the read waits
    assert (paused.vertex_pace, paused.vertex_calls, paused.result_reads) == ("paused", 0, 0)
    assert story.completions_of(run_id) == []
    assert paused.ended_runs_owing_actions == 1  # still owed

    assert paused.vertex_paused_until is not None
    story.vertex.advance(120)  # past the first pause (1 minute)
    resumed = story.world.reconcile()
    assert (resumed.vertex_pace, resumed.result_reads) == ("called", 1)
    [completion] = story.completions_of(run_id)
    assert completion["best_trial"]["id"] == _best_trial(_sweep(job_name))[0]


# -- a user-code end is retried per the template's policy, then alerted ----------------------


def test_a_sweep_with_more_trials_failing_in_user_code_than_allowed_is_retried_once_then_alerted(
    story: Story,
) -> None:
    # Trials 1, 2 and 3 of every tuning job fail in user code: 3 of 6, over the 2 allowed.
    story.vertex.call(
        "POST",
        "outcomes",
        {
            "job_kind": "hyperparameter_tuning_job",
            "trials": [1, 2, 3],
            "result": "user_error",
            "duration": "5m",
            "exit_code": 3,
        },
    )
    run_id = story.start(JobKind.HYPERPARAMETER_TUNING_JOB)
    first = story.run(run_id).attempts[0]

    story.vertex.advance(SWEEP_RUNS)
    sweep = _sweep(first.job_name)
    assert sweep.state.name == "JOB_STATE_FAILED"
    failed = [
        t.id
        for t in sweep.trials
        if t.state.name == "INFEASIBLE" and "non-zero" in t.infeasible_reason
    ]
    assert failed == ["1", "2", "3"]
    assert story.hint(first.job_name or "") == [JobStateOutcome.DECIDED, JobStateOutcome.DROPPED]
    waiting = story.run(run_id)
    assert waiting.status is RunStatus.WAITING_RETRY
    error = waiting.attempts[0].error
    assert error is not None and error["class"] == "user_code"
    assert f"more than the {SWEEP_ALLOWED_FAILURES} allowed. Trial 3:" in error["message"]
    assert "non-zero status of 3" in error["message"]
    assert waiting.next_retry is not None
    assert waiting.next_retry.attempt == 2

    # The one retry user_failures allows, once its backoff is due: the same placement.
    assert story.deliver_due_retry(run_id)["placement_index"] == 0
    second = story.run(run_id).attempts[1]
    assert (second.job_kind, second.placement) == (JobKind.HYPERPARAMETER_TUNING_JOB, CENTRAL_FLEX)
    story.vertex.advance(SWEEP_RUNS)
    # No event: the tick decides the second end.
    assert story.world.reconcile().decisions_made == 1

    run = story.run(run_id)
    assert run.status is RunStatus.FAILED
    assert [a.error["class"] for a in run.attempts if a.error] == ["user_code", "user_code"]
    [alert] = story.alerts(run_id)
    assert alert["reason"] == AlertReason.RETRIES_EXHAUSTED.value
    assert "non-zero status" in alert["message"]
    assert "hyperparameter-tuning-jobs" in alert["message"]  # the console link of its kind
    assert story.creates(run_id, JobKind.HYPERPARAMETER_TUNING_JOB) == [("OK", REGION)] * 2
    story.world.reconcile()
    assert of_run(story.world.retries.pull(), run_id) == []  # nothing more to retry
    assert story.completions_of(run_id) == []


def test_a_pipeline_whose_training_task_exits_non_zero_is_retried_once_then_alerted(
    story: Story,
) -> None:
    story.vertex.call(
        "POST",
        "outcomes",
        {"job_kind": "training_pipeline", "result": "user_error", "duration": "3m", "exit_code": 2},
    )
    run_id = story.start(JobKind.TRAINING_PIPELINE)

    for attempt in (1, 2):
        job_name = story.run(run_id).attempts[attempt - 1].job_name or ""
        story.vertex.advance(PROVISIONING + 3 * 60 + 60)
        assert _pipeline(job_name).state.name == "PIPELINE_STATE_FAILED"
        assert story.hint(job_name) == [JobStateOutcome.DECIDED, JobStateOutcome.DROPPED]
        if attempt == 1:
            waiting = story.run(run_id)
            assert waiting.status is RunStatus.WAITING_RETRY
            assert story.deliver_due_retry(run_id)["placement_index"] == 0

    run = story.run(run_id)
    assert run.status is RunStatus.FAILED
    assert [a.job_kind for a in run.attempts] == [JobKind.TRAINING_PIPELINE] * 2
    assert [a.error["class"] for a in run.attempts if a.error] == ["user_code", "user_code"]
    assert "non-zero status of 2" in run.attempts[1].error["message"]
    [alert] = story.alerts(run_id)
    assert alert["reason"] == AlertReason.RETRIES_EXHAUSTED.value
    assert "training-pipelines" in alert["message"]  # the console link of its kind
    assert story.creates(run_id, JobKind.TRAINING_PIPELINE) == [("OK", REGION)] * 2
    story.world.reconcile()
    assert of_run(story.world.retries.pull(), run_id) == []
    assert story.completions_of(run_id) == []


# -- `vertex-dispatch cancel` ends the run cancelled, not retried ----------------------------


@pytest.fixture
def operator_story(story: Story, clean_firestore: FirestoreEmulator) -> Story:
    """The story on the default runs collection: the one the CLI reads."""
    story.world.services._ledger = Ledger(
        clients.firestore_client(LOCAL_PROJECT), DEFAULT_COLLECTION, clock=story.vertex.now
    )
    return story


@pytest.mark.parametrize("transport", ["grpc", "rest"], indirect=True)
@pytest.mark.parametrize("kind", [JobKind.HYPERPARAMETER_TUNING_JOB, JobKind.TRAINING_PIPELINE])
def test_cancel_of_a_running_sweep_or_pipeline_ends_the_run_cancelled_and_not_retried(
    operator_story: Story, kind: JobKind, capsys: pytest.CaptureFixture[str]
) -> None:
    story = operator_story
    run_id = story.start(kind)
    job_name = story.run(run_id).attempts[0].job_name or ""
    story.vertex.advance(PROVISIONING + 60)
    assert vertex.get_job(job_name).state.name == "JOB_STATE_RUNNING"

    assert main(["cancel", run_id, "--config", str(CONFIG)]) == 0
    assert job_name in capsys.readouterr().out
    story.vertex.advance(60)  # the cancel completes: CANCELLING -> CANCELLED
    assert vertex.get_job(job_name).state.name == "JOB_STATE_CANCELLED"
    # No event: the tick reads the end; a late hint changes nothing.
    assert story.world.reconcile().decisions_made == 1
    assert story.hint(job_name) == [JobStateOutcome.DROPPED, JobStateOutcome.DROPPED]

    run = story.run(run_id)
    assert run.status is RunStatus.CANCELLED
    [attempt] = run.attempts
    assert attempt.state == "JOB_STATE_CANCELLED"
    assert attempt.cancel_requested_at is not None
    [cancel] = story.vertex.requests(f"Cancel{kind.resource}")
    assert cancel["resource"] == job_name
    assert story.vertex.requests("CancelCustomJob") == []
    story.vertex.advance(BACKOFF_CAP)
    story.world.reconcile()
    assert of_run(story.world.retries.pull(), run_id) == []
    assert story.creates(run_id, kind) == [("OK", REGION)]
    assert story.alerts(run_id) == []
    assert story.completions_of(run_id) == []
    assert story.transports() == {story.transport}
