"""HyperparameterTuningJobs and TrainingPipelines in the emulator core: trials under the capacity
model, the allowed failures, the errors that embed a trial's, the pipeline's task and model, the
field paths of the create-time checks, and outcome rules for trials."""

from __future__ import annotations

import grpc
import pytest
from composite_builders import MODEL, STUDY_SPEC, job_spec, pipeline, sweep
from core_builders import CANONICAL_PARENT, PARENT, job, new_emulator, pool
from google.cloud import aiplatform_v1

from vertex_ai_emulator.checks import PIPELINE_PATHS, TUNING_JOB_PATHS
from vertex_ai_emulator.composites import sample_parameters
from vertex_ai_emulator.errors import ConfigError, EmulatorError
from vertex_ai_emulator.outcomes import OutcomeRule
from vertex_ai_emulator.placement import Placement

JobState = aiplatform_v1.JobState
PipelineState = aiplatform_v1.PipelineState
TrialState = aiplatform_v1.Trial.State
# Provisioning 2 minutes, runs 10: a trial takes 12 minutes once it has its GPUs.
TIMINGS = {"provisioning": "2m", "cancel": "5s"}
TRIAL = 720.0


def emulator_with(gpus: int, **timings: str):
    return new_emulator(
        capacity={"us-central1": {"NVIDIA_TESLA_A100": gpus}},
        timings={**TIMINGS, **timings},
        default_outcome={"duration": "10m"},
    )


def running_trial_jobs(emulator) -> int:
    owned = emulator.state_snapshot()["owned_jobs"]
    return sum(1 for job in owned if job["state"] in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING"))


# -- trials -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_trials", "max_failed", "failing", "state", "failed_trials", "trials_run"),
    [
        (4, 1, [], "JOB_STATE_SUCCEEDED", [], 4),
        (4, 1, [2], "JOB_STATE_SUCCEEDED", ["2"], 4),
        (4, 1, [2, 3], "JOB_STATE_FAILED", ["2", "3"], 3),
        (20, 3, [3, 7, 12], "JOB_STATE_SUCCEEDED", ["3", "7", "12"], 20),
        # 0: the service decides; the emulator allows half of max_trial_count, rounded down.
        (20, 0, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "JOB_STATE_SUCCEEDED", None, 20),
        (20, 0, list(range(1, 12)), "JOB_STATE_FAILED", None, 11),
        (1, 0, [1], "JOB_STATE_FAILED", ["1"], 1),
        # Every failure allowed, but nothing succeeded: FAILED all the same.
        (2, 2, [1, 2], "JOB_STATE_FAILED", ["1", "2"], 2),
    ],
)
def test_a_sweep_succeeds_within_its_allowed_failures(
    max_trials, max_failed, failing, state, failed_trials, trials_run
):
    emulator = emulator_with(1)
    if failing:
        emulator.add_outcome_rule({"trials": failing, "result": "user_error"})
    created = emulator.create_hyperparameter_tuning_job(
        PARENT, sweep(max_trials=max_trials, parallel=1, max_failed=max_failed)
    )
    emulator.advance_clock(TRIAL * max_trials + 1)

    done = emulator.get_hyperparameter_tuning_job(created.name)
    assert done.state.name == state
    assert len(done.trials) == trials_run
    infeasible = [t.id for t in done.trials if t.state == TrialState.INFEASIBLE]
    if failed_trials is not None:
        assert infeasible == failed_trials
    assert running_trial_jobs(emulator) == 0


def test_at_most_parallel_trials_hold_gpus_and_the_rest_wait():
    emulator = emulator_with(8)
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=7, parallel=3))
    for _ in range(3):
        emulator.advance_clock(TRIAL / 2)
        assert running_trial_jobs(emulator) == 3
    assert emulator.state_snapshot()["capacity"]["us-central1"]["NVIDIA_TESLA_A100"]["held"] == 3
    emulator.advance_clock(3 * TRIAL)
    assert (
        emulator.get_hyperparameter_tuning_job(created.name).state == JobState.JOB_STATE_SUCCEEDED
    )


def test_flex_start_trials_queue_for_gpus_behind_each_other():
    emulator = emulator_with(0)
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=2, parallel=2))
    emulator.advance_clock(600)
    assert emulator.get_hyperparameter_tuning_job(created.name).state == JobState.JOB_STATE_QUEUED
    assert len(next(iter(emulator.state_snapshot()["queues"].values()))) == 2

    emulator.set_capacity("us-central1", "NVIDIA_TESLA_A100", 1)  # one trial at a time
    emulator.advance_clock(TRIAL)
    assert running_trial_jobs(emulator) == 1
    done = emulator.get_hyperparameter_tuning_job(created.name)
    assert [t.state for t in done.trials] == [TrialState.SUCCEEDED, TrialState.ACTIVE]
    emulator.advance_clock(TRIAL)
    assert (
        emulator.get_hyperparameter_tuning_job(created.name).state == JobState.JOB_STATE_SUCCEEDED
    )


def test_the_sweep_runs_once_its_first_trial_runs_and_never_goes_back():
    emulator = emulator_with(1)
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=2, parallel=2))
    assert created.state == JobState.JOB_STATE_QUEUED
    states = []
    for _ in range(4):
        states.append(emulator.get_hyperparameter_tuning_job(created.name).state.name)
        emulator.advance_clock(TRIAL / 2)
    # Trial 1 gets the GPU at once (PENDING); trial 2 waits for it, the sweep staying RUNNING.
    assert states == [
        "JOB_STATE_PENDING",
        "JOB_STATE_RUNNING",
        "JOB_STATE_RUNNING",
        "JOB_STATE_RUNNING",
    ]
    read = emulator.get_hyperparameter_tuning_job(created.name)
    assert read.start_time is not None and read.start_time > read.create_time


def test_a_failing_sweep_embeds_the_trials_code_and_message_and_stops_the_others():
    emulator = emulator_with(4)
    emulator.add_outcome_rule({"trials": [2, 3], "result": "user_error", "duration": 60})
    created = emulator.create_hyperparameter_tuning_job(
        PARENT, sweep(max_trials=3, parallel=2, max_failed=1)
    )
    emulator.advance_clock(120 + 60)  # trial 2 fails (1 allowed); trial 3 starts
    assert emulator.get_hyperparameter_tuning_job(created.name).state == JobState.JOB_STATE_RUNNING
    emulator.advance_clock(120 + 60)  # trial 3 fails: 2 > 1 allowed

    failed = emulator.get_hyperparameter_tuning_job(created.name)
    assert failed.state == JobState.JOB_STATE_FAILED
    assert failed.error.code == 3
    assert failed.error.message.startswith(
        "2 trials failed, more than the 1 allowed. Trial 3: The replica workerpool0-0 exited "
        "with a non-zero status of 1. "
    )
    # Trial 1 was still running: it is stopped, and its GPU given back after the cancel delay.
    assert failed.trials[0].state == TrialState.ACTIVE
    emulator.advance_clock(5)
    stopped = emulator.get_hyperparameter_tuning_job(created.name).trials[0]
    assert stopped.state == TrialState.INFEASIBLE
    assert stopped.infeasible_reason.startswith("The trial was stopped")
    assert running_trial_jobs(emulator) == 0
    assert emulator.state_snapshot()["capacity"]["us-central1"]["NVIDIA_TESLA_A100"]["held"] == 0


@pytest.mark.parametrize(
    ("rule", "embedded"),
    [
        ({"trials": [1], "result": "stockout"}, "Resources are insufficient in region"),
        (None, "could not be scheduled within its max wait duration"),
    ],
    ids=["stockout", "flex-start-wait-expired"],
)
def test_a_trial_without_capacity_fails_the_sweep_at_once_as_capacity(rule, embedded):
    emulator = emulator_with(1 if rule else 0)
    if rule:
        emulator.add_outcome_rule(rule)
    created = emulator.create_hyperparameter_tuning_job(
        PARENT, sweep(max_trials=5, parallel=1, max_failed=5)
    )
    emulator.advance_clock(1800)

    failed = emulator.get_hyperparameter_tuning_job(created.name)
    assert failed.state == JobState.JOB_STATE_FAILED
    assert failed.error.code == 8
    assert failed.error.message.startswith("A trial could not get its resources. Trial 1: ")
    assert embedded in failed.error.message
    assert len(failed.trials) == 1


def test_the_sweeps_error_is_there_with_its_failed_state_even_with_an_error_delay():
    emulator = emulator_with(1, error_delay="60s")
    emulator.add_outcome_rule({"trials": [1], "result": "user_error", "duration": 60})
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=1, parallel=1))
    emulator.advance_clock(180)
    failed = emulator.get_hyperparameter_tuning_job(created.name)
    assert failed.state == JobState.JOB_STATE_FAILED
    assert "Trial 1: The replica workerpool0-0 exited" in failed.error.message


def test_trials_get_parameters_in_range_and_a_measurement_of_every_metric():
    emulator = emulator_with(4)
    study = {
        **STUDY_SPEC,
        "metrics": [*STUDY_SPEC["metrics"], {"metricId": "loss", "goal": "MINIMIZE"}],
    }
    created = emulator.create_hyperparameter_tuning_job(
        PARENT, sweep(max_trials=4, parallel=4, study=study)
    )
    emulator.advance_clock(TRIAL)
    done = emulator.get_hyperparameter_tuning_job(created.name)
    for trial in done.trials:
        values = {p.parameter_id: p.value for p in trial.parameters}
        assert 0.0001 <= values["learning_rate"] <= 0.1
        assert values["batch_size"] in (32, 64, 128)
        assert values["layers"] in range(2, 9)
        assert values["optimizer"] in ("adam", "sgd")
        assert [m.metric_id for m in trial.final_measurement.metrics] == ["accuracy", "loss"]
        assert all(0 <= m.value < 1 for m in trial.final_measurement.metrics)
    # Different trials, different choices (a fixed value everywhere would tune nothing).
    assert len({t.parameters[0].value for t in done.trials}) == 4


def test_sampled_parameters_are_the_same_for_the_same_seed_and_differ_otherwise():
    study = sweep().study_spec
    first = sample_parameters(study, "projects/1/locations/r/hyperparameterTuningJobs/9/trials/1")
    again = sample_parameters(study, "projects/1/locations/r/hyperparameterTuningJobs/9/trials/1")
    other = sample_parameters(study, "projects/1/locations/r/hyperparameterTuningJobs/9/trials/2")
    assert first == again
    assert first != other


def test_cancelling_a_sweep_whose_trials_wait_ends_it_after_the_cancel_delay():
    emulator = emulator_with(0)
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=3, parallel=2))
    emulator.cancel_hyperparameter_tuning_job(created.name)
    emulator.cancel_hyperparameter_tuning_job(created.name)  # a second cancel changes nothing
    assert (
        emulator.get_hyperparameter_tuning_job(created.name).state == JobState.JOB_STATE_CANCELLING
    )
    emulator.advance_clock(5)
    cancelled = emulator.get_hyperparameter_tuning_job(created.name)
    assert cancelled.state == JobState.JOB_STATE_CANCELLED
    assert cancelled.error.code == 1
    assert len(cancelled.trials) == 2
    assert emulator.state_snapshot()["queues"] == {}


def test_deleting_a_sweep_forgets_its_trial_jobs_and_they_were_never_custom_jobs():
    emulator = emulator_with(2)
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=2, parallel=2))
    trial_job = emulator.state_snapshot()["owned_jobs"][0]["name"]
    with pytest.raises(EmulatorError) as raised:
        emulator.get_custom_job(trial_job)
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert emulator.list_custom_jobs(PARENT).custom_jobs == []

    emulator.advance_clock(TRIAL)
    emulator.delete_hyperparameter_tuning_job(created.name)
    snapshot = emulator.state_snapshot()
    assert snapshot["owned_jobs"] == [] and snapshot["hyperparameter_tuning_jobs"] == []


def test_a_sweep_writes_its_own_log_lines_and_its_trials_none():
    emulator = emulator_with(1)
    created = emulator.create_hyperparameter_tuning_job(PARENT, sweep(max_trials=1, parallel=1))
    emulator.advance_clock(TRIAL)
    entries = emulator.log_entries()["entries"]
    sweep_id = created.name.rsplit("/", 1)[-1]
    assert {entry["resource"]["labels"]["job_id"] for entry in entries} == {sweep_id}
    assert entries[-1]["textPayload"] == "Job completed successfully."


# -- pipelines ----------------------------------------------------------------------------------


def test_a_pipeline_takes_its_tasks_states_then_uploads_its_model():
    emulator = emulator_with(1)
    created = emulator.create_training_pipeline(PARENT, pipeline(model=MODEL))
    assert created.state == PipelineState.PIPELINE_STATE_QUEUED
    assert created.model_to_upload.name == ""
    states = []
    for seconds in (0, 120, 600):
        emulator.advance_clock(seconds)
        states.append(emulator.get_training_pipeline(created.name).state.name)
    assert states == [
        "PIPELINE_STATE_PENDING",
        "PIPELINE_STATE_RUNNING",
        "PIPELINE_STATE_SUCCEEDED",
    ]
    done = emulator.get_training_pipeline(created.name)
    assert done.model_to_upload.name.startswith(f"{CANONICAL_PARENT}/models/")
    assert done.model_to_upload.version_id == "1"
    assert done.model_to_upload.display_name == "resnet"


@pytest.mark.parametrize(
    ("fields", "model", "uploaded"),
    [
        ({"modelId": "resnet-prod"}, MODEL, f"{CANONICAL_PARENT}/models/resnet-prod"),
        ({}, None, ""),
    ],
    ids=["model-id", "no-model"],
)
def test_the_uploaded_models_name(fields, model, uploaded):
    emulator = emulator_with(1)
    created = emulator.create_training_pipeline(PARENT, pipeline(model=model, **fields))
    emulator.advance_clock(TRIAL)
    done = emulator.get_training_pipeline(created.name)
    assert done.state == PipelineState.PIPELINE_STATE_SUCCEEDED
    assert done.model_to_upload.name == uploaded


def test_a_pipeline_fails_with_its_tasks_own_error():
    emulator = emulator_with(1)
    emulator.add_outcome_rule({"job_kind": "training_pipeline", "result": "internal_error"})
    custom = emulator.create_custom_job(PARENT, job(pools=[pool("n1-standard-4", None)]))
    created = emulator.create_training_pipeline(PARENT, pipeline())
    emulator.advance_clock(TRIAL)
    failed = emulator.get_training_pipeline(created.name)
    assert failed.state == PipelineState.PIPELINE_STATE_FAILED
    assert failed.error.code == 13
    assert failed.error.message == "Internal error occurred for the current attempt."
    # The rule named the pipeline's kind: a plain CustomJob is not touched.
    assert emulator.get_custom_job(custom.name).state == JobState.JOB_STATE_SUCCEEDED


def test_pipelines_are_filtered_by_pipeline_state_names():
    emulator = emulator_with(0)
    created = emulator.create_training_pipeline(PARENT, pipeline())
    listed = emulator.list_training_pipelines(PARENT, filter="state=PIPELINE_STATE_QUEUED")
    assert [p.name for p in listed.training_pipelines] == [created.name]
    with pytest.raises(EmulatorError, match="not a pipeline state"):
        emulator.list_training_pipelines(PARENT, filter="state=JOB_STATE_QUEUED")


# -- create-time checks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (
            lambda: sweep(spec=job_spec(pools=[pool("n1-standard-8", "NVIDIA_TESLA_T4")])),
            "hyperparameter_tuning_job.trial_job_spec.worker_pool_specs[0].machine_spec"
            ".accelerator_type",
        ),
        (
            lambda: sweep(display_name=""),
            "hyperparameter_tuning_job.display_name",
        ),
        (
            lambda: sweep(study={**STUDY_SPEC, "metrics": []}),
            "hyperparameter_tuning_job.study_spec.metrics",
        ),
        (lambda: sweep(max_trials=0), "hyperparameter_tuning_job.max_trial_count"),
        (lambda: sweep(parallel=0), "hyperparameter_tuning_job.parallel_trial_count"),
        (
            lambda: sweep(
                study={
                    **STUDY_SPEC,
                    "parameters": [
                        {
                            "parameterId": "lr",
                            "doubleValueSpec": {"minValue": 0.0, "maxValue": 1.0},
                            "scaleType": "UNIT_LOG_SCALE",
                        }
                    ],
                }
            ),
            "hyperparameter_tuning_job.study_spec.parameters[0].double_value_spec.min_value",
        ),
        (
            lambda: pipeline(spec=job_spec(pools=[pool("n1-standard-8", "NVIDIA_TESLA_T4")])),
            "training_pipeline.training_task_inputs.worker_pool_specs[0].machine_spec"
            ".accelerator_type",
        ),
        (
            lambda: pipeline(spec={"workerPoolSpecs": [pool()], "notAField": 1}),
            "training_pipeline.training_task_inputs",
        ),
        (
            lambda: pipeline(trainingTaskDefinition="gs://x/automl_tables_1.0.0.yaml"),
            "training_pipeline.training_task_definition",
        ),
        (
            lambda: pipeline(model={"displayName": "m"}),
            "training_pipeline.model_to_upload.container_spec.image_uri",
        ),
    ],
)
def test_a_refused_create_names_the_field_of_the_request_and_creates_nothing(build, field):
    emulator = emulator_with(1)
    with pytest.raises(EmulatorError) as raised:
        message = build()
        if isinstance(message, aiplatform_v1.TrainingPipeline):
            emulator.create_training_pipeline(PARENT, message)
        else:
            emulator.create_hyperparameter_tuning_job(PARENT, message)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"Field: {field};" in raised.value.message
    snapshot = emulator.state_snapshot()
    assert snapshot["hyperparameter_tuning_jobs"] == snapshot["training_pipelines"] == []
    assert snapshot["owned_jobs"] == []


@pytest.mark.parametrize(
    ("paths", "message", "expected"),
    [
        (
            TUNING_JOB_PATHS,
            "1.Field: custom_job.job_spec.scheduling.timeout; Message: x.\t",
            "1.Field: hyperparameter_tuning_job.trial_job_spec.scheduling.timeout; Message: x.\t",
        ),
        (
            PIPELINE_PATHS,
            "1.Field: custom_job.labels['A']; Message: x.\t",
            "1.Field: training_pipeline.labels['A']; Message: x.\t",
        ),
        (
            PIPELINE_PATHS,
            "The CustomJob's encryption_spec.kms_key_name (k) must be ...",
            "The TrainingPipeline's encryption_spec.kms_key_name (k) must be ...",
        ),
    ],
)
def test_field_paths_are_rewritten_for_the_request_that_was_sent(paths, message, expected):
    assert paths.rewrite(message) == expected


# -- outcome rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"trials": 0}, "outcome_rule.trials"),
        ({"trials": []}, "outcome_rule.trials"),
        ({"trials": ["1"]}, "outcome_rule.trials"),
        ({"job_kind": "pipeline"}, "outcome_rule.job_kind"),
    ],
)
def test_bad_trial_rule_keys_are_refused_naming_the_key(raw, error):
    with pytest.raises(ConfigError, match=error):
        OutcomeRule.from_dict(raw)


def test_trial_rules_match_only_the_trials_they_name():
    rule = OutcomeRule.from_dict({"trials": 3, "job_kind": "hyperparameter_tuning_job"})
    job = aiplatform_v1.CustomJob()
    placement = Placement.FLEX_START
    assert rule.matches(job, placement, "hyperparameter_tuning_job", 3)
    assert not rule.matches(job, placement, "hyperparameter_tuning_job", 2)
    assert not rule.matches(job, placement, "custom_job", None)
    assert rule.to_dict()["trials"] == [3]
