"""HyperparameterTuningJobs and TrainingPipelines: resources that run CustomJobs of their own.

Neither kind holds machines itself. Each runs OWNED jobs in the simulation (simulation.py), under
the same capacity model as any CustomJob (FLEX_START waits for GPUs, persistent resources, quota,
reservations, outcome rules), and follows them through `Simulation.on_owned_job_changed`. Owned
jobs are never listed, read, cancelled or deleted through the CustomJob methods, and write no log
lines: the owner writes its own at its state changes.

A tuning job (its `state` is a JobState):
- runs trial 1, 2, ... as jobs built from `trial_job_spec` (with the tuning job's display name,
  labels and CMEK key), at most `parallel_trial_count` at a time, `max_trial_count` in all;
- gives each trial parameters sampled from the study spec (random, the same for the same job
  name and trial number: the emulator does not search, whatever `algorithm` says) and, when its
  job succeeds, a final measurement of every study metric (a number in [0, 1), likewise fixed);
- a trial whose job fails is INFEASIBLE with the job's error message as `infeasible_reason`.
  A trial that could not get its machines (code 8, RESOURCE_EXHAUSTED: a stockout, an expired
  FLEX_START wait, a full persistent resource or reservation, a Spot preemption) fails the tuning
  job at once, as capacity. Other failed trials count against the allowed failures:
  `max_failed_trial_count`, or when it is 0 ("the service decides") half of `max_trial_count`,
  rounded down. One failure more than allowed fails the tuning job;
- its error then has the failing trial's code and embeds the trial's own error message:
  "3 trials failed, more than the 2 allowed. Trial 7: The replica workerpool0-0 exited ..." or
  "A trial could not get its resources. Trial 4: Resources are insufficient in region ...";
  the trials still running are cancelled;
- SUCCEEDS when `max_trial_count` trials have ended within the allowed failures and at least one
  succeeded (none succeeded: FAILED like above, with the last failure's error);
- state: QUEUED when created, PENDING when a first trial job is, RUNNING when a first trial runs
  (it never goes back while later trials wait for GPUs).

A training pipeline (its `state` is a PipelineState) runs its training task (the custom task's
`training_task_inputs`, a CustomJobSpec as JSON) as one job with the pipeline's display name,
labels and CMEK key; its state is the task's (JOB_STATE_X -> PIPELINE_STATE_X) and a failed task
fails it with the task's own error. When the task succeeds and the pipeline has a
`model_to_upload`, the model is uploaded at once: `model_to_upload.name` becomes
`projects/N/locations/R/models/ID` (ID: the pipeline's `model_id`, else from the emulator's id
counter) and `version_id` "1".

Cancelling either cancels its running jobs; it is CANCELLED once they have ended. Errors are set
with the FAILED state (no `timings.error_delay`: that delay applies to CustomJobs).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from google.cloud import aiplatform_v1
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2

from vertex_ai_emulator.joblogs import JobLogs
from vertex_ai_emulator.names import MODELS, ResourceName
from vertex_ai_emulator.simulation import TERMINAL_STATES, SimulatedJob, Simulation

JobState = aiplatform_v1.JobState
PipelineState = aiplatform_v1.PipelineState
TrialState = aiplatform_v1.Trial.State
StudySpec = aiplatform_v1.StudySpec

HYPERPARAMETER_TUNING_JOB = "hyperparameter_tuning_job"
TRAINING_PIPELINE = "training_pipeline"
UPLOADED_MODEL_VERSION = "1"
CANCELLED_MESSAGES = {
    HYPERPARAMETER_TUNING_JOB: "HyperparameterTuningJob was cancelled.",
    TRAINING_PIPELINE: "TrainingPipeline was cancelled.",
}
TRIALS_FAILED_MESSAGE = (
    "{failed} trials failed, more than the {allowed} allowed. Trial {trial}: {error}"
)
TRIAL_CAPACITY_MESSAGE = "A trial could not get its resources. Trial {trial}: {error}"
NO_TRIAL_SUCCEEDED_MESSAGE = "No trial succeeded ({failed} failed). Trial {trial}: {error}"
TRIAL_STOPPED_REASON = "The trial was stopped: its HyperparameterTuningJob ended."
_ORDER = (JobState.JOB_STATE_QUEUED, JobState.JOB_STATE_PENDING, JobState.JOB_STATE_RUNNING)

# Builds the job an owner runs: (owner's name, the job, owner's kind, trial number or None).
JobFactory = Callable[[ResourceName, aiplatform_v1.CustomJob, str, int | None], SimulatedJob]


@dataclass
class SimulatedSweep:
    """A tuning job, the job every trial runs, and which simulated job is which trial."""

    name: ResourceName
    job: aiplatform_v1.HyperparameterTuningJob
    trial_job: aiplatform_v1.CustomJob
    trial_of_job: dict[str, int] = field(default_factory=dict)  # job key -> index in job.trials
    failed: int = 0

    @property
    def key(self) -> str:
        """The canonical name."""
        return str(self.name)

    @property
    def job_state(self) -> JobState:
        """Its state as a JobState."""
        return JobState(self.job.state)

    @property
    def allowed_failures(self) -> int:
        """Failed trials it may have and still succeed (0 asked: the service decides)."""
        asked = self.job.max_failed_trial_count
        return asked if asked > 0 else self.job.max_trial_count // 2


@dataclass
class SimulatedPipeline:
    """A training pipeline and the key of the job that runs its training task."""

    name: ResourceName
    job: aiplatform_v1.TrainingPipeline
    task_job: aiplatform_v1.CustomJob
    task_key: str = ""

    @property
    def key(self) -> str:
        """The canonical name."""
        return str(self.name)

    @property
    def job_state(self) -> JobState:
        """Its state as the JobState of the same name (PIPELINE_STATE_X -> JOB_STATE_X)."""
        name = PipelineState(self.job.state).name.replace("PIPELINE_STATE_", "JOB_STATE_", 1)
        return JobState.__members__.get(name, JobState.JOB_STATE_UNSPECIFIED)


Composite = SimulatedSweep | SimulatedPipeline


class Composites:
    """The tuning jobs and pipelines, driven by the state changes of the jobs they own."""

    def __init__(
        self,
        simulation: Simulation,
        logs: JobLogs,
        make_job: JobFactory,
        new_id: Callable[[], int],
    ) -> None:
        self.sweeps: dict[str, SimulatedSweep] = {}
        self.pipelines: dict[str, SimulatedPipeline] = {}
        self._simulation = simulation
        self._logs = logs
        self._make_job = make_job
        self._new_id = new_id
        simulation.on_owned_job_changed = self._owned_job_changed

    # -- requests -------------------------------------------------------------------------

    def add_sweep(self, sweep: SimulatedSweep) -> None:
        """Store a new tuning job (QUEUED) and start its first trials."""
        sweep.job.create_time = self._simulation.now
        self.sweeps[sweep.key] = sweep
        self._set_state(sweep, JobState.JOB_STATE_QUEUED)
        self._start_trials(sweep)

    def add_pipeline(self, pipeline: SimulatedPipeline) -> None:
        """Store a new pipeline (QUEUED) and start its training task."""
        pipeline.job.create_time = self._simulation.now
        self.pipelines[pipeline.key] = pipeline
        self._set_state(pipeline, JobState.JOB_STATE_QUEUED)
        task = self._make_job(pipeline.name, pipeline.task_job, TRAINING_PIPELINE, None)
        task.owner = pipeline.key
        pipeline.task_key = task.key
        self._simulation.submit(task)

    def cancel(self, composite: Composite) -> None:
        """Start cancelling (the caller checked it has not ended); a second cancel does
        nothing."""
        if composite.job_state == JobState.JOB_STATE_CANCELLING:
            return
        self._set_state(composite, JobState.JOB_STATE_CANCELLING)
        running = self._running_jobs(composite)
        for owned in running:
            self._simulation.cancel(owned)
        if not running:
            self._end(composite, JobState.JOB_STATE_CANCELLED, _cancelled(composite))

    def remove(self, composite: Composite) -> None:
        """Forget an ended tuning job or pipeline, and its ended jobs."""
        (self.sweeps if isinstance(composite, SimulatedSweep) else self.pipelines).pop(
            composite.key, None
        )
        for key in self._owned_keys(composite):
            owned = self._simulation.jobs.get(key)
            if owned is not None and owned.is_terminal:
                self._simulation.remove(owned)

    def describe(self, composite: Composite) -> dict[str, Any]:
        """JSON-friendly summary for the admin state."""
        described: dict[str, Any] = {
            "name": composite.key,
            "display_name": composite.job.display_name,
            "state": type(composite.job.state)(composite.job.state).name,
            "labels": dict(composite.job.labels),
            "jobs": self._owned_keys(composite),
        }
        if isinstance(composite, SimulatedSweep):
            described["failed_trials"] = composite.failed
            described["allowed_failures"] = composite.allowed_failures
        return described

    # -- owned jobs -----------------------------------------------------------------------

    def _owned_job_changed(self, owned: SimulatedJob) -> None:
        assert owned.owner is not None
        sweep = self.sweeps.get(owned.owner)
        if sweep is not None:
            self._trial_job_changed(sweep, owned)
            return
        pipeline = self.pipelines.get(owned.owner)
        if pipeline is not None:
            self._task_changed(pipeline, owned)
        # else: its owner was deleted while it was still being cancelled

    def _trial_job_changed(self, sweep: SimulatedSweep, owned: SimulatedJob) -> None:
        if owned.key not in sweep.trial_of_job:
            return  # being submitted: not yet recorded as a trial
        state = owned.state
        if state in TERMINAL_STATES:
            self._trial_ended(sweep, owned)
        elif not self._is_ending(sweep):
            self._advance(sweep, state)

    def _trial_ended(self, sweep: SimulatedSweep, owned: SimulatedJob) -> None:
        trial = sweep.job.trials[sweep.trial_of_job[owned.key]]
        trial.end_time = self._simulation.now
        error = _error_of(owned)
        if owned.state == JobState.JOB_STATE_SUCCEEDED:
            trial.state = TrialState.SUCCEEDED
            trial.final_measurement = _final_measurement(sweep, trial.id)
        else:
            trial.state = TrialState.INFEASIBLE
            trial.infeasible_reason = (
                TRIAL_STOPPED_REASON if self._is_ending(sweep) else error.message
            )
        if self._is_ending(sweep):
            if sweep.job_state == JobState.JOB_STATE_CANCELLING and not self._running_jobs(sweep):
                self._end(sweep, JobState.JOB_STATE_CANCELLED, _cancelled(sweep))
            return
        if owned.state != JobState.JOB_STATE_SUCCEEDED:
            if error.code == code_pb2.RESOURCE_EXHAUSTED:
                message = TRIAL_CAPACITY_MESSAGE.format(trial=trial.id, error=error.message)
                self._fail(sweep, _status(error.code, message))
                return
            sweep.failed += 1
            if sweep.failed > sweep.allowed_failures:
                message = TRIALS_FAILED_MESSAGE.format(
                    failed=sweep.failed,
                    allowed=sweep.allowed_failures,
                    trial=trial.id,
                    error=error.message,
                )
                self._fail(sweep, _status(error.code, message))
                return
        self._start_trials(sweep)
        if not self._running_jobs(sweep) and len(sweep.job.trials) >= sweep.job.max_trial_count:
            self._finish(sweep, trial.id, error)

    def _finish(
        self, sweep: SimulatedSweep, last_trial: str, last_error: status_pb2.Status
    ) -> None:
        if any(trial.state == TrialState.SUCCEEDED for trial in sweep.job.trials):
            self._end(sweep, JobState.JOB_STATE_SUCCEEDED)
            return
        message = NO_TRIAL_SUCCEEDED_MESSAGE.format(
            failed=sweep.failed, trial=last_trial, error=last_error.message
        )
        self._end(sweep, JobState.JOB_STATE_FAILED, _status(last_error.code, message))

    def _fail(self, sweep: SimulatedSweep, error: status_pb2.Status) -> None:
        running = self._running_jobs(sweep)
        self._end(sweep, JobState.JOB_STATE_FAILED, error)
        for owned in running:
            self._simulation.cancel(owned)

    def _start_trials(self, sweep: SimulatedSweep) -> None:
        job = sweep.job
        while len(job.trials) < job.max_trial_count and len(self._running_jobs(sweep)) < max(
            1, job.parallel_trial_count
        ):
            number = len(job.trials) + 1
            trial = aiplatform_v1.Trial(
                id=str(number),
                state=TrialState.ACTIVE,
                parameters=sample_parameters(job.study_spec, f"{sweep.key}/trials/{number}"),
                start_time=self._simulation.now,
            )
            job.trials.append(trial)
            owned = self._make_job(sweep.name, sweep.trial_job, HYPERPARAMETER_TUNING_JOB, number)
            owned.owner = sweep.key
            sweep.trial_of_job[owned.key] = number - 1
            self._simulation.submit(owned)

    def _task_changed(self, pipeline: SimulatedPipeline, owned: SimulatedJob) -> None:
        if owned.key != pipeline.task_key or self._is_ending(pipeline):
            if (
                pipeline.job_state == JobState.JOB_STATE_CANCELLING
                and owned.key == pipeline.task_key
                and owned.is_terminal
            ):
                self._end(pipeline, JobState.JOB_STATE_CANCELLED, _cancelled(pipeline))
            return
        state = owned.state
        if state == JobState.JOB_STATE_SUCCEEDED:
            self._upload_model(pipeline)
            self._end(pipeline, JobState.JOB_STATE_SUCCEEDED)
        elif state == JobState.JOB_STATE_CANCELLED:
            self._end(pipeline, JobState.JOB_STATE_CANCELLED, _cancelled(pipeline))
        elif state in TERMINAL_STATES:
            self._end(pipeline, JobState(state), _error_of(owned))
        else:
            self._advance(pipeline, state)

    def _upload_model(self, pipeline: SimulatedPipeline) -> None:
        if "model_to_upload" not in pipeline.job:
            return
        model = pipeline.job.model_to_upload
        model_id = pipeline.job.model_id or str(self._new_id())
        model.name = str(pipeline.name.parent.child(MODELS, model_id))
        model.version_id = UPLOADED_MODEL_VERSION
        model.create_time = self._simulation.now
        model.update_time = self._simulation.now

    # -- state ----------------------------------------------------------------------------

    def _owned_keys(self, composite: Composite) -> list[str]:
        if isinstance(composite, SimulatedSweep):
            return list(composite.trial_of_job)
        return [composite.task_key] if composite.task_key else []

    def _running_jobs(self, composite: Composite) -> list[SimulatedJob]:
        jobs = (self._simulation.jobs.get(key) for key in self._owned_keys(composite))
        return [owned for owned in jobs if owned is not None and not owned.is_terminal]

    def _is_ending(self, composite: Composite) -> bool:
        # Ended, or being cancelled: what its jobs do no longer moves it on.
        state = composite.job_state
        return state == JobState.JOB_STATE_CANCELLING or state in TERMINAL_STATES

    def _advance(self, composite: Composite, state: JobState) -> None:
        # QUEUED -> PENDING -> RUNNING, never back (a later trial waiting changes nothing).
        if state in _ORDER and _ORDER.index(state) > _ORDER.index(composite.job_state):
            self._set_state(composite, state)

    def _end(
        self, composite: Composite, state: JobState, error: status_pb2.Status | None = None
    ) -> None:
        if error is not None:
            composite.job.error = error
        self._set_state(composite, state)

    def _set_state(self, composite: Composite, state: JobState) -> None:
        job = composite.job
        now = self._simulation.now
        if isinstance(composite, SimulatedSweep):
            composite.job.state = state
        else:
            pipeline_state = state.name.replace("JOB_STATE_", "PIPELINE_STATE_", 1)
            composite.job.state = PipelineState[pipeline_state]
        job.update_time = now
        if state == JobState.JOB_STATE_RUNNING and not job.start_time:
            job.start_time = now
        if state in TERMINAL_STATES:
            job.end_time = now
        self._log(composite, state, now)

    def _log(self, composite: Composite, state: JobState, now: datetime) -> None:
        # The service lines of a job of this name (joblogs.py reads name and start_time).
        stand_in = aiplatform_v1.CustomJob(name=composite.key)
        if composite.job.start_time:
            stand_in.start_time = composite.job.start_time
        self._logs.state_changed(stand_in, state, now, composite.job.error.message)


def sample_parameters(study: StudySpec, seed: str) -> list[aiplatform_v1.Trial.Parameter]:
    """A value for every parameter of the study, the same for the same seed."""
    rng = random.Random(seed)
    chosen = []
    for spec in study.parameters:
        value: float | str
        log = spec.scale_type == StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE
        if "double_value_spec" in spec:
            low, high = spec.double_value_spec.min_value, spec.double_value_spec.max_value
            if log and low > 0:
                value = math.exp(rng.uniform(math.log(low), math.log(high)))
            else:
                value = rng.uniform(low, high)
        elif "integer_value_spec" in spec:
            value = float(
                rng.randint(spec.integer_value_spec.min_value, spec.integer_value_spec.max_value)
            )
        elif "discrete_value_spec" in spec:
            value = rng.choice(list(spec.discrete_value_spec.values))
        else:
            value = rng.choice(list(spec.categorical_value_spec.values))
        chosen.append(aiplatform_v1.Trial.Parameter(parameter_id=spec.parameter_id, value=value))
    return chosen


def _final_measurement(sweep: SimulatedSweep, trial_id: str) -> aiplatform_v1.Measurement:
    rng = random.Random(f"{sweep.key}/trials/{trial_id}/measurement")
    return aiplatform_v1.Measurement(
        step_count=1,
        metrics=[
            aiplatform_v1.Measurement.Metric(metric_id=metric.metric_id, value=rng.random())
            for metric in sweep.job.study_spec.metrics
        ],
    )


def _error_of(owned: SimulatedJob) -> status_pb2.Status:
    # The error may still be pending (`timings.error_delay`): the owner needs it now.
    error = status_pb2.Status()
    if owned.job.error.code or owned.job.error.message:
        error.code = owned.job.error.code
        error.message = owned.job.error.message
    elif owned.pending_error is not None:
        error.CopyFrom(owned.pending_error)
    return error


def _cancelled(composite: Composite) -> status_pb2.Status:
    kind = HYPERPARAMETER_TUNING_JOB if isinstance(composite, SimulatedSweep) else TRAINING_PIPELINE
    return _status(code_pb2.CANCELLED, CANCELLED_MESSAGES[kind])


def _status(code: int, message: str) -> status_pb2.Status:
    return status_pb2.Status(code=code, message=message)


def training_task_json(pipeline: aiplatform_v1.TrainingPipeline) -> Any:
    """`training_task_inputs` as the JSON value it is."""
    return json_format.MessageToDict(
        aiplatform_v1.TrainingPipeline.pb(pipeline).training_task_inputs
    )
