"""When a job's end may be decided, and what its timestamps say (shared.policy.classify,
shared.handlers.jobstate).

Two facts of the real service that a job's error alone does not carry:

- Vertex AI sets a failed job's error "about one minute after a job ends" (Google's "Understand
  the custom training service" page): a FAILED job read sooner has none. ``outcomes.error_pending``
  says how long to wait; ``jobstate.record_job_state`` records such an end without deciding it
  (DEFERRED) and decides on a later read, or once ``ERROR_SETTLE_TIME`` has passed.
- What it reports when a FLEX_START job's max wait runs out is undocumented: a FLEX_START job that
  never started and ended (FAILED, or CANCELLED by the service) at or after ``create_time`` plus
  its max wait is capacity whatever its error says (``outcomes.wait_ran_out``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from google.cloud import aiplatform_v1
from google.rpc import status_pb2
from run_builders import LOCAL_PARENT, RUN_ID, a_run, an_attempt, job_name

from shared.config.loader import parse_config
from shared.config.model import FailureClass
from shared.handlers.jobstate import JobStateOutcome, record_job_state
from shared.handlers.services import Services
from shared.model.cooldowns import Cooldown
from shared.model.runs import (
    AttemptOutcome,
    JobTimes,
    Run,
    RunSnapshot,
    RunStatus,
    with_decision,
    with_observed_state,
)
from shared.policy.classify import (
    WAIT_RAN_OUT_RULE,
    classify,
    error_pending,
    wait_ran_out,
)
from shared.policy.reconcile_plan import StateChange, plan_tick
from shared.policy.timing import ERROR_SETTLE_TIME, SERVICE_EXPIRY_WINDOW
from vertex_ai_emulator import failures

CREATED = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
MAX_WAIT = timedelta(hours=1)
DEADLINE = CREATED + MAX_WAIT
JOB = job_name(1)

FAILED = "JOB_STATE_FAILED"
CANCELLED = "JOB_STATE_CANCELLED"
NO_ERROR = status_pb2.Status()
INVENTED_EXPIRY = failures.flex_start_wait_expired("us-central1", 3600)  # the emulator's text
INTERNAL = failures.internal_error()
USER_EXIT = status_pb2.Status(
    code=3, message="The replica workerpool0-0 exited with a non-zero status of 1."
)
CANCEL = failures.cancelled()


def job(
    state: str = FAILED,
    error: status_pb2.Status = NO_ERROR,
    *,
    ended: datetime | None = DEADLINE,
    started: datetime | None = None,
    created: datetime | None = CREATED,
    updated: datetime | None = None,
    flex_start: bool = True,
) -> aiplatform_v1.CustomJob:
    """A CustomJob as Get or List returns it; ``updated`` defaults to ``ended``."""
    custom_job = aiplatform_v1.CustomJob(
        name=JOB,
        state=aiplatform_v1.JobState[state],
        labels={"vd-run": RUN_ID, "vd-attempt": "1"},
    )
    if error.code or error.message:
        custom_job.error = error
    if created is not None:
        custom_job.create_time = created
    if started is not None:
        custom_job.start_time = started
    if ended is not None:
        custom_job.end_time = ended
    if updated or ended:
        custom_job.update_time = updated or ended
    if flex_start:
        scheduling = custom_job.job_spec.scheduling
        scheduling.strategy = aiplatform_v1.Scheduling.Strategy.FLEX_START
        scheduling.max_wait_duration = MAX_WAIT
    return custom_job


# -- the max wait ran out: structure first, the message second ------------------------------

MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("the_job", "max_wait", "cancel_requested", "failure", "evidence"),
    [
        pytest.param(
            job(error=INVENTED_EXPIRY),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            WAIT_RAN_OUT_RULE,
            id="failed-at-the-deadline-with-the-emulators-text",
        ),
        pytest.param(
            job(ended=DEADLINE + 5 * MINUTE),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            WAIT_RAN_OUT_RULE,
            id="failed-past-the-deadline-without-an-error",
        ),
        pytest.param(
            job(error=INTERNAL),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            WAIT_RAN_OUT_RULE,
            id="failed-at-the-deadline-whatever-its-code",
        ),
        pytest.param(
            job(error=status_pb2.Status(code=4, message="Deadline exceeded.")),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            WAIT_RAN_OUT_RULE,
            id="failed-at-the-deadline-with-an-unknown-text",
        ),
        pytest.param(
            job(CANCELLED, CANCEL, ended=DEADLINE + MINUTE),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            WAIT_RAN_OUT_RULE,
            id="cancelled-by-the-service-at-the-deadline",
        ),
        pytest.param(
            job(CANCELLED, CANCEL, ended=DEADLINE + MINUTE),
            MAX_WAIT,
            True,
            FailureClass.CANCELLED,
            "cancel requested by us",
            id="cancelled-by-our-watchdog",
        ),
        pytest.param(
            job(CANCELLED, CANCEL, ended=DEADLINE + SERVICE_EXPIRY_WINDOW),
            MAX_WAIT,
            False,
            FailureClass.CANCELLED,
            "state cancelled",
            id="cancelled-long-after-the-deadline-is-a-humans-cancel",
        ),
        pytest.param(
            job(CANCELLED, CANCEL, ended=DEADLINE - MINUTE),
            MAX_WAIT,
            False,
            FailureClass.CANCELLED,
            "state cancelled",
            id="cancelled-before-the-deadline",
        ),
        pytest.param(
            job(ended=DEADLINE - MINUTE),
            MAX_WAIT,
            False,
            FailureClass.UNKNOWN,
            "no verdict row matched",
            id="failed-before-the-deadline-without-an-error",
        ),
        pytest.param(
            job(error=failures.stockout("us-central1"), ended=DEADLINE - MINUTE),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            "stockout",
            id="failed-before-the-deadline-by-its-message",
        ),
        pytest.param(
            job(error=USER_EXIT, started=CREATED + 5 * MINUTE, ended=DEADLINE + 30 * MINUTE),
            MAX_WAIT,
            False,
            FailureClass.USER_CODE,
            "replica exited non-zero",
            id="a-job-that-started-is-judged-by-its-error",
        ),
        pytest.param(
            job(flex_start=False),
            None,
            False,
            FailureClass.UNKNOWN,
            "no verdict row matched",
            id="no-max-wait-no-structural-rule",
        ),
        pytest.param(
            job(ended=None, updated=DEADLINE + MINUTE),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            WAIT_RAN_OUT_RULE,
            id="update-time-stands-in-for-a-missing-end",
        ),
        pytest.param(
            job(error=INVENTED_EXPIRY, created=None),
            MAX_WAIT,
            False,
            FailureClass.CAPACITY,
            "FLEX_START max wait expired",
            id="no-create-time-the-message-is-the-second-signal",
        ),
        pytest.param(
            job(created=None),
            MAX_WAIT,
            False,
            FailureClass.UNKNOWN,
            "no verdict row matched",
            id="no-create-time-no-message",
        ),
    ],
)
def test_a_flex_start_wait_that_ran_out_is_capacity(
    the_job: aiplatform_v1.CustomJob,
    max_wait: timedelta | None,
    cancel_requested: bool,
    failure: FailureClass,
    evidence: str,
) -> None:
    result = classify(the_job, max_wait=max_wait, cancel_requested=cancel_requested)

    assert (result.failure, result.evidence) == (failure, evidence)
    assert (result.code, result.message) == (the_job.error.code or None, the_job.error.message)
    assert result.summary.startswith(f"{the_job.state.name}: {failure.value}")


@pytest.mark.parametrize("max_wait", [None, timedelta(0)])
def test_a_wait_without_bound_never_runs_out(max_wait: timedelta | None) -> None:
    assert not wait_ran_out(job(ended=DEADLINE + timedelta(days=30)), max_wait)


def test_classify_without_a_max_wait_is_the_verdict_table_as_before() -> None:
    assert classify(job(error=INVENTED_EXPIRY)).evidence == "FLEX_START max wait expired"
    assert classify(job()).failure is FailureClass.UNKNOWN


# -- the error comes about a minute after the end ---------------------------------------------

END = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("the_job", "now", "left"),
    [
        pytest.param(job(ended=END), END, ERROR_SETTLE_TIME, id="read-at-the-end"),
        pytest.param(
            job(ended=END),
            END + timedelta(seconds=30),
            timedelta(minutes=2, seconds=30),
            id="read-30s-after",
        ),
        pytest.param(job(ended=END), END + ERROR_SETTLE_TIME, None, id="read-at-the-settle-time"),
        pytest.param(job(ended=END), END + timedelta(hours=1), None, id="read-long-after"),
        pytest.param(
            job(ended=END), END - MINUTE, ERROR_SETTLE_TIME + MINUTE, id="end-ahead-of-our-clock"
        ),
        pytest.param(job(error=USER_EXIT, ended=END), END, None, id="error-set"),
        pytest.param(
            job(error=status_pb2.Status(message="Something happened."), ended=END),
            END,
            None,
            id="message-without-code",
        ),
        pytest.param(job(CANCELLED, ended=END), END, None, id="cancelled-needs-no-error"),
        pytest.param(job("JOB_STATE_SUCCEEDED", ended=END), END, None, id="succeeded"),
        pytest.param(
            job(ended=None, updated=END), END + MINUTE, timedelta(minutes=2), id="update-time"
        ),
        pytest.param(job(ended=None), END, None, id="no-time-to-judge-by"),
    ],
)
def test_error_pending(
    the_job: aiplatform_v1.CustomJob, now: datetime, left: timedelta | None
) -> None:
    assert error_pending(the_job, now) == left


# -- the job-state function defers, then decides ------------------------------------------

CONFIG = {
    "project": "local-project",
    "region": "us-central1",
    "alerts_topic": "alerts",
    "routes": [{"name": "on-request", "pubsub": {"attributes": {"kind": "train"}}}],
    "templates": {
        "two-regions": {
            "display_name": "two-regions-{run_id}-a{attempt}",
            "worker_pools": [
                {
                    "machine_type": "a2-highgpu-1g",
                    "accelerator": {"type": "NVIDIA_TESLA_A100", "count": 1},
                    "image": "us-docker.pkg.dev/local-project/train/resnet:1.4",
                }
            ],
            "placement": [
                {"flex_start": {"max_wait": "1h"}},
                {"flex_start": {"max_wait": "2h", "region": "us-east4"}},
            ],
            "retry": {"attempts": 3, "user_failures": 1},
        }
    },
}
FLEX_1H = {"flex_start": {"max_wait": "3600s"}}


@dataclass
class FakeLedger:
    """The ledger calls ``record_job_state`` makes, over the pure transitions (and the
    placement cooldowns a capacity end starts, kept in a list)."""

    run: Run
    writes: int = 0
    cooldowns: list[Cooldown] = field(default_factory=list)

    def start_cooldown(self, cooldown: Cooldown) -> None:
        self.cooldowns.append(cooldown)

    def get_run(self, run_id: str) -> RunSnapshot | None:
        return RunSnapshot(self.run, CREATED) if run_id == self.run.run_id else None

    def record_observed_state(
        self,
        run_id: str,
        attempt: int,
        job_name: str,
        state: str,
        error: Any,
        times: JobTimes | None = None,
    ) -> RunSnapshot:
        return self._write(with_observed_state(self.run, attempt, job_name, state, error, times))

    def record_decision(self, current: RunSnapshot, outcome: AttemptOutcome) -> RunSnapshot:
        return self._write(with_decision(current.run, outcome))

    def _write(self, run: Run) -> RunSnapshot:
        if run != self.run:
            self.run, self.writes = run, self.writes + 1
        return RunSnapshot(self.run, CREATED)


def running_run(status: RunStatus = RunStatus.RUNNING, **fields: Any) -> Run:
    """Run RUN_ID of the config above: its attempt 1, claimed at CREATED, has job JOB, running
    (or queued, while the run is SUBMITTED)."""
    attempt = an_attempt(
        1,
        placement=FLEX_1H,
        parent=LOCAL_PARENT,
        intent_at=CREATED,
        job_name=JOB,
        state="JOB_STATE_RUNNING" if status is RunStatus.RUNNING else "JOB_STATE_QUEUED",
    )
    return a_run(
        status,
        attempt,
        run_key="request:k",
        route="on-request",
        template="two-regions",
        trigger={},
        **fields,
    )


def cancel_requested(run: Run) -> Run:
    """``run`` whose last attempt's job we asked to cancel (as the watchdog records it)."""
    last = replace(run.attempts[-1], cancel_requested_at=DEADLINE)
    return replace(run, attempts=(*run.attempts[:-1], last))


def services_at(ledger: FakeLedger, now: datetime) -> Services:
    config = parse_config(yaml.safe_dump(CONFIG), "tests/job-end-timing.yaml")
    return Services(config, now=lambda: now, _ledger=ledger)  # type: ignore[arg-type]


RAN = CREATED + 5 * MINUTE  # a job that started
RAN_END = CREATED + 30 * MINUTE


@pytest.mark.parametrize(
    ("start", "reads", "outcomes", "status", "error_class"),
    [
        pytest.param(
            running_run(),
            [(job(started=RAN, ended=RAN_END), RAN_END + timedelta(seconds=5))],
            [JobStateOutcome.DEFERRED],
            RunStatus.RUNNING,
            None,
            id="hint-at-the-end-defers",
        ),
        pytest.param(
            running_run(),
            [
                (job(started=RAN, ended=RAN_END), RAN_END + timedelta(seconds=5)),
                (job(started=RAN, ended=RAN_END), RAN_END + timedelta(seconds=65)),
                (
                    job(error=USER_EXIT, started=RAN, ended=RAN_END),
                    RAN_END + timedelta(seconds=125),
                ),
            ],
            [JobStateOutcome.DEFERRED, JobStateOutcome.DEFERRED, JobStateOutcome.DECIDED],
            RunStatus.WAITING_RETRY,
            "user_code",
            id="deferred-until-the-error-comes-then-retried",
        ),
        pytest.param(
            running_run(),
            [
                (job(started=RAN, ended=RAN_END), RAN_END),
                (job(started=RAN, ended=RAN_END), RAN_END + ERROR_SETTLE_TIME),
            ],
            [JobStateOutcome.DEFERRED, JobStateOutcome.DECIDED],
            RunStatus.FAILED,
            "unknown",
            id="no-error-after-the-settle-time-is-unknown",
        ),
        pytest.param(
            running_run(),
            [(job(started=RAN, ended=RAN_END), RAN_END + timedelta(minutes=10))],
            [JobStateOutcome.DECIDED],
            RunStatus.FAILED,
            "unknown",
            id="first-read-long-after-decides-at-once",
        ),
        pytest.param(
            running_run(),
            [(job(error=INTERNAL, started=RAN, ended=RAN_END), RAN_END)],
            [JobStateOutcome.DECIDED],
            RunStatus.WAITING_RETRY,
            "infrastructure",
            id="error-already-set-decides-at-once",
        ),
        pytest.param(
            running_run(RunStatus.SUBMITTED),
            [(job(), DEADLINE)],
            [JobStateOutcome.DECIDED],
            RunStatus.WAITING_RETRY,
            "capacity",
            id="wait-ran-out-needs-no-error",
        ),
        pytest.param(
            running_run(RunStatus.SUBMITTED),
            [(job(CANCELLED, CANCEL, ended=DEADLINE + MINUTE), DEADLINE + MINUTE)],
            [JobStateOutcome.DECIDED],
            RunStatus.WAITING_RETRY,
            "capacity",
            id="cancelled-by-the-service-at-the-deadline-moves-on",
        ),
        pytest.param(
            cancel_requested(running_run(RunStatus.SUBMITTED)),
            [(job(CANCELLED, CANCEL, ended=DEADLINE + MINUTE), DEADLINE + MINUTE)],
            [JobStateOutcome.DECIDED],
            RunStatus.CANCELLED,
            "cancelled",
            id="cancelled-by-our-watchdog-stays-cancelled",
        ),
        pytest.param(
            # The watchdog cancelled attempt 1 long ago; this attempt nobody asked to cancel.
            running_run(RunStatus.SUBMITTED, alerts=("watchdog_overdue_wait",)),
            [(job(CANCELLED, CANCEL, ended=DEADLINE + MINUTE), DEADLINE + MINUTE)],
            [JobStateOutcome.DECIDED],
            RunStatus.WAITING_RETRY,
            "capacity",
            id="an-old-watchdog-alert-does-not-make-this-end-our-cancel",
        ),
        pytest.param(
            replace(
                running_run(RunStatus.SUBMITTED),
                attempts=(
                    replace(
                        running_run().attempts[0], placement={"flex_start": {"max_wait": "0s"}}
                    ),
                ),
            ),
            [(job(), DEADLINE)],
            [JobStateOutcome.DEFERRED],
            RunStatus.SUBMITTED,
            None,
            id="recorded-wait-forever-overrides-the-jobs-max-wait",
        ),
    ],
)
def test_the_job_state_function_decides_once_the_error_can_be_there(
    start: Run,
    reads: list[tuple[aiplatform_v1.CustomJob, datetime]],
    outcomes: list[JobStateOutcome],
    status: RunStatus,
    error_class: str | None,
) -> None:
    ledger = FakeLedger(start)
    seen = []
    for read, now in reads:
        result, _ = record_job_state(read, services_at(ledger, now), random.Random(4))
        seen.append(result.outcome)

    assert seen == outcomes
    assert ledger.run.status is status
    attempt = ledger.run.attempts[0]
    assert attempt.state == reads[-1][0].state.name
    assert (attempt.decision is None) is (outcomes[-1] is JobStateOutcome.DEFERRED)
    assert (attempt.error or {}).get("class") == error_class
    # A capacity end cools its placement down (FLEX_START, A100 machine, the config's region),
    # measured from the decision; no other end does.
    cooled = [(c.key, c.since) for c in ledger.cooldowns]
    expected = [("flex_start|us-central1|a2-highgpu-1g+NVIDIA_TESLA_A100x1", reads[-1][1])]
    assert cooled == (expected if error_class == "capacity" else [])


def test_a_deferred_end_is_a_change_the_next_tick_revisits() -> None:
    ledger = FakeLedger(running_run())
    ended = job(started=RAN, ended=RAN_END)
    record_job_state(ended, services_at(ledger, RAN_END), random.Random(4))
    config = services_at(ledger, RAN_END).config
    writes = ledger.writes

    def tick(listed: aiplatform_v1.CustomJob) -> tuple[StateChange, ...]:
        return plan_tick(
            [ledger.run],
            {JOB: listed},
            config.templates,
            now=RAN_END + MINUTE,
            grace=timedelta(minutes=30),
        ).changes

    assert tick(ended) == (StateChange(RUN_ID, JOB, FAILED),)
    # A second deferral writes nothing: the ledger already has the end.
    again, _ = record_job_state(ended, services_at(ledger, RAN_END + MINUTE), random.Random(4))
    assert (again.outcome, ledger.writes) == (JobStateOutcome.DEFERRED, writes)
    assert tick(job(error=USER_EXIT, started=RAN, ended=RAN_END)) == (
        StateChange(RUN_ID, JOB, FAILED),
    )
