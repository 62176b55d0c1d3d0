"""How a job ended: its terminal state and ``error`` (google.rpc.Status) → a failure class.

Every kind of job is classified through its ``CustomJob`` view (``policy.job_views.view_of``), by
the same rows: a TrainingPipeline's ``PIPELINE_STATE_X`` is read as ``JOB_STATE_X``, and its
error is its training task's. A HyperparameterTuningJob's error embeds the error of the trial that
failed it ("3 of 20 trials failed. Trial 7: The replica workerpool0-0 exited with a non-zero
status of 1 ..."; the real service's wording is undocumented, the emulator's is this), so the rows
read the trial's text: a sweep whose trials failed in user code is ``USER_CODE``, one whose trial
stocked out or waited past its FLEX_START max wait is ``CAPACITY``. A sweep's error that names no
trial's error matches no row: ``UNKNOWN``. The FLEX_START max wait is the trial job's or the
training task's (their ``scheduling`` is the view's ``job_spec.scheduling``).

Two assumptions about sweeps and pipelines come from the emulator, not from a published text
(docs/vertex-ai-emulator.md, "Hyperparameter tuning jobs and training pipelines"): that a sweep or
pipeline stays QUEUED / PENDING, without a ``start_time``, while its trials / training task wait
for FLEX_START capacity; and the "... Trial T: <trial error>" wording of a sweep's error. If the
real service differs, the wait-ran-out rule below (which reads the sweep's or pipeline's own state
and ``start_time``, as does the queue watchdog) does not fire for a sweep that started while its
trials waited, and an error without the trial's message is read by its code alone: what no row
recognises is ``UNKNOWN``, alerted (retried only when ``retry_on`` lists ``unknown``), never a
silent retry.

Pure and cheap: no Google Cloud client is imported (the job is only read through ``state.name``,
``error.code`` / ``error.message`` and its timestamps), so the reconciler and the CLI may classify
freely.

Two rules come before the verdict table, because the real service's texts cannot carry them:

- **a FLEX_START wait that ran out is capacity, whatever the job says** (``wait_ran_out``): what
  Vertex AI reports when a FLEX_START job's max wait passes is undocumented (the emulator's
  "max wait duration" text is our own invention), so a FLEX_START job that never got a
  ``start_time`` and ended, FAILED or CANCELLED by the service, at or after ``create_time`` plus
  its max wait is ``CAPACITY`` (the next placement of the chain). A CANCELLED job counts only
  when nobody asked for the cancel (the reconciler's watchdog records its own) and it ended within
  ``SERVICE_EXPIRY_WINDOW`` of the deadline: a human's later cancel stays a cancel. The message
  row "FLEX_START max wait expired" remains as the second signal, for jobs whose times are
  missing.
- **who asked for a cancel decides what it means** (``cancel_reason``, on the attempt): the queue
  watchdog's (``queue_timeout``) is ``CAPACITY``, the placement did not take the job in time, so
  the run moves along the chain; an operator's (or one recorded without a reason) is
  ``CANCELLED``, never retried.
- **an empty error may not be the last word** (``error_pending``): Google's "Understand the
  custom training service" page says the error code is set about a minute after the job ends.
  A FAILED job read sooner has no error yet; the caller records it and decides on a later read,
  until ``ERROR_SETTLE_TIME`` after the end (then no error means ``UNKNOWN``, as before).

The verdict table ``CLASSIFICATION_RULES`` is ordered; the first row that matches wins. It is built
from the texts the real service puts in ``CustomJob.error`` (quoted in GitHub issues and Google's
docs) and from the texts the project's Vertex AI emulator produces
(``vertex_ai_emulator/failures.py``). The order carries the rules that codes alone cannot:

- code 8 (RESOURCE_EXHAUSTED) is shared by stockouts and quota ceilings: quota wording wins,
  any other code-8 failure is capacity (docs/architecture.md, "The Vertex AI rules": a FLEX_START
  wait that expired is capacity);
- code 3 (INVALID_ARGUMENT) is also what a replica exiting non-zero reports: the replica-exit text
  makes it user code, and only without it is the spec invalid;
- a replica's exit message may quote the training code's own traceback (which can mention quota
  or resources), so the replica-exit row comes before the quota and stockout rows;
- a Spot preemption ("preempted") and a reservation without free VMs are capacity, each its own
  row after the replica-exit and quota rows (a traceback may say "preempted"; quota wording
  wins) and before the stockout row, which their texts may also match, so the evidence names the
  placement's own reason; a preemption reported with a code the codes-only rows read as
  infrastructure (10, 13, 14) is still capacity.

States: SUCCEEDED succeeds; CANCELLED (or code 1 CANCELLED) is ``CANCELLED``; EXPIRED is
``CAPACITY`` unless its error says quota; PARTIALLY_SUCCEEDED (which CustomJobs do not report;
batch prediction does) is ``UNKNOWN``: it is not a success we may build on.

``UNKNOWN`` means "no row recognised the error": a FAILED job with no error, codes such as
2 UNKNOWN or 4 DEADLINE_EXCEEDED (the job's own timeout), or a message we have never seen. It is
retried, like an infrastructure failure, only when the template's ``retry.retry_on`` lists
``unknown``; otherwise the run is alerted with the job's error so a human can judge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from shared.config.model import FailureClass
from shared.model.errors import PermanentError
from shared.model.jobstates import TERMINAL_STATES, JobStateName, is_terminal
from shared.model.runs import CancelReason
from shared.policy.timing import ERROR_SETTLE_TIME, SERVICE_EXPIRY_WINDOW

if TYPE_CHECKING:
    from shared.aiplatform import CustomJob

SUCCEEDED_STATE: Final = JobStateName.SUCCEEDED
FAILED_STATE: Final = JobStateName.FAILED
CANCELLED_STATE: Final = JobStateName.CANCELLED
EXPIRED_STATE: Final = JobStateName.EXPIRED
PARTIALLY_SUCCEEDED_STATE: Final = JobStateName.PARTIALLY_SUCCEEDED

# google.rpc.Code numbers and names, for summaries a human reads.
RPC_CODE_NAMES: Final[Mapping[int, str]] = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}
PERMISSION_CODES: Final[frozenset[int]] = frozenset({7, 16})

SUMMARY_MESSAGE_CHARS: Final = 160

WAIT_RAN_OUT_RULE: Final = "FLEX_START never started and ended past its max wait"
QUOTA_METRIC: Final = re.compile(r"aiplatform\.googleapis\.com/[a-z0-9_]+")


class NotTerminal(PermanentError):
    """A job was classified before it ended; only terminal jobs have an outcome."""


@dataclass(frozen=True)
class ClassificationRule:
    """One row of the verdict table: which jobs it matches and the class they get.

    ``states`` and ``codes`` of None match any; ``pattern`` of None matches any message.
    """

    rule: str  # names the row in evidence and logs
    failure: FailureClass
    states: frozenset[str] | None = None
    codes: frozenset[int] | None = None
    pattern: re.Pattern[str] | None = None

    def matches(self, state: str, code: int, message: str) -> bool:
        return (
            (self.states is None or state in self.states)
            and (self.codes is None or code in self.codes)
            and (self.pattern is None or bool(self.pattern.search(message)))
        )


def _text(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# Ordered: the first matching row wins (module docstring). Comments quote the texts each row is for.
CLASSIFICATION_RULES: Final[tuple[ClassificationRule, ...]] = (
    ClassificationRule(
        "state cancelled", FailureClass.CANCELLED, states=frozenset({CANCELLED_STATE})
    ),
    # "CustomJob was cancelled."
    ClassificationRule("code 1 CANCELLED", FailureClass.CANCELLED, codes=frozenset({1})),
    ClassificationRule(
        "partially succeeded is not success",
        FailureClass.UNKNOWN,
        states=frozenset({PARTIALLY_SUCCEEDED_STATE}),
    ),
    # Vertex restarts a worker up to 5 times, then the whole job up to 3 times, then fails it.
    ClassificationRule(
        "worker restarts exhausted",
        FailureClass.INFRASTRUCTURE,
        pattern=_text(
            r"restart(?:s|ed)?\b.{0,80}\b(?:exhausted|exceeded|too many|maximum|limit)"
            r"|(?:too many|maximum number of) (?:worker |replica )?restarts"
        ),
    ),
    # "The replica workerpool0-0 exited with a non-zero status of 1. To find out more ..."
    # "The replica workerpool0-0 exited with a non-zero status of 128. Termination reason:
    #  StartError." / "Replica exited with a non-zero status code 1"
    ClassificationRule(
        "replica exited non-zero",
        FailureClass.USER_CODE,
        pattern=_text(r"\breplica\b.{0,60}\bexited with a non-zero status"),
    ),
    # "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_..."
    # "Quota exceeded for aiplatform.googleapis.com/custom_model_training_nvidia_h100_gpus"
    # "Quota failure for project P. The request for 2 K80 accelerators exceeds the allowed ..."
    ClassificationRule(
        "quota ceiling",
        FailureClass.QUOTA,
        pattern=_text(r"\bquota (?:metrics? )?exceed|\bquota exceeded|\bquota failure"),
    ),
    # Spot VMs taken back by Compute Engine. Google's Spot page for Vertex AI inference says a
    # preempted job "fails with a STOCKOUT error" (the stockout row reads that); for training it
    # says nothing; the emulator's text says "preempted" and gives the stockout wording too. Its
    # own row, so the evidence names the preemption; after the replica-exit row (a trainer's
    # traceback may say "preempted") and the quota row (quota wording wins), before the
    # codes-only rows (a preemption reported as 10 ABORTED or 14 UNAVAILABLE is still capacity:
    # the Spot placement lost its VMs, the service did not fail).
    ClassificationRule(
        "Spot VM preempted", FailureClass.CAPACITY, pattern=_text(r"\bpre-?empted\b")
    ),
    # "Reservation projects/P/zones/Z/reservations/N has insufficient capacity: resources are
    #  insufficient in zone Z" (the emulator's; the service's text is undocumented). Before the
    # stockout row, which would also match, so the evidence says it was the reservation.
    ClassificationRule(
        "reservation without capacity",
        FailureClass.CAPACITY,
        pattern=_text(
            r"\breservations?\b.{0,200}?(?:insufficient capacity|not enough (?:capacity|resources)"
            r"|(?:does not|doesn't) have (?:enough|sufficient) (?:capacity|resources)"
            r"|no (?:free|available|remaining) (?:capacity|vms?|instances))"
            r"|insufficient reservation capacity"
        ),
    ),
    ClassificationRule("state expired", FailureClass.CAPACITY, states=frozenset({EXPIRED_STATE})),
    # "Resources are insufficient in persistent resource R: the job needs ... only ... are free"
    ClassificationRule(
        "persistent resource full",
        FailureClass.CAPACITY,
        pattern=_text(r"insufficient in persistent resource|persistent resource \S+ is full"),
    ),
    # "The job could not be scheduled within its max wait duration of 2h. ..." is the emulator's
    # wording, not the service's (which is undocumented): the second signal after
    # ``wait_ran_out``, for a job whose create or end time is missing.
    ClassificationRule(
        "FLEX_START max wait expired",
        FailureClass.CAPACITY,
        pattern=_text(r"max(?:imum)?[ _]wait[ _]duration"),
    ),
    # "Resources are insufficient in region: us-central1. Please try a different region. ..."
    # "The zone 'projects/P/zones/us-central1-a' does not have enough resources available to
    #  fulfill the request. Try a different zone, or try again later."
    # "ZONE_RESOURCE_POOL_EXHAUSTED" (the Compute Engine code the zone message comes with)
    ClassificationRule(
        "stockout",
        FailureClass.CAPACITY,
        pattern=_text(
            r"resources are insufficient in (?:region|zone)"
            r"|does not have enough resources available"
            r"|zone_resource_pool_exhausted|resource pool exhausted|\bstockout"
        ),
    ),
    ClassificationRule("code 8 without quota wording", FailureClass.CAPACITY, codes=frozenset({8})),
    # "Internal error occurred for the current attempt."
    ClassificationRule(
        "internal error",
        FailureClass.INFRASTRUCTURE,
        pattern=_text(r"\binternal error occurred|\binternal error\b"),
    ),
    ClassificationRule(
        "code 10/13/14 ABORTED, INTERNAL, UNAVAILABLE",
        FailureClass.INFRASTRUCTURE,
        codes=frozenset({10, 13, 14}),
    ),
    # A human must grant a role: retrying cannot help, so it is a configuration fault.
    ClassificationRule("permission denied", FailureClass.INVALID_SPEC, codes=PERMISSION_CODES),
    ClassificationRule(
        "code 3/5/9/11 INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, OUT_OF_RANGE",
        FailureClass.INVALID_SPEC,
        codes=frozenset({3, 5, 9, 11}),
    ),
)


@dataclass(frozen=True)
class Classification:
    """What one terminal job came to, and why we think so."""

    state: str  # the JobState name, e.g. "JOB_STATE_FAILED"
    succeeded: bool
    failure: FailureClass | None  # None when succeeded
    code: int | None  # google.rpc.Code of the job's error; None when it has none
    message: str  # the job's error message, verbatim ("" when none)
    evidence: str  # the verdict row (or state) that decided, for logs
    summary: str  # one line for logs, alerts and the CLI

    def error_record(self) -> dict[str, Any] | None:
        """The attempt's ``error`` map as the ledger stores it; None for a success."""
        if self.succeeded or self.failure is None:
            return None
        return {"code": self.code, "message": self.message, "class": self.failure.value}


CANCEL_REQUESTED_RULE = "cancel requested by us"
QUEUE_TIMEOUT_RULE = "cancelled by the queue watchdog: the placement did not take it"


def classify(
    job: CustomJob,
    *,
    max_wait: timedelta | None = None,
    cancel_requested: bool = False,
    cancel_reason: CancelReason | None = None,
) -> Classification:
    """The outcome of a terminal ``job``; ``NotTerminal`` when it has not ended yet.

    ``max_wait`` is the job's FLEX_START max wait (None: not a FLEX_START job, or one that waits
    forever); ``cancel_requested`` says we asked for the job's cancel, ``cancel_reason`` why
    (None with ``cancel_requested``: an operator). An operator's cancel makes
    a FAILED or CANCELLED end CANCELLED. The queue watchdog's makes it CAPACITY, as the
    placement did not take the job in time: a CANCELLED end, or a FAILED one of a job that
    never started; a job that started before the cancel reached it and then FAILED is read by
    its error like any other. Otherwise a wait that ran out is capacity whatever the job's error
    says (``wait_ran_out``).
    """
    state = job.state.name
    if cancel_requested and cancel_reason is CancelReason.QUEUE_TIMEOUT:
        if state == CANCELLED_STATE or (state == FAILED_STATE and job.start_time is None):
            return _failed_as(job, FailureClass.CAPACITY, QUEUE_TIMEOUT_RULE)
        if state == FAILED_STATE:
            return classify_error(state, job.error.code, job.error.message, job_name=job.name)
    if cancel_requested and state in (FAILED_STATE, CANCELLED_STATE):
        # We asked for the cancel: a FAILED end (a container that exits non-zero on SIGTERM)
        # is that cancel too, never a failure to retry. Vertex AI may still end it SUCCEEDED.
        return _failed_as(job, FailureClass.CANCELLED, CANCEL_REQUESTED_RULE)
    if is_terminal(state) and wait_ran_out(job, max_wait, cancel_requested=cancel_requested):
        return _failed_as(job, FailureClass.CAPACITY, WAIT_RAN_OUT_RULE)
    return classify_error(state, job.error.code, job.error.message, job_name=job.name)


def _failed_as(job: CustomJob, failure: FailureClass, evidence: str) -> Classification:
    """``job``'s end as ``failure``, by a rule about the job rather than its error's text."""
    state, code, message = job.state.name, job.error.code, job.error.message
    return Classification(
        state=state,
        succeeded=False,
        failure=failure,
        code=code or None,
        message=message,
        evidence=evidence,
        summary=_summary(state, failure, code, message),
    )


def wait_ran_out(
    job: CustomJob,
    max_wait: timedelta | None,
    *,
    cancel_requested: bool = False,
) -> bool:
    """Whether ``job``, a FLEX_START job allowed to wait ``max_wait``, ended because the wait
    ran out: it never started, it ended FAILED, or CANCELLED by the service (not asked for by us,
    and within ``SERVICE_EXPIRY_WINDOW`` of the deadline), at or after ``create_time + max_wait``.
    """
    if max_wait is None or max_wait <= timedelta(0):
        return False
    state = job.state.name
    if state not in (FAILED_STATE, CANCELLED_STATE) or job.start_time is not None:
        return False
    created, ended = job.create_time, job.end_time or job.update_time
    if created is None or ended is None:
        return False
    deadline = created + max_wait
    if ended < deadline:
        return False
    if state == CANCELLED_STATE:
        return not cancel_requested and ended < deadline + SERVICE_EXPIRY_WINDOW
    return True


def error_pending(job: CustomJob, now: datetime) -> timedelta | None:
    """How much longer to wait for the error of a FAILED ``job`` that has none yet; None when
    the job is to be decided now (it has an error, is not FAILED, or ended long enough ago).

    See ``ERROR_SETTLE_TIME``. A job without an end or update time is decided now: there is no
    way to tell how long its error has had. An end in the future (clock skew) waits.
    """
    if job.state.name != FAILED_STATE or job.error.code or job.error.message:
        return None
    ended = job.end_time or job.update_time
    if ended is None:
        return None
    left = ended + ERROR_SETTLE_TIME - now
    return left if left > timedelta(0) else None


def classify_error(state: str, code: int, message: str, *, job_name: str = "") -> Classification:
    """The outcome of a job that ended in ``state`` with error ``code`` and ``message``."""
    if not is_terminal(state):
        raise NotTerminal(
            f"job {job_name or '(unnamed)'} is {state}, not terminal: classify only jobs in "
            f"{', '.join(sorted(TERMINAL_STATES))}; read the job again once it has ended"
        )
    error_code = code or None
    if state == SUCCEEDED_STATE:
        return Classification(state, True, None, error_code, message, "state succeeded", state)
    verdict = next((row for row in CLASSIFICATION_RULES if row.matches(state, code, message)), None)
    failure = verdict.failure if verdict else FailureClass.UNKNOWN
    evidence = verdict.rule if verdict else "no verdict row matched"
    return Classification(
        state=state,
        succeeded=False,
        failure=failure,
        code=error_code,
        message=message,
        evidence=evidence,
        summary=_summary(state, failure, code, message),
    )


def quota_metric(message: str) -> str | None:
    """The quota metric a quota error names (``aiplatform.googleapis.com/...``), if any."""
    found = QUOTA_METRIC.search(message)
    return found.group(0) if found else None


def _summary(state: str, failure: FailureClass, code: int, message: str) -> str:
    code_text = f" (code {code} {RPC_CODE_NAMES.get(code, 'UNRECOGNISED')})" if code else ""
    first_line = message.strip().splitlines()[0] if message.strip() else "no error message"
    if len(first_line) > SUMMARY_MESSAGE_CHARS:
        first_line = first_line[: SUMMARY_MESSAGE_CHARS - 1] + "…"
    return f"{state}: {failure.value}{code_text}: {first_line}"
