"""Which job-state hints are worth a Vertex AI read: the pure drop decision of ``on_job_event``.

A hint only says "look at job X" (docs/architecture.md, "Events are hints, state is read"); the
read is one ``GetCustomJob``, and Vertex AI's read quota is shared with the reconciler's
listings. So before reading, the job-state function screens the hint against what the ledger
records for the job's attempt, and drops (acknowledges without a read) every hint whose read
could not change what is recorded:

====================  =============================================================================
``hint_dropped``      when
====================  =============================================================================
``not_service``       a log entry of a task other than ``service`` (the trainer's own output: a
                      sink wider than ``hints.SINK_FILTER``)
``not_ours``          no run of the ledger records a job of this id: another system's job, or one
                      of ours recorded before the ledger stored ``job_ids`` (the reconciler covers
                      those), or one whose create answer was lost (the reconciler republishes the
                      retry and dispatch reattaches it), or a duplicate (the tick's listing)
``already_ended``     the attempt records its job's end: decided, or (for a log line) waiting for
                      the failed job's error, which no log line announces and the reconciler reads
``no_state_change``   a service line that says nothing new: a provisioning or tear-down step, or
                      "Job is running." while the attempt records the job running (or cancelling)
``already_recorded``  our job-state message whose observed state the attempt already records
``read_budget``       a log line while the attempt's hints have had ``HINT_READS_PER_ATTEMPT``
                      reads already (counted in the ledger before each read): the texts of a
                      failed end are unknown, so every ERROR line counts as a possible end, and
                      a job may write many before Vertex AI reports it ended
``throttled``         the read itself hit RESOURCE_EXHAUSTED (decided by the handler, after the
                      call): the reconciler reads the state anyway, and a redelivery would hit
                      the same quota
====================  =============================================================================

Otherwise the hint is read, by the exact job name the ledger records (no region search), of any
kind (a job-state message naming a job of another kind than the recorded one with the same id is
not ours). With a
successful job's service lines this leaves two reads per job ("Job is running." and "Job
completed successfully."); a failed or cancelled job's end lines are unknown (ERROR lines and
unknown "Job ..." lines count as possible ends), and each is read until the end is recorded, up
to the budget: whatever a job logs, its log hints cost at most ``HINT_READS_PER_ATTEMPT`` reads.
Our own job-state messages are not counted (a sender asks for a read on purpose, e.g. to decide a
failed job whose error has come).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from shared.decode.hints import HintSource, JobHint, LineMeaning
from shared.model.job_kinds import kind_of_job_name
from shared.model.jobstates import JobStateName, is_terminal
from shared.model.runs import Attempt, Run, is_older_news


class HintDrop(enum.StrEnum):
    """Why a hint was dropped without a Vertex AI read: the log field ``hint_dropped``."""

    NOT_SERVICE = "not_service"
    NOT_OURS = "not_ours"
    ALREADY_ENDED = "already_ended"
    NO_STATE_CHANGE = "no_state_change"
    ALREADY_RECORDED = "already_recorded"
    READ_BUDGET = "read_budget"
    THROTTLED = "throttled"


HINT_READS_PER_ATTEMPT = 3
"""Vertex AI reads log hints may cost per attempt: "Job is running.", the end, one to spare."""


# A job the attempt records in one of these is past "Job is running." (cancelling: it ran, or
# never will; the cancel's end is a possible-end line).
_RUNNING_OR_LATER = frozenset({JobStateName.RUNNING, JobStateName.CANCELLING})


@dataclass(frozen=True)
class Screened:
    """The screen's verdict: drop the hint (``drop``), or read ``job_name``."""

    drop: HintDrop | None
    run_id: str | None = None  # the run the ledger records the job on, when one does
    attempt: int | None = None
    job_name: str | None = None  # the job to read, as the ledger records it

    @property
    def read(self) -> bool:
        return self.drop is None


def screen_task(hint: JobHint) -> HintDrop | None:
    """``not_service`` for a log entry that Vertex AI did not write about the job; else None.

    Checked before the ledger is read: a wide sink must not cost a ledger read per trainer line.
    """
    if hint.source is HintSource.LOG_ENTRY and not hint.is_service_line:
        return HintDrop.NOT_SERVICE
    return None


def screen(hint: JobHint, runs: Sequence[Run]) -> Screened:
    """The verdict on ``hint`` given ``runs``, the runs whose ``job_ids`` hold its job id."""
    task = screen_task(hint)
    if task is not None:
        return Screened(task)
    verdicts = [
        Screened(_drop(hint, attempt), run.run_id, attempt.number, attempt.job_name)
        for run in runs
        for attempt in run.attempts
        if _records_job(attempt, hint)
    ]
    if not verdicts:
        return Screened(HintDrop.NOT_OURS, runs[0].run_id if runs else None)
    # Two runs recording one job id would be a collision of ids across regions: read if either
    # needs it (the job's labels then say which run it is).
    return next((verdict for verdict in verdicts if verdict.read), verdicts[0])


def _records_job(attempt: Attempt, hint: JobHint) -> bool:
    """Whether ``attempt`` records the hinted job: its id, in the hint's region and of the hint's
    kind when the hint says them (a log entry says neither: the recorded name is read)."""
    name = attempt.job_name
    if name is None or name.rsplit("/", 1)[-1] != hint.job_id:
        return False
    if hint.kind is not None and kind_of_job_name(name) is not hint.kind:
        return False
    return hint.region is None or f"/locations/{hint.region}/" in name


def _drop(hint: JobHint, attempt: Attempt) -> HintDrop | None:
    state = attempt.state
    if is_terminal(state) and attempt.decision is not None:
        return HintDrop.ALREADY_ENDED
    if hint.source is HintSource.LOG_ENTRY:
        return _drop_log_line(hint.meaning, attempt)
    observed = hint.observed_state
    if observed is None:
        return None
    if observed == state and not is_terminal(state):
        return HintDrop.ALREADY_RECORDED
    if is_older_news(attempt, observed):
        return HintDrop.ALREADY_ENDED
    return None


def _drop_log_line(meaning: LineMeaning | None, attempt: Attempt) -> HintDrop | None:
    if is_terminal(attempt.state):
        # Recorded, not decided: a FAILED end waiting for its error (the reconciler decides it
        # when the error is set; no log line says when), or an older attempt's end.
        return HintDrop.ALREADY_ENDED
    if meaning is None or meaning is LineMeaning.NOTHING:
        return HintDrop.NO_STATE_CHANGE
    if meaning is LineMeaning.RUNNING and attempt.state in _RUNNING_OR_LATER:
        return HintDrop.NO_STATE_CHANGE
    if attempt.hint_reads >= HINT_READS_PER_ATTEMPT:
        return HintDrop.READ_BUDGET
    return None
