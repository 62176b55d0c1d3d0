"""The emulated Vertex AI JobService and PersistentResourceService, transport-agnostic.

`Emulator` is what the REST and gRPC transports call (see docs/emulator-contract.md). It owns the
single lock, the names, and the proto copies going in and out; the lifecycle lives in
simulation.py, the create-time checks in checks.py, the list filter in filters.py. Every public
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
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2

from vertex_ai_emulator.capacity import GpuCapacity
from vertex_ai_emulator.checks import check_new_job
from vertex_ai_emulator.clock import SimulatedClock
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
    OPERATIONS,
    PERSISTENT_RESOURCES,
    LocationName,
    ProjectDirectory,
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
from vertex_ai_emulator.simulation import SimulatedJob, Simulation

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
            resource_name = self._persistent_resource_name(location, job)
            check_new_job(
                job,
                resource_name,
                self._resources.get,
                region=location.location,
                lookup_reservation=self._reservations.get,
                offered_accelerators=self._refusals.offered_accelerators,
            )
            self._refuse_over_quota(job, location.location)
            name = location.child(CUSTOM_JOBS, str(next(self._job_ids)))
            job.name = str(name)
            placement = placement_of(job)
            simulated = SimulatedJob(
                name=name,
                job=job,
                placement=placement,
                outcome=self._outcome_rules.choose(job, placement),
                gpu_demand=gpu_demand(job),
                persistent_resource=resource_name,
                pool_demand=self._pool_demand(job, resource_name),
                max_wait_seconds=_max_wait_seconds(job)
                if placement == Placement.FLEX_START
                else None,
                quota_kind=quota_kind_of(job),
                reservation_request=reservation_request_of(job),
            )
            self._simulation.submit(simulated)
            return aiplatform_v1.CustomJob(job)

    def get_custom_job(self, name: str) -> aiplatform_v1.CustomJob:
        """The job as it is now."""
        with self._lock:
            self._catch_up()
            return aiplatform_v1.CustomJob(self._find_job(name).job)

    def list_custom_jobs(
        self, parent: str, filter: str = "", page_size: int = 0, page_token: str = ""
    ) -> aiplatform_v1.ListCustomJobsResponse:
        """Jobs under `parent` matching `filter`, newest first, one page at a time."""
        with self._lock:
            self._catch_up()
            location = self._directory.parse_parent(parent)
            predicate = parse_filter(filter)
            selected = [
                simulated.job
                for simulated in self._simulation.jobs.values()
                if simulated.name.parent == location and predicate.matches(simulated.job)
            ]
            page, next_token = paginate(
                selected, _newest_first, f"{location}|{filter}", page_size, page_token
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
            return {
                "now": self._simulation.now.isoformat(),
                "time_scale": self.clock.time_scale,
                "capacity": self._capacity.snapshot(),
                "quota": self._quota.snapshot(),
                "reservations": self._reservations.snapshot(),
                "spot": dataclasses.asdict(self._simulation.spot),
                "refusals": self._describe_refusals(),
                "queues": self._simulation.queues(),
                "jobs": [
                    _describe_job(simulated)
                    for simulated in sorted(
                        self._simulation.jobs.values(), key=lambda job: _newest_first(job.job)
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
        if simulated is None:
            raise not_found(f"CustomJob {canonical} does not exist.")
        return simulated

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


def _newest_first(job: aiplatform_v1.CustomJob) -> SortKey:
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
    }
