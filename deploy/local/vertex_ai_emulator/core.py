"""The emulated Vertex AI JobService, PipelineService and PersistentResourceService,
transport-agnostic.

`Emulator` is what the REST and gRPC transports call (see docs/emulator-contract.md). It owns the
single lock, the names, and the proto copies going in and out; the lifecycle lives in
simulation.py (tuning jobs and training pipelines in composites.py, on top of it), the create-time
checks in checks.py (a tuning job's and a pipeline's own fields in composite_checks.py), the list
filter in filters.py. Every public
method first brings the simulation up to `clock.now()`; every error is an EmulatorError.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import proto
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2

from vertex_ai_emulator.capacity import GpuCapacity
from vertex_ai_emulator.checks import (
    CUSTOM_JOB_PATHS,
    PIPELINE_PATHS,
    TUNING_JOB_PATHS,
    JobFieldPaths,
    check_new_job,
)
from vertex_ai_emulator.clock import SimulatedClock
from vertex_ai_emulator.composite_checks import check_training_pipeline, check_tuning_job
from vertex_ai_emulator.composites import (
    Composite,
    Composites,
    SimulatedPipeline,
    SimulatedSweep,
)
from vertex_ai_emulator.config import (
    CreateRefusals,
    EmulatorConfig,
    refusals_from_dict,
    spot_from_dict,
    timings_from_dict,
)
from vertex_ai_emulator.errors import (
    ConfigError,
    EmulatorError,
    failed_precondition,
    invalid_argument,
    not_found,
)
from vertex_ai_emulator.filters import parse_filter
from vertex_ai_emulator.joblogs import JobLogs, log_settings_from_dict
from vertex_ai_emulator.names import (
    CUSTOM_JOBS,
    HYPERPARAMETER_TUNING_JOBS,
    OPERATIONS,
    PERSISTENT_RESOURCES,
    TRAINING_PIPELINES,
    LocationName,
    ProjectDirectory,
    ResourceName,
)
from vertex_ai_emulator.outcomes import OutcomeRule, OutcomeRules
from vertex_ai_emulator.paging import SortKey, paginate
from vertex_ai_emulator.persistent import PersistentResources
from vertex_ai_emulator.placement import (
    Placement,
    gpu_demand,
    placement_of,
    quota_kind_of,
    reservation_request_of,
    resource_pool_demand,
)
from vertex_ai_emulator.quota import QUOTA_EXCEEDED_MESSAGE, GpuQuota, QuotaKind, quota_metric
from vertex_ai_emulator.reservations import Reservations, reservation_from_dict
from vertex_ai_emulator.simulation import TERMINAL_STATES, SimulatedJob, Simulation

# The service's default when a FLEX_START job leaves scheduling.max_wait_duration unset.
DEFAULT_MAX_WAIT_SECONDS = 86400.0
# Numeric ids like the real service's 19-digit ones; they count up, and never repeat within a
# process (not even across reset), so a name always means one job.
FIRST_JOB_ID = 1_000_000_000_000_000_001
OUTPUT_ONLY_JOB_FIELDS = (
    "name",
    "state",
    "create_time",
    "start_time",
    "end_time",
    "update_time",
    "error",
    "web_access_uris",
    "satisfies_pzs",
    "satisfies_pzi",
)
OUTPUT_ONLY_TUNING_JOB_FIELDS = (
    "name",
    "state",
    "create_time",
    "start_time",
    "end_time",
    "update_time",
    "error",
    "trials",
    "satisfies_pzs",
    "satisfies_pzi",
)
OUTPUT_ONLY_PIPELINE_FIELDS = (
    "name",
    "state",
    "create_time",
    "start_time",
    "end_time",
    "update_time",
    "error",
    "training_task_metadata",
)
OUTPUT_ONLY_MODEL_FIELDS = ("name", "version_id", "create_time", "update_time")
CUSTOM_JOB = "custom_job"  # the job kinds outcome rules name (outcomes.JOB_KINDS)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Emulator:
    """In-memory Vertex AI CustomJob / PersistentResource service on simulated time."""

    _refusals: CreateRefusals  # set by _load_config; changed by set_refusals until a reset

    def __init__(
        self, config: EmulatorConfig | None = None, clock: SimulatedClock | None = None
    ) -> None:
        self.config = config or EmulatorConfig.default()
        self.clock = clock or SimulatedClock(time_scale=self.config.time_scale)
        self._lock = threading.RLock()
        self._job_ids = itertools.count(FIRST_JOB_ID)
        self._operation_ids = itertools.count(1)
        self._logs = JobLogs(self.config.job_logs)  # kept across reset: its cursor goes on
        self._load_config()

    # -- JobService -----------------------------------------------------------------------

    def create_custom_job(
        self, parent: str, custom_job: aiplatform_v1.CustomJob
    ) -> aiplatform_v1.CustomJob:
        """Check and store a new job (QUEUED); output-only fields sent are ignored."""
        with self._lock:
            self._catch_up()
            location = self._directory.parse_parent(parent)
            job = aiplatform_v1.CustomJob(custom_job)
            for output_only in OUTPUT_ONLY_JOB_FIELDS:
                delattr(job, output_only)
            self._check_runnable(location, job, CUSTOM_JOB_PATHS)
            name = location.child(CUSTOM_JOBS, str(next(self._job_ids)))
            simulated = self._simulated_job(name, job, CUSTOM_JOB, None)
            self._simulation.submit(simulated)
            return aiplatform_v1.CustomJob(simulated.job)

    def create_hyperparameter_tuning_job(
        self, parent: str, tuning_job: aiplatform_v1.HyperparameterTuningJob
    ) -> aiplatform_v1.HyperparameterTuningJob:
        """Check and store a new tuning job (QUEUED) and start its first trials (composites.py);
        the trial job is checked as a CustomJob, errors naming `trial_job_spec` fields."""
        with self._lock:
            self._catch_up()
            location = self._directory.parse_parent(parent)
            job = aiplatform_v1.HyperparameterTuningJob(tuning_job)
            for output_only in OUTPUT_ONLY_TUNING_JOB_FIELDS:
                delattr(job, output_only)
            trial_job = aiplatform_v1.CustomJob(
                display_name=job.display_name,
                job_spec=job.trial_job_spec,
                labels=dict(job.labels),
                encryption_spec=job.encryption_spec,
            )
            check_tuning_job(job)
            self._check_runnable(location, trial_job, TUNING_JOB_PATHS)
            name = location.child(HYPERPARAMETER_TUNING_JOBS, str(next(self._job_ids)))
            job.name = str(name)
            self._composites.add_sweep(SimulatedSweep(name, job, trial_job))
            return aiplatform_v1.HyperparameterTuningJob(job)

    def get_hyperparameter_tuning_job(self, name: str) -> aiplatform_v1.HyperparameterTuningJob:
        """The tuning job as it is now, with its trials."""
        with self._lock:
            self._catch_up()
            return aiplatform_v1.HyperparameterTuningJob(self._find_sweep(name).job)

    def list_hyperparameter_tuning_jobs(
        self, parent: str, filter: str = "", page_size: int = 0, page_token: str = ""
    ) -> aiplatform_v1.ListHyperparameterTuningJobsResponse:
        """Tuning jobs under `parent` matching `filter`, newest first, one page at a time."""
        with self._lock:
            self._catch_up()
            page, next_token = self._list_page(
                parent,
                [sweep.job for sweep in self._composites.sweeps.values()],
                aiplatform_v1.JobState,
                filter,
                page_size,
                page_token,
            )
            return aiplatform_v1.ListHyperparameterTuningJobsResponse(
                hyperparameter_tuning_jobs=[
                    aiplatform_v1.HyperparameterTuningJob(job) for job in page
                ],
                next_page_token=next_token,
            )

    def cancel_hyperparameter_tuning_job(self, name: str) -> None:
        """Start cancelling a tuning job that has not ended (its running trials are cancelled);
        FAILED_PRECONDITION if it has."""
        with self._lock:
            self._catch_up()
            self._cancel_composite(self._find_sweep(name))

    def delete_hyperparameter_tuning_job(self, name: str) -> operations_pb2.Operation:
        """Delete an ended tuning job; returns the (already done) long-running operation."""
        with self._lock:
            self._catch_up()
            return self._delete_composite(self._find_sweep(name))

    def create_training_pipeline(
        self, parent: str, training_pipeline: aiplatform_v1.TrainingPipeline
    ) -> aiplatform_v1.TrainingPipeline:
        """Check and store a new pipeline (QUEUED) and start its training task (composites.py);
        the task is checked as a CustomJob, errors naming `training_task_inputs` fields."""
        with self._lock:
            self._catch_up()
            location = self._directory.parse_parent(parent)
            job = aiplatform_v1.TrainingPipeline(training_pipeline)
            for output_only in OUTPUT_ONLY_PIPELINE_FIELDS:
                delattr(job, output_only)
            if "model_to_upload" in job:
                for output_only in OUTPUT_ONLY_MODEL_FIELDS:
                    delattr(job.model_to_upload, output_only)
            spec = check_training_pipeline(job)
            task_job = aiplatform_v1.CustomJob(
                display_name=job.display_name,
                job_spec=spec,
                labels=dict(job.labels),
                encryption_spec=job.encryption_spec,
            )
            self._check_runnable(location, task_job, PIPELINE_PATHS)
            name = location.child(TRAINING_PIPELINES, str(next(self._job_ids)))
            job.name = str(name)
            self._composites.add_pipeline(SimulatedPipeline(name, job, task_job))
            return aiplatform_v1.TrainingPipeline(job)

    def get_training_pipeline(self, name: str) -> aiplatform_v1.TrainingPipeline:
        """The pipeline as it is now."""
        with self._lock:
            self._catch_up()
            return aiplatform_v1.TrainingPipeline(self._find_pipeline(name).job)

    def list_training_pipelines(
        self, parent: str, filter: str = "", page_size: int = 0, page_token: str = ""
    ) -> aiplatform_v1.ListTrainingPipelinesResponse:
        """Pipelines under `parent` matching `filter` (`state` takes PipelineState names),
        newest first, one page at a time."""
        with self._lock:
            self._catch_up()
            page, next_token = self._list_page(
                parent,
                [pipeline.job for pipeline in self._composites.pipelines.values()],
                aiplatform_v1.PipelineState,
                filter,
                page_size,
                page_token,
            )
            return aiplatform_v1.ListTrainingPipelinesResponse(
                training_pipelines=[aiplatform_v1.TrainingPipeline(job) for job in page],
                next_page_token=next_token,
            )

    def cancel_training_pipeline(self, name: str) -> None:
        """Start cancelling a pipeline that has not ended (its training task is cancelled);
        FAILED_PRECONDITION if it has."""
        with self._lock:
            self._catch_up()
            self._cancel_composite(self._find_pipeline(name))

    def delete_training_pipeline(self, name: str) -> operations_pb2.Operation:
        """Delete an ended pipeline; returns the (already done) long-running operation."""
        with self._lock:
            self._catch_up()
            return self._delete_composite(self._find_pipeline(name))

    def get_custom_job(self, name: str) -> aiplatform_v1.CustomJob:
        """The job as it is now."""
        with self._lock:
            self._catch_up()
            return aiplatform_v1.CustomJob(self._find_job(name).job)

    def list_custom_jobs(
        self, parent: str, filter: str = "", page_size: int = 0, page_token: str = ""
    ) -> aiplatform_v1.ListCustomJobsResponse:
        """Jobs under `parent` matching `filter`, newest first, one page at a time (the jobs a
        tuning job or a pipeline runs are not listed)."""
        with self._lock:
            self._catch_up()
            page, next_token = self._list_page(
                parent,
                [
                    simulated.job
                    for simulated in self._simulation.jobs.values()
                    if simulated.owner is None
                ],
                aiplatform_v1.JobState,
                filter,
                page_size,
                page_token,
            )
            return aiplatform_v1.ListCustomJobsResponse(
                custom_jobs=[aiplatform_v1.CustomJob(job) for job in page],
                next_page_token=next_token,
            )

    def cancel_custom_job(self, name: str) -> None:
        """Start cancelling a job that has not ended; FAILED_PRECONDITION if it has."""
        with self._lock:
            self._catch_up()
            simulated = self._find_job(name)
            if simulated.is_terminal:
                raise failed_precondition(
                    f"Cannot cancel CustomJob {simulated.key}: it is already in the terminal "
                    f"state {simulated.state.name}."
                )
            self._simulation.cancel(simulated)

    def delete_custom_job(self, name: str) -> operations_pb2.Operation:
        """Delete an ended job; returns the (already done) long-running operation."""
        with self._lock:
            self._catch_up()
            simulated = self._find_job(name)
            if not simulated.is_terminal:
                raise failed_precondition(
                    f"Cannot delete CustomJob {simulated.key} in state {simulated.state.name}: "
                    f"only a job in a terminal state can be deleted; cancel it first."
                )
            self._simulation.remove(simulated)
            operation = self._done_delete_operation(simulated.key)
            self._operations[operation.name] = operation
            return _copy_operation(operation)

    def get_operation(self, name: str) -> operations_pb2.Operation:
        """A long-running operation this emulator returned (deletes are done at once)."""
        with self._lock:
            self._catch_up()
            operation = self._operations.get(self._directory.canonical_operation_name(name))
            if operation is None:
                raise not_found(f"Operation {name} does not exist.")
            return _copy_operation(operation)

    # -- PersistentResourceService --------------------------------------------------------

    def get_persistent_resource(self, name: str) -> aiplatform_v1.PersistentResource:
        """The resource, with `used_replica_count` counting the replicas jobs hold now."""
        with self._lock:
            self._catch_up()
            canonical = str(self._directory.parse_resource(name, PERSISTENT_RESOURCES))
            resource = self._resources.get(canonical)
            if resource is None:
                raise not_found(f"PersistentResource {canonical} does not exist.")
            return resource

    def list_persistent_resources(
        self, parent: str, page_size: int = 0, page_token: str = ""
    ) -> aiplatform_v1.ListPersistentResourcesResponse:
        """Resources under `parent`, by name."""
        with self._lock:
            self._catch_up()
            location = self._directory.parse_parent(parent)
            prefix = f"{location}/{PERSISTENT_RESOURCES}/"
            names = [name for name in self._resources.names() if name.startswith(prefix)]
            page, next_token = paginate(
                names, lambda name: (name,), str(location), page_size, page_token
            )
            return aiplatform_v1.ListPersistentResourcesResponse(
                persistent_resources=[self._resources.get(name) for name in page],
                next_page_token=next_token,
            )

    # -- Compute Engine (reservations.get) ------------------------------------------------

    def get_reservation(self, project: str, zone: str, reservation: str) -> dict[str, Any]:
        """A reservation as Compute Engine's REST API answers it; NOT_FOUND when missing."""
        with self._lock:
            self._catch_up()
            found = self._reservations.get_by_parts(project, zone, reservation)
            if found is None:
                raise not_found(
                    f"The resource 'projects/{project}/zones/{zone}/reservations/{reservation}' "
                    f"was not found"
                )
            return self._reservations.compute_json(found)

    # -- admin ----------------------------------------------------------------------------

    def state_snapshot(self) -> dict[str, Any]:
        """Everything the simulation holds, JSON-friendly (for the admin API and debugging)."""
        with self._lock:
            self._catch_up()
            jobs = sorted(self._simulation.jobs.values(), key=lambda job: _newest_first(job.job))
            return {
                "now": self._simulation.now.isoformat(),
                "time_scale": self.clock.time_scale,
                "capacity": self._capacity.snapshot(),
                "quota": self._quota.snapshot(),
                "reservations": self._reservations.snapshot(),
                "spot": dataclasses.asdict(self._simulation.spot),
                "refusals": self._describe_refusals(),
                "queues": self._simulation.queues(),
                "jobs": [_describe_job(simulated) for simulated in jobs if simulated.owner is None],
                # The trial jobs and training tasks: not CustomJobs a client sees.
                "owned_jobs": [
                    _describe_job(simulated) for simulated in jobs if simulated.owner is not None
                ],
                "hyperparameter_tuning_jobs": [
                    self._composites.describe(sweep)
                    for sweep in sorted(
                        self._composites.sweeps.values(), key=lambda sweep: _newest_first(sweep.job)
                    )
                ],
                "training_pipelines": [
                    self._composites.describe(pipeline)
                    for pipeline in sorted(
                        self._composites.pipelines.values(),
                        key=lambda pipeline: _newest_first(pipeline.job),
                    )
                ],
                "persistent_resources": [
                    json.loads(aiplatform_v1.PersistentResource.to_json(self._resources.get(name)))
                    for name in self._resources.names()
                ],
                "outcome_rules": self._outcome_rules.describe(),
                "default_outcome": self._outcome_rules.default.to_dict(),
                "events": self._simulation.pending_events(),
            }

    def progress(self) -> dict[str, Any]:
        """Training progress per output directory (progress.py): checkpoints, work redone."""
        with self._lock:
            self._catch_up()
            now = self._simulation.now
            return {"now": now.isoformat(), "directories": self._simulation.progress.describe(now)}

    def set_capacity(self, region: str, accelerator_type: str, count: int) -> None:
        """Set the TOTAL GPUs of a type in a region; GPUs held by jobs count against it
        (free = total - held). Waiting jobs that now fit start at once."""
        if accelerator_type not in aiplatform_v1.AcceleratorType.__members__:
            raise invalid_argument(f"{accelerator_type!r} is not an AcceleratorType name.")
        if count < 0:
            raise invalid_argument(f"capacity must not be negative, got {count}.")
        with self._lock:
            self._catch_up()
            self._simulation.set_capacity(region, accelerator_type, count)

    def set_quota(self, kind: str, region: str, accelerator_type: str, count: int | None) -> None:
        """Limit the GPUs of a type that jobs of a quota `kind` (`on_demand`, `preemptible`)
        may hold in a region; None lifts the limit. Waiting jobs that now fit start at once."""
        if kind not in QuotaKind.__members__.values():
            kinds = ", ".join(kind.value for kind in QuotaKind)
            raise invalid_argument(f"{kind!r} is not a quota kind ({kinds}).")
        if accelerator_type not in aiplatform_v1.AcceleratorType.__members__:
            raise invalid_argument(f"{accelerator_type!r} is not an AcceleratorType name.")
        if count is not None and count < 0:
            raise invalid_argument(f"quota must not be negative, got {count}.")
        with self._lock:
            self._catch_up()
            self._simulation.set_quota(QuotaKind(kind), region, accelerator_type, count)

    def put_reservation(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Add a reservation (config's shape), or change one: keys left out keep their values,
        so `{"name", "count"}` resizes. VMs held by jobs stay held (a count below them leaves
        none free until they end). Answers the reservation as `state` shows it."""
        with self._lock:
            self._catch_up()
            name = raw.get("name") if isinstance(raw, Mapping) else None
            base = self._reservations.get(name) if isinstance(name, str) else None
            try:
                reservation = reservation_from_dict(raw, "reservation", base=base)
            except ConfigError as error:
                raise invalid_argument(str(error)) from None
            self._reservations.put(reservation)
            return next(
                entry
                for entry in self._reservations.snapshot()
                if entry["name"] == reservation.name
            )

    def reservations(self) -> list[dict[str, Any]]:
        """Every reservation with its VMs in use and free, JSON-friendly."""
        with self._lock:
            self._catch_up()
            return self._reservations.snapshot()

    def set_spot(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change the `spot` settings ``changes`` names until the next reset; `preempt_after`
        applies to Spot jobs that start RUNNING from now on."""
        with self._lock:
            self._catch_up()
            try:
                self._simulation.spot = spot_from_dict(changes, base=self._simulation.spot)
            except ConfigError as error:
                raise invalid_argument(str(error)) from None
            return dataclasses.asdict(self._simulation.spot)

    def spot(self) -> dict[str, Any]:
        """The `spot` settings in force (`preempt_after` in seconds, None: never)."""
        with self._lock:
            return dataclasses.asdict(self._simulation.spot)

    def set_refusals(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change `quota_when_exceeded` and/or `offered_accelerators` (per region; null offers
        everything again) until the next reset; they apply to creates from now on."""
        with self._lock:
            self._catch_up()
            try:
                self._refusals = refusals_from_dict(changes, base=self._refusals)
            except ConfigError as error:
                raise invalid_argument(str(error)) from None
            return self._describe_refusals()

    def refusals(self) -> dict[str, Any]:
        """`quota_when_exceeded` and `offered_accelerators` in force."""
        with self._lock:
            return self._describe_refusals()

    def put_persistent_resource(
        self, resource: aiplatform_v1.PersistentResource
    ) -> aiplatform_v1.PersistentResource:
        """Create or replace a persistent resource (RUNNING unless it says otherwise)."""
        with self._lock:
            self._catch_up()
            stored = self._store_persistent_resource(resource)
            self._simulation.start_waiting_jobs()
            return stored

    def add_outcome_rule(self, rule: dict[str, Any]) -> dict[str, Any]:
        """Append an outcome rule (shape in outcomes.py); returns it normalised."""
        try:
            parsed = OutcomeRule.from_dict(rule)
        except ConfigError as error:
            raise invalid_argument(str(error)) from None
        with self._lock:
            self._catch_up()
            self._outcome_rules.add(parsed)
            return parsed.to_dict()

    def clear_outcome_rules(self) -> None:
        """Drop every outcome rule; new jobs get the default outcome."""
        with self._lock:
            self._catch_up()
            self._outcome_rules.clear()

    def set_timings(self, changes: Mapping[str, Any]) -> dict[str, float]:
        """Change the timings ``changes`` names (config keys and durations) until the next
        reset; they apply to state changes scheduled from now on. Returns every timing, in
        seconds."""
        with self._lock:
            self._catch_up()
            try:
                timings = timings_from_dict(changes, base=self._simulation.timings)
            except ConfigError as error:
                raise invalid_argument(str(error)) from None
            self._simulation.timings = timings
            return dataclasses.asdict(timings)

    def timings(self) -> dict[str, float]:
        """Every timing in force, in seconds."""
        with self._lock:
            return dataclasses.asdict(self._simulation.timings)

    def log_entries(self, after: int = 0, limit: int = 1000) -> dict[str, Any]:
        """The jobs' simulated ml_job log entries written after cursor ``after`` (joblogs.py),
        up to ``limit``, and the cursor to ask after next."""
        with self._lock:
            self._catch_up()
            entries, cursor = self._logs.entries(after, limit)
            return {"entries": entries, "cursor": cursor}

    def set_log_settings(self, changes: Mapping[str, Any]) -> dict[str, float]:
        """Change how chatty the jobs are (config key ``job_logs``) until the next reset."""
        with self._lock:
            self._catch_up()
            try:
                self._logs.settings = log_settings_from_dict(changes, base=self._logs.settings)
            except ConfigError as error:
                raise invalid_argument(str(error)) from None
            return dataclasses.asdict(self._logs.settings)

    def advance_clock(self, seconds: float) -> None:
        """Move simulated time forward and play every event on the way."""
        if seconds < 0:
            raise invalid_argument(f"the clock only moves forward, got {seconds} s.")
        with self._lock:
            self.clock.advance(seconds)
            self._catch_up()

    def reset(self) -> None:
        """Back to the loaded config: no jobs, no operations, timeline restarting now. The
        clock keeps running (simulated time never goes back)."""
        with self._lock:
            self._load_config()

    # -- internals ------------------------------------------------------------------------

    def _load_config(self) -> None:
        config = self.config
        self._directory = ProjectDirectory(config.project_numbers)
        self._capacity = GpuCapacity(config.capacity, config.unlisted_capacity)
        self._quota = GpuQuota(config.quota)
        self._resources = PersistentResources()
        self._reservations = Reservations(self._directory, self.clock.now())
        for reservation in config.reservations:
            self._reservations.put(reservation)
        self._refusals = config.refusals
        self._outcome_rules = OutcomeRules(config.outcome_rules, config.default_outcome)
        self._operations: dict[str, operations_pb2.Operation] = {}
        self._logs.clear()
        self._logs.settings = config.job_logs
        self._simulation = Simulation(
            start=self.clock.now(),
            timings=config.timings,
            persistent_resource_when_full=config.persistent_resource_when_full,
            capacity=self._capacity,
            resources=self._resources,
            capacity_timeline=config.capacity_timeline,
            quota=self._quota,
            logs=self._logs,
            reservations=self._reservations,
            spot=config.spot,
        )
        self._composites = Composites(
            self._simulation, self._logs, self._owned_job, lambda: next(self._job_ids)
        )
        for resource in config.parsed_persistent_resources():
            self._store_persistent_resource(resource)

    def _catch_up(self) -> None:
        self._simulation.advance_to(self.clock.now())

    def _store_persistent_resource(
        self, resource: aiplatform_v1.PersistentResource
    ) -> aiplatform_v1.PersistentResource:
        canonical = aiplatform_v1.PersistentResource(resource)
        canonical.name = str(self._directory.parse_resource(resource.name, PERSISTENT_RESOURCES))
        return self._resources.put(canonical, self._simulation.now)

    def _refuse_over_quota(self, job: aiplatform_v1.CustomJob, region: str) -> None:
        # `quota_when_exceeded: refuse`: answer 429 at once where the documented service keeps
        # the job QUEUED. An ANY_RESERVATION job a reservation has room for uses no quota.
        kind = quota_kind_of(job)
        if self._refusals.quota_when_exceeded != "refuse" or kind is None:
            return
        request = reservation_request_of(job)
        if request is not None and self._reservations.any_with_room(
            region, request.machine, request.replicas
        ):
            return
        exceeded = self._quota.exceeded(kind, region, gpu_demand(job))
        if exceeded:
            metrics = ", ".join(quota_metric(kind, accelerator) for accelerator in exceeded)
            raise EmulatorError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED_MESSAGE.format(metrics=metrics)
            )

    def _describe_refusals(self) -> dict[str, Any]:
        return {
            "quota_when_exceeded": self._refusals.quota_when_exceeded,
            "offered_accelerators": {
                region: sorted(accelerators)
                for region, accelerators in sorted(self._refusals.offered_accelerators.items())
            },
        }

    def _find_job(self, name: str) -> SimulatedJob:
        canonical = str(self._directory.parse_resource(name, CUSTOM_JOBS))
        simulated = self._simulation.jobs.get(canonical)
        if simulated is None or simulated.owner is not None:
            raise not_found(f"CustomJob {canonical} does not exist.")
        return simulated

    def _find_sweep(self, name: str) -> SimulatedSweep:
        canonical = str(self._directory.parse_resource(name, HYPERPARAMETER_TUNING_JOBS))
        sweep = self._composites.sweeps.get(canonical)
        if sweep is None:
            raise not_found(f"HyperparameterTuningJob {canonical} does not exist.")
        return sweep

    def _find_pipeline(self, name: str) -> SimulatedPipeline:
        canonical = str(self._directory.parse_resource(name, TRAINING_PIPELINES))
        pipeline = self._composites.pipelines.get(canonical)
        if pipeline is None:
            raise not_found(f"TrainingPipeline {canonical} does not exist.")
        return pipeline

    def _cancel_composite(self, composite: Composite) -> None:
        state = composite.job_state
        if state in TERMINAL_STATES:
            raise failed_precondition(
                f"Cannot cancel {_resource_type(composite)} {composite.key}: it is already in "
                f"the terminal state {type(composite.job.state)(composite.job.state).name}."
            )
        self._composites.cancel(composite)

    def _delete_composite(self, composite: Composite) -> operations_pb2.Operation:
        if composite.job_state not in TERMINAL_STATES:
            raise failed_precondition(
                f"Cannot delete {_resource_type(composite)} {composite.key} in state "
                f"{type(composite.job.state)(composite.job.state).name}: only one in a terminal "
                f"state can be deleted; cancel it first."
            )
        self._composites.remove(composite)
        operation = self._done_delete_operation(composite.key)
        self._operations[operation.name] = operation
        return _copy_operation(operation)

    def _list_page(
        self,
        parent: str,
        jobs: list[Any],
        states: type[proto.Enum],
        filter: str,
        page_size: int,
        page_token: str,
    ) -> tuple[list[Any], str]:
        location = self._directory.parse_parent(parent)
        predicate = parse_filter(filter, states)
        prefix = f"{location}/"
        selected = [job for job in jobs if job.name.startswith(prefix) and predicate.matches(job)]
        return paginate(selected, _newest_first, f"{location}|{filter}", page_size, page_token)

    def _check_runnable(
        self, location: LocationName, job: aiplatform_v1.CustomJob, paths: JobFieldPaths
    ) -> None:
        """The create-time checks of the job that will run (`paths`: where it sits in the
        request), and the quota refusal."""
        check_new_job(
            job,
            self._persistent_resource_name(location, job),
            self._resources.get,
            region=location.location,
            lookup_reservation=self._reservations.get,
            offered_accelerators=self._refusals.offered_accelerators,
            paths=paths,
        )
        self._refuse_over_quota(job, location.location)

    def _simulated_job(
        self,
        name: ResourceName,
        job: aiplatform_v1.CustomJob,
        job_kind: str,
        trial: int | None,
    ) -> SimulatedJob:
        """A checked job, named `name`, ready to submit: what it needs and how it will end."""
        job.name = str(name)
        resource_name = self._persistent_resource_name(name.parent, job)
        placement = placement_of(job)
        return SimulatedJob(
            name=name,
            job=job,
            placement=placement,
            outcome=self._outcome_rules.choose(job, placement, job_kind, trial),
            gpu_demand=gpu_demand(job),
            persistent_resource=resource_name,
            pool_demand=self._pool_demand(job, resource_name),
            max_wait_seconds=_max_wait_seconds(job) if placement == Placement.FLEX_START else None,
            quota_kind=quota_kind_of(job),
            reservation_request=reservation_request_of(job),
            trial=trial,
        )

    def _owned_job(
        self,
        owner: ResourceName,
        prototype: aiplatform_v1.CustomJob,
        job_kind: str,
        trial: int | None,
    ) -> SimulatedJob:
        # A trial's or a training task's job: a fresh CustomJob under the owner's location,
        # its id from the same counter (ids are unique across kinds).
        name = owner.parent.child(CUSTOM_JOBS, str(next(self._job_ids)))
        return self._simulated_job(name, aiplatform_v1.CustomJob(prototype), job_kind, trial)

    def _persistent_resource_name(
        self, location: LocationName, job: aiplatform_v1.CustomJob
    ) -> str | None:
        resource_id = job.job_spec.persistent_resource_id
        return str(location.child(PERSISTENT_RESOURCES, resource_id)) if resource_id else None

    def _pool_demand(
        self, job: aiplatform_v1.CustomJob, resource_name: str | None
    ) -> dict[str, int]:
        resource = self._resources.get(resource_name) if resource_name else None
        return resource_pool_demand(job, resource) if resource else {}

    def _done_delete_operation(self, job_name: str) -> operations_pb2.Operation:
        now = self._simulation.now
        metadata = aiplatform_v1.DeleteOperationMetadata(
            generic_metadata=aiplatform_v1.GenericOperationMetadata(
                create_time=now, update_time=now
            )
        )
        operation = operations_pb2.Operation(
            name=f"{job_name}/{OPERATIONS}/{next(self._operation_ids)}", done=True
        )
        operation.metadata.Pack(aiplatform_v1.DeleteOperationMetadata.pb(metadata))
        operation.response.Pack(empty_pb2.Empty())
        return operation


def _max_wait_seconds(job: aiplatform_v1.CustomJob) -> float | None:
    """How long a FLEX_START job may wait for its GPUs; None = forever (an explicit 0)."""
    scheduling = job.job_spec.scheduling
    if "max_wait_duration" not in scheduling:
        return DEFAULT_MAX_WAIT_SECONDS
    seconds = scheduling.max_wait_duration.total_seconds()
    return seconds or None


def _newest_first(job: Any) -> SortKey:
    # Any kind of job: every one has a create_time and a numeric id.
    micros = (job.create_time - _EPOCH) // timedelta(microseconds=1)
    return (-micros, -int(job.name.rsplit("/", 1)[-1]))


def _copy_operation(operation: operations_pb2.Operation) -> operations_pb2.Operation:
    copy = operations_pb2.Operation()
    copy.CopyFrom(operation)
    return copy


def _describe_job(simulated: SimulatedJob) -> dict[str, Any]:
    return {
        "name": simulated.key,
        "display_name": simulated.job.display_name,
        "state": simulated.state.name,
        "placement": simulated.placement.value,
        "region": simulated.region,
        "gpus": simulated.gpu_demand,
        "quota": simulated.quota_kind.value if simulated.quota_kind else None,
        "persistent_resource": simulated.persistent_resource,
        "reservation": simulated.reservation,
        "pool_replicas": simulated.pool_demand,
        "outcome": simulated.outcome.to_dict(),
        "labels": dict(simulated.job.labels),
        "owner": simulated.owner,
    }


def _resource_type(composite: Composite) -> str:
    return (
        "HyperparameterTuningJob" if isinstance(composite, SimulatedSweep) else "TrainingPipeline"
    )
