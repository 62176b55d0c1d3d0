"""One view of every kind of job: what the state machine reads, whatever Vertex AI created.

The reconciler, the job-state function, ``classify``, the watchdogs and the duplicate rules all
read a job through the fields a ``CustomJob`` has: name, state, error, labels, times, and the spec
of what runs (its scheduling, its worker pools, its persistent resource). A
``HyperparameterTuningJob`` and a ``TrainingPipeline`` have the same fields under other names, so
``view_of`` maps each onto a ``CustomJob`` once, at the Vertex AI adapter, and nothing past it
branches on the kind:

===================  ==============================  ===========================================
CustomJob field      HyperparameterTuningJob         TrainingPipeline
===================  ==============================  ===========================================
name, display_name,  the same fields                 the same fields
labels, error,
create/start/end/
update_time,
encryption_spec
state                ``state`` (a JobState)          ``state``: PIPELINE_STATE_X -> JOB_STATE_X
job_spec             ``trial_job_spec``: each        ``training_task_inputs`` (the custom task's
                     trial's job                     CustomJobSpec, as JSON) parsed
===================  ==============================  ===========================================

The view keeps the job's own ``name`` (``.../hyperparameterTuningJobs/ID``): whoever acts on the
job (get, cancel) asks the service its name's collection names (``shared.model.job_kinds``).
``result_of`` reads what only a sweep or a pipeline has: the best trial, the uploaded model;
``job_times`` the times an attempt's history records (``shared.model.runs.with_history``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from google.protobuf import json_format

from shared.aiplatform import CustomJob, CustomJobSpec, JobState
from shared.model.runs import JobTimes

if TYPE_CHECKING:
    from shared.aiplatform import HyperparameterTuningJob, StudySpec, TrainingPipeline, Trial

AnyJob: TypeAlias = "CustomJob | HyperparameterTuningJob | TrainingPipeline"
"""A job as Vertex AI returns it, of any kind a template makes."""

_PIPELINE_PREFIX = "PIPELINE_STATE_"


def view_of(job: AnyJob) -> CustomJob:
    """``job`` as a ``CustomJob`` with its own name, state, error, labels and times, and the spec
    of the job that actually runs; a ``CustomJob`` is returned as it is."""
    if isinstance(job, CustomJob):
        return job
    # Imported here: a process that only ever sees CustomJobs never loads the other protos.
    from shared.aiplatform import HyperparameterTuningJob

    view = CustomJob(name=job.name, display_name=job.display_name, labels=dict(job.labels))
    for field in (
        "error",
        "encryption_spec",
        "create_time",
        "start_time",
        "end_time",
        "update_time",
    ):
        if field in job:  # set only what the job has: "unset" means something to readers
            setattr(view, field, getattr(job, field))
    if isinstance(job, HyperparameterTuningJob):
        view.state = job.state
        view.job_spec = job.trial_job_spec
    else:
        view.state = job_state_of_pipeline_state(job.state.name)
        view.job_spec = training_task_spec(job)
    return view


def job_times(job: CustomJob, seen_at: datetime) -> JobTimes:
    """The times of ``job`` (a view) for its attempt's history: its create, start and end times
    as Vertex AI stamped them (None when the job has none yet), and ``seen_at``, when it was
    read (the caller's clock)."""
    return JobTimes(
        seen_at=seen_at,
        created_at=_time_of(job, "create_time"),
        started_at=_time_of(job, "start_time"),
        ended_at=_time_of(job, "end_time"),
    )


def _time_of(job: CustomJob, field: str) -> datetime | None:
    # An unset Timestamp reads as None or as the epoch, depending on how the job was built.
    if field not in job:
        return None
    value: datetime | None = getattr(job, field)
    return value if value is not None and value.timestamp() > 0 else None


def job_state_of_pipeline_state(name: str) -> JobState:
    """The ``JobState`` twin of the pipeline state named ``name`` (PIPELINE_STATE_X ->
    JOB_STATE_X); JOB_STATE_UNSPECIFIED for a name without a twin (a state a newer API adds):
    a view must never fail to be made, and an unspecified state is neither terminal nor queued,
    so the state machine waits for a state it knows rather than deciding on a guess."""
    twin = f"JOB_STATE_{name.removeprefix(_PIPELINE_PREFIX)}"
    if not name.startswith(_PIPELINE_PREFIX) or twin not in JobState.__members__:
        return JobState.JOB_STATE_UNSPECIFIED
    return JobState[twin]


def training_task_spec(pipeline: TrainingPipeline) -> CustomJobSpec:
    """The custom task's job spec, parsed from ``training_task_inputs`` (fields the spec does not
    have, such as a newer schema's, are skipped: the view needs only what runs)."""
    inputs = json_format.MessageToDict(type(pipeline).pb(pipeline).training_task_inputs)
    if not isinstance(inputs, dict):
        return CustomJobSpec()
    # proto-plus types from_json as returning any Message; it returns the class's own.
    return cast(
        CustomJobSpec, CustomJobSpec.from_json(json.dumps(inputs), ignore_unknown_fields=True)
    )


def result_of(job: AnyJob) -> dict[str, Any] | None:
    """What a finished sweep or pipeline produced, for the completion message; None for a
    ``CustomJob`` (its output directory says it all) and for nothing produced yet.

    A sweep: ``{"best_trial": {"id", "metrics", "parameters"}, "trials": {"succeeded",
    "infeasible"}}`` (best by the study's first metric and its goal; ``best_trial`` None when no
    trial succeeded). A pipeline: ``{"model": NAME, "model_version": ID}`` once its model is
    uploaded.
    """
    if isinstance(job, CustomJob):
        return None
    from shared.aiplatform import HyperparameterTuningJob

    if isinstance(job, HyperparameterTuningJob):
        return _sweep_result(job)
    if job.model_to_upload.name:
        return {
            "model": job.model_to_upload.name,
            "model_version": job.model_to_upload.version_id or None,
        }
    return None


def _sweep_result(job: HyperparameterTuningJob) -> dict[str, Any] | None:
    from shared.aiplatform import Trial

    if not job.trials:
        return None
    succeeded = [trial for trial in job.trials if trial.state == Trial.State.SUCCEEDED]
    infeasible = sum(1 for trial in job.trials if trial.state == Trial.State.INFEASIBLE)
    best = _best_trial(job.study_spec, succeeded)
    return {
        "best_trial": _trial_summary(best) if best is not None else None,
        "trials": {"succeeded": len(succeeded), "infeasible": infeasible},
    }


def _best_trial(study: StudySpec, trials: list[Trial]) -> Trial | None:
    from shared.aiplatform import StudySpec

    if not study.metrics:
        return None
    metric = study.metrics[0]
    maximize = metric.goal == StudySpec.MetricSpec.GoalType.MAXIMIZE
    scored = [
        (value, trial)
        for trial in trials
        if (value := _metric_value(trial, metric.metric_id)) is not None
    ]
    if not scored:
        return None
    # Ties go to the earliest trial: stable, and the one a person would see first.
    pick = max if maximize else min
    return pick(scored, key=lambda pair: pair[0])[1]


def _metric_value(trial: Trial, metric_id: str) -> float | None:
    for metric in trial.final_measurement.metrics:
        if metric.metric_id == metric_id:
            return float(metric.value)
    return None


def _trial_summary(trial: Trial) -> dict[str, Any]:
    return {
        "id": trial.id,
        "metrics": {m.metric_id: m.value for m in trial.final_measurement.metrics},
        "parameters": {
            p.parameter_id: json_format.MessageToDict(type(p).pb(p).value) for p in trial.parameters
        },
    }
