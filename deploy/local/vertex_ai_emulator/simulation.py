"""Discrete-event simulation of CustomJob lifecycles on simulated time.

Every state change is an event at an exact simulated instant (admission, end of provisioning, end
of the run, expiry of a FLEX_START wait, end of a cancellation, a capacity change from the
timeline). `advance_to(t)` handles the events up to `t` in chronological order, so the result and
every timestamp are the same however often, and however late, callers look.

Lifecycle (create returns QUEUED; admission happens at the creation instant, on the next look):
- FLEX_START: QUEUED in a strict FIFO per (region, accelerator type) until the GPUs for ALL its
  replicas are free at once (a later, smaller job never overtakes the head: no starvation), then
  PENDING for `timings.provisioning`, then RUNNING. If its max wait passes first: FAILED, code 8.
- persistent resource: QUEUED in a strict FIFO per resource until the matching pools have enough
  free replicas (or FAILED, code 8, at once with `persistent_resource_when_full: reject`), then
  PENDING for `timings.persistent_start`, then RUNNING.
- anything else (on demand): GPUs free now -> PENDING -> RUNNING; else PENDING for
  `timings.provisioning`, then FAILED with a stockout (code 8). It never waits for capacity.
- Spot (strategy SPOT): like on demand (and counted against the preemptible quota); once RUNNING,
  `spot.preempt_after` later (if the run has not ended by then) it is preempted: FAILED, code 8,
  with a message saying so and the stockout wording.
- reservation (SPECIFIC_RESERVATION affinity): one VM of the named reservation per replica;
  enough free VMs -> PENDING for `timings.provisioning` -> RUNNING; else PENDING for
  `timings.provisioning`, then FAILED, code 8, "Reservation R has insufficient capacity: resources
  are insufficient in zone Z ...". It never waits. ANY_RESERVATION: the first reservation of the
  region with the job's machine shape and room for all its replicas (not one that requires
  specific affinity), else on demand.
- quota (quota.py), when limited: a job whose GPUs exceed the remaining quota of its kind stays
  QUEUED (FIFO) until jobs end or the limit is raised; FLEX_START jobs wait for quota and
  capacity at once, and their max wait runs meanwhile. On-demand jobs wait for quota only.
- RUNNING lasts the chosen outcome's duration, then SUCCEEDED or FAILED (see outcomes.py); an
  outcome with `work` that succeeds runs for the work left instead, which a job resuming from a
  checkpoint (`VERTEX_DISPATCH_PREVIOUS_OUTPUT`) shortens (progress.py keeps the progress).
- cancel: CANCELLING now, CANCELLED `timings.cancel` later (code 1).
- a FAILED job's `error` is set `timings.error_delay` after the end (0: with the state), as the
  real service sets it about a minute later; until then the job is FAILED with no error.
A job holds its GPUs and quota (or pool replicas) from the start of PENDING until it ends.

A job may be OWNED by a HyperparameterTuningJob (a trial) or a TrainingPipeline (its training
task): it runs like any other, but writes no log lines of its own, and each of its state changes
is passed to `on_owned_job_changed` (composites.py drives the owner from them).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any

from google.cloud import aiplatform_v1
from google.rpc import status_pb2

from vertex_ai_emulator import failures
from vertex_ai_emulator.capacity import GpuCapacity
from vertex_ai_emulator.config import CapacityChange, SpotSettings, Timings
from vertex_ai_emulator.joblogs import JobLogs
from vertex_ai_emulator.names import ProjectDirectory, ResourceName
from vertex_ai_emulator.outcomes import Outcome, Result
from vertex_ai_emulator.persistent import PersistentResources
from vertex_ai_emulator.placement import Placement, ReservationRequest
from vertex_ai_emulator.progress import Progress, output_dir_of, previous_output_of
from vertex_ai_emulator.quota import GpuQuota, QuotaKind
from vertex_ai_emulator.reservations import Reservations

JobState = aiplatform_v1.JobState
# Placements that never wait for capacity (they stock out instead), only for quota.
_NO_CAPACITY_WAIT = frozenset({Placement.ON_DEMAND, Placement.SPOT})

TERMINAL_STATES = frozenset(
    {
        JobState.JOB_STATE_SUCCEEDED,
        JobState.JOB_STATE_FAILED,
        JobState.JOB_STATE_CANCELLED,
        JobState.JOB_STATE_EXPIRED,
        JobState.JOB_STATE_PARTIALLY_SUCCEEDED,
    }
)


class EventKind(IntEnum):
    """What happens at an event; at one instant, lower values are handled first."""

    # Capacity is freed before it is taken, and taken before waits expire: a job that ends at
    # the very instant another's max wait runs out hands its GPUs over.
    CAPACITY_CHANGE = 0
    RUN_ENDED = 1
    CANCEL_DONE = 2
    ADMIT = 3
    PROVISIONED = 4
    WAIT_EXPIRED = 5
    ERROR_SET = 6
    PREEMPTED = 7  # last: a run that ends at the instant of its preemption succeeds


# The state a job must still be in for its event to apply.
STATE_EXPECTED_BY_EVENT: dict[EventKind, JobState] = {
    EventKind.ADMIT: JobState.JOB_STATE_QUEUED,
    EventKind.PROVISIONED: JobState.JOB_STATE_PENDING,
    EventKind.RUN_ENDED: JobState.JOB_STATE_RUNNING,
    EventKind.WAIT_EXPIRED: JobState.JOB_STATE_QUEUED,
    EventKind.CANCEL_DONE: JobState.JOB_STATE_CANCELLING,
    EventKind.ERROR_SET: JobState.JOB_STATE_FAILED,
    EventKind.PREEMPTED: JobState.JOB_STATE_RUNNING,
}


@dataclass(frozen=True, order=True)
class Event:
    """One scheduled state change; ordered by time, then kind, then scheduling order."""

    at: datetime
    kind: EventKind
    sequence: int
    job_key: str = field(default="", compare=False)
    capacity_change: CapacityChange | None = field(default=None, compare=False)


@dataclass
class SimulatedJob:
    """A job in the simulation: its stored proto (the source of truth) and what it needs."""

    name: ResourceName
    job: aiplatform_v1.CustomJob
    placement: Placement
    outcome: Outcome
    gpu_demand: dict[str, int]
    persistent_resource: str | None = None
    pool_demand: dict[str, int] = field(default_factory=dict)
    max_wait_seconds: float | None = None  # FLEX_START only; None waits forever
    quota_kind: QuotaKind | None = None  # None: counts against no quota (persistent resource)
    pending_error: status_pb2.Status | None = None  # set on the job at its ERROR_SET event
    reservation_request: ReservationRequest | None = None  # its reservationAffinity, if any
    reservation: str | None = None  # the reservation whose VMs it holds (or lacked)
    stockout_error: status_pb2.Status | None = None  # replaces the stockout's default error
    owner: str | None = None  # the tuning job / pipeline it runs for (never listed as a job)
    trial: int | None = None  # its trial number, when it is a tuning job's trial

    @property
    def key(self) -> str:
        """The canonical job name, used as the key everywhere."""
        return str(self.name)

    @property
    def region(self) -> str:
        """Where the job runs and holds GPUs: the location of its parent."""
        return self.name.parent.location

    @property
    def state(self) -> JobState:
        """The job's current state."""
        return JobState(self.job.state)

    @property
    def is_terminal(self) -> bool:
        """Whether the job has ended for good."""
        return self.state in TERMINAL_STATES


class Simulation:
    """The jobs, the events still to come, and the queues of jobs waiting for capacity."""

    def __init__(
        self,
        start: datetime,
        timings: Timings,
        persistent_resource_when_full: str,
        capacity: GpuCapacity,
        resources: PersistentResources,
        capacity_timeline: tuple[CapacityChange, ...] = (),
        quota: GpuQuota | None = None,
        logs: JobLogs | None = None,
        reservations: Reservations | None = None,
        spot: SpotSettings | None = None,
    ) -> None:
        self.now = start
        self.logs = (
            JobLogs() if logs is None else logs
        )  # the jobs' simulated ml_job log entries (joblogs.py)
        self.jobs: dict[str, SimulatedJob] = {}
        self._timings = timings
        self._reject_when_full = persistent_resource_when_full == "reject"
        self._capacity = capacity
        self._resources = resources
        self._quota = quota or GpuQuota({})
        self._reservations = reservations or Reservations(ProjectDirectory({}), start)
        self.spot = spot or SpotSettings()  # read when a Spot job starts RUNNING
        self.progress = Progress()  # training progress per output directory (progress.py)
        # Told of every state change of an owned job (after it is applied).
        self.on_owned_job_changed: Callable[[SimulatedJob], None] | None = None
        self._events: list[Event] = []
        self._sequence = itertools.count()
        self._queues: dict[str, list[str]] = {}
        for change in capacity_timeline:
            self._schedule(
                start + timedelta(seconds=change.at_seconds),
                EventKind.CAPACITY_CHANGE,
                capacity_change=change,
            )

    @property
    def timings(self) -> Timings:
        """How long state changes take; a change applies to the events scheduled after it."""
        return self._timings

    @timings.setter
    def timings(self, timings: Timings) -> None:
        self._timings = timings

    def advance_to(self, moment: datetime) -> None:
        """Handle every event due at or before `moment`, in order; then `now` is `moment`."""
        while self._events and self._events[0].at <= moment:
            event = heapq.heappop(self._events)
            self.logs.trainer_output_until(max(self.now, event.at))
            self.now = max(self.now, event.at)
            self._handle(event)
            self._start_waiting_jobs()
        self.logs.trainer_output_until(max(self.now, moment))
        self.now = max(self.now, moment)

    def submit(self, simulated: SimulatedJob) -> None:
        """Add a new job: QUEUED now, admitted at this same instant on the next look."""
        simulated.job.create_time = self.now
        self.jobs[simulated.key] = simulated
        self._set_state(simulated, JobState.JOB_STATE_QUEUED)
        self._schedule(self.now, EventKind.ADMIT, simulated.key)

    def cancel(self, simulated: SimulatedJob) -> None:
        """Start cancelling a job that has not ended (a second cancel changes nothing)."""
        if simulated.state == JobState.JOB_STATE_CANCELLING:
            return
        self._leave_queue(simulated)
        self._set_state(simulated, JobState.JOB_STATE_CANCELLING)
        self._schedule(
            self.now + timedelta(seconds=self._timings.cancel),
            EventKind.CANCEL_DONE,
            simulated.key,
        )

    def remove(self, simulated: SimulatedJob) -> None:
        """Forget an ended job."""
        del self.jobs[simulated.key]

    def set_capacity(self, region: str, accelerator: str, total: int) -> None:
        """Change a region's GPU total now; waiting jobs that now fit start at once."""
        self._capacity.set_total(region, accelerator, total)
        self._start_waiting_jobs()

    def set_quota(self, kind: QuotaKind, region: str, accelerator: str, limit: int | None) -> None:
        """Change (None: lift) a GPU quota now; waiting jobs that now fit start at once."""
        self._quota.set_limit(kind, region, accelerator, limit)
        self._start_waiting_jobs()

    def start_waiting_jobs(self) -> None:
        """Start the waiting jobs that fit now (after a change made outside the simulation, such
        as a persistent resource put by an admin)."""
        self._start_waiting_jobs()

    def queues(self) -> dict[str, list[str]]:
        """Waiting job names per queue, head first."""
        return {key: list(queue) for key, queue in self._queues.items() if queue}

    def pending_events(self) -> list[dict[str, Any]]:
        """The events still to come, in order (for the admin snapshot)."""
        return [
            {"at": event.at.isoformat(), "kind": event.kind.name, "job": event.job_key}
            for event in sorted(self._events)
            if not self._is_stale(event)
        ]

    # -- event handling -------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        if event.kind == EventKind.CAPACITY_CHANGE:
            assert event.capacity_change is not None
            change = event.capacity_change
            self._capacity.set_total(change.region, change.accelerator, change.total)
            return
        if self._is_stale(event):
            return
        handlers = {
            EventKind.ADMIT: self._admit,
            EventKind.PROVISIONED: self._provisioned,
            EventKind.RUN_ENDED: self._run_ended,
            EventKind.WAIT_EXPIRED: self._wait_expired,
            EventKind.CANCEL_DONE: self._cancel_done,
            EventKind.ERROR_SET: self._error_set,
            EventKind.PREEMPTED: self._preempted,
        }
        handlers[event.kind](self.jobs[event.job_key])

    def _is_stale(self, event: Event) -> bool:
        # An event whose job has moved on (cancelled, started, deleted...) is ignored.
        if event.kind == EventKind.CAPACITY_CHANGE:
            return False
        simulated = self.jobs.get(event.job_key)
        return simulated is None or simulated.state != STATE_EXPECTED_BY_EVENT[event.kind]

    def _admit(self, simulated: SimulatedJob) -> None:
        if simulated.reservation_request is not None and self._admit_on_reservation(simulated):
            return
        if simulated.placement in _NO_CAPACITY_WAIT and not self._must_wait(simulated):
            self._provision(simulated)
            return
        if self._must_reject_for_full_resource(simulated):
            self._reject_for_full_resource(simulated)
            return
        if simulated.placement == Placement.FLEX_START and simulated.max_wait_seconds:
            self._schedule(
                simulated.job.create_time + timedelta(seconds=simulated.max_wait_seconds),
                EventKind.WAIT_EXPIRED,
                simulated.key,
            )
        self._queues.setdefault(self._queue_key(simulated), []).append(simulated.key)

    def _admit_on_reservation(self, simulated: SimulatedJob) -> bool:
        # False: an ANY_RESERVATION job no reservation has room for, which runs on demand.
        request = simulated.reservation_request
        assert request is not None
        if request.name is None:
            found = self._reservations.any_with_room(
                simulated.region, request.machine, request.replicas
            )
            if found is None:
                return False
            simulated.placement = Placement.RESERVATION
            simulated.quota_kind = None
            name = found.name
        else:
            name = request.name
        simulated.reservation = name
        free = self._reservations.free(name)
        if free >= request.replicas:
            self._reservations.hold(simulated.key, name, request.replicas)
        else:
            reservation = self._reservations.get(name)
            simulated.stockout_error = failures.reservation_full(
                name,
                zone=reservation.zone if reservation else "",
                needed=request.replicas,
                free=free,
                count=reservation.count if reservation else 0,
            )
            simulated.outcome = replace(simulated.outcome, result=Result.STOCKOUT)
        self._set_state(simulated, JobState.JOB_STATE_PENDING)
        self._schedule(
            self.now + timedelta(seconds=self._timings.provisioning),
            EventKind.PROVISIONED,
            simulated.key,
        )
        return True

    def _provisioned(self, simulated: SimulatedJob) -> None:
        if simulated.outcome.result == Result.STOCKOUT:
            error = simulated.stockout_error or failures.stockout(simulated.region)
            self._end(simulated, JobState.JOB_STATE_FAILED, error)
            return
        self._set_state(simulated, JobState.JOB_STATE_RUNNING)
        duration = self._start_work(simulated)
        self._schedule(self.now + timedelta(seconds=duration), EventKind.RUN_ENDED, simulated.key)
        preempt_after = self.spot.preempt_after
        if (
            simulated.placement == Placement.SPOT
            and preempt_after is not None
            and preempt_after < duration
        ):
            self._schedule(
                self.now + timedelta(seconds=preempt_after), EventKind.PREEMPTED, simulated.key
            )

    def _start_work(self, simulated: SimulatedJob) -> float:
        """How long the job now RUNNING runs: its outcome's duration, or (an outcome with
        `work` that succeeds) the work its output directory has left after the checkpoint it
        resumes from."""
        outcome = simulated.outcome
        output_dir = output_dir_of(simulated.job, simulated.trial)
        if outcome.work_seconds is None or output_dir is None:
            return outcome.duration_seconds
        left = self.progress.start(
            simulated.key,
            output_dir=output_dir,
            previous_output=previous_output_of(simulated.job, simulated.trial),
            work=outcome.work_seconds,
            checkpoint_every=outcome.checkpoint_every_seconds,
            gpus=sum(simulated.gpu_demand.values()),
            now=self.now,
        )
        return left if outcome.result == Result.SUCCEEDED else outcome.duration_seconds

    def _preempted(self, simulated: SimulatedJob) -> None:
        self._end(simulated, JobState.JOB_STATE_FAILED, failures.spot_preempted(simulated.region))

    def _run_ended(self, simulated: SimulatedJob) -> None:
        result = simulated.outcome.result
        if result == Result.USER_ERROR:
            error = failures.user_error(simulated.name, simulated.outcome.exit_code)
            self._end(simulated, JobState.JOB_STATE_FAILED, error)
        elif result == Result.INTERNAL_ERROR:
            self._end(simulated, JobState.JOB_STATE_FAILED, failures.internal_error())
        else:
            self._end(simulated, JobState.JOB_STATE_SUCCEEDED)

    def _wait_expired(self, simulated: SimulatedJob) -> None:
        assert simulated.max_wait_seconds is not None
        self._leave_queue(simulated)
        error = failures.flex_start_wait_expired(simulated.region, simulated.max_wait_seconds)
        self._end(simulated, JobState.JOB_STATE_FAILED, error)

    def _cancel_done(self, simulated: SimulatedJob) -> None:
        self._end(simulated, JobState.JOB_STATE_CANCELLED, failures.cancelled())

    def _error_set(self, simulated: SimulatedJob) -> None:
        if simulated.pending_error is not None:
            simulated.job.error = simulated.pending_error
            simulated.pending_error = None
            simulated.job.update_time = self.now

    # -- capacity -------------------------------------------------------------------------

    def _start_waiting_jobs(self) -> None:
        for queue in self._queues.values():
            while queue and self._fits(self.jobs[queue[0]]):
                self._provision(self.jobs[queue.pop(0)])

    def _must_wait(self, simulated: SimulatedJob) -> bool:
        # Others waiting before it (strict FIFO), or no room for it now.
        queued = bool(self._queues.get(self._queue_key(simulated)))
        return queued or not self._fits(simulated)

    def _fits(self, simulated: SimulatedJob) -> bool:
        if simulated.persistent_resource is not None:
            return self._resources.fits(simulated.persistent_resource, simulated.pool_demand)
        kind = simulated.quota_kind
        if kind is not None and not self._quota.fits(kind, simulated.region, simulated.gpu_demand):
            return False
        # An on-demand or Spot job waits for quota only: without free GPUs it stocks out
        # (_provision).
        if simulated.placement in _NO_CAPACITY_WAIT:
            return True
        return self._capacity.fits(simulated.region, simulated.gpu_demand)

    def _provision(self, simulated: SimulatedJob) -> None:
        if simulated.persistent_resource is not None:
            self._resources.hold(
                simulated.key, simulated.persistent_resource, simulated.pool_demand
            )
            delay = self._timings.persistent_start
        else:
            if self._capacity.fits(simulated.region, simulated.gpu_demand):
                self._capacity.hold(simulated.key, simulated.region, simulated.gpu_demand)
                if simulated.quota_kind is not None:
                    self._quota.hold(
                        simulated.key, simulated.quota_kind, simulated.region, simulated.gpu_demand
                    )
            else:
                # Only an on-demand or Spot job gets here without free GPUs: the service
                # tries to provision, then reports a stockout.
                simulated.outcome = replace(simulated.outcome, result=Result.STOCKOUT)
            delay = self._timings.provisioning
        self._set_state(simulated, JobState.JOB_STATE_PENDING)
        self._schedule(self.now + timedelta(seconds=delay), EventKind.PROVISIONED, simulated.key)

    def _must_reject_for_full_resource(self, simulated: SimulatedJob) -> bool:
        # With `reject`, a job that cannot start at once fails, also when others wait before it.
        return (
            self._reject_when_full
            and simulated.placement == Placement.PERSISTENT_RESOURCE
            and self._must_wait(simulated)
        )

    def _reject_for_full_resource(self, simulated: SimulatedJob) -> None:
        assert simulated.persistent_resource is not None
        free = self._resources.free_replicas(simulated.persistent_resource)
        error = failures.persistent_resource_full(
            simulated.persistent_resource,
            needed=_describe_replicas(simulated.pool_demand),
            free=_describe_replicas({pool: free.get(pool, 0) for pool in simulated.pool_demand}),
        )
        self._end(simulated, JobState.JOB_STATE_FAILED, error)

    def _queue_key(self, simulated: SimulatedJob) -> str:
        if simulated.persistent_resource is not None:
            return simulated.persistent_resource
        accelerators = ",".join(sorted(simulated.gpu_demand)) or "cpu"
        if simulated.placement in _NO_CAPACITY_WAIT:
            # Waiting for quota only (FLEX_START jobs wait for GPUs too): a queue of its own.
            return f"{simulated.region}/{accelerators} ({simulated.quota_kind} quota)"
        return f"{simulated.region}/{accelerators}"

    def _leave_queue(self, simulated: SimulatedJob) -> None:
        queue = self._queues.get(self._queue_key(simulated), [])
        if simulated.key in queue:
            queue.remove(simulated.key)

    # -- state ----------------------------------------------------------------------------

    def _end(
        self,
        simulated: SimulatedJob,
        state: JobState,
        error: status_pb2.Status | None = None,
    ) -> None:
        self._capacity.release(simulated.key)
        self._quota.release(simulated.key)
        self._resources.release(simulated.key)
        self._reservations.release(simulated.key)
        delay = self._timings.error_delay
        if error is not None and state == JobState.JOB_STATE_FAILED and delay > 0:
            # The real service sets a failed job's error about a minute after its end.
            simulated.pending_error = error
            self._schedule(self.now + timedelta(seconds=delay), EventKind.ERROR_SET, simulated.key)
        elif error is not None:
            simulated.job.error = error
        self._set_state(simulated, state)

    def _set_state(self, simulated: SimulatedJob, state: JobState) -> None:
        job = simulated.job
        if job.state == JobState.JOB_STATE_RUNNING and state != JobState.JOB_STATE_RUNNING:
            # Preempted, failed, cancelled or done: its work stops here (progress.py).
            self.progress.stop(simulated.key, self.now, state.name)
        job.state = state
        job.update_time = self.now
        if state == JobState.JOB_STATE_RUNNING and not job.start_time:
            job.start_time = self.now
        if state in TERMINAL_STATES:
            job.end_time = self.now
        if simulated.owner is not None:
            # Its owner writes the log lines, and moves on from here.
            if self.on_owned_job_changed is not None:
                self.on_owned_job_changed(simulated)
            return
        pending = simulated.pending_error
        error = job.error.message or (pending.message if pending is not None else "")
        self.logs.state_changed(job, state, self.now, error)

    def _schedule(
        self,
        at: datetime,
        kind: EventKind,
        job_key: str = "",
        capacity_change: CapacityChange | None = None,
    ) -> None:
        event = Event(at, kind, next(self._sequence), job_key, capacity_change)
        heapq.heappush(self._events, event)


def _describe_replicas(per_pool: dict[str, int]) -> str:
    return ", ".join(f"{count} in pool {pool}" for pool, count in sorted(per_pool.items()))
