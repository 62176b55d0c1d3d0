"""Simulated Cloud Logging entries of the emulated jobs (monitored resource ``ml_job``).

Vertex AI writes two kinds of log lines for a CustomJob, both with ``resource.type="ml_job"``:

- the **service** lines (``resource.labels.task_name="service"``), a few per job, at its state
  changes. For a successful job their texts are known (seen in ``gcloud ai custom-jobs
  stream-logs`` output) and the emulator writes exactly those. The texts of a failed or
  cancelled end are not published: the emulator writes "Job failed. <the job's error message>"
  at ERROR and "Job was cancelled." at INFO, stand-ins that are NOT the real texts;
- the **trainer** lines (``task_name="workerpool0-0"``): whatever the training code prints, any
  number of them. The emulator writes ``trainer_lines_per_second`` lines of made-up training
  output while a job runs (0 by default: none), a traceback at ERROR when its code fails.

The entries are LogEntry JSON as a log sink publishes them, numbered by a cursor that never
repeats in one process (not even across reset); the admin API serves them (``GET
logEntries?after=CURSOR``) and the local log-sink stand-in (``emulator_stack.logsink``) routes
the ones its filter takes to the job-events topic. At most ``MAX_ENTRIES`` are kept, oldest
dropped first.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import ConfigError
from vertex_ai_emulator.messages import rfc3339

JobState = aiplatform_v1.JobState

MAX_ENTRIES = 200_000
SERVICE_TASK = "service"
TRAINER_TASK = "workerpool0-0"
PROVISIONING_LINE = (
    "Vertex AI is provisioning job running framework. First time usage might take couple of "
    "minutes, and subsequent runs can be much faster."
)
TEAR_DOWN = ("Tearing down training program.", "Finished tearing down training program.")
# The service lines written as a job enters each state (the known texts of a successful job).
SERVICE_LINES: Mapping[int, tuple[str, ...]] = {
    JobState.JOB_STATE_QUEUED: ("Waiting for job to be provisioned.",),
    JobState.JOB_STATE_PENDING: (PROVISIONING_LINE, "Vertex AI is setting up this job."),
    JobState.JOB_STATE_RUNNING: (
        "Waiting for training program to start.",
        "Job is preparing.",
        "Job is running.",
    ),
    JobState.JOB_STATE_SUCCEEDED: (*TEAR_DOWN, "Job completed successfully."),
}
CANCELLED_LINE = "Job was cancelled."  # a stand-in: the real text is not published
FAILED_PREFIX = "Job failed."  # a stand-in: the real text is not published

Entry = dict[str, Any]


@dataclass(frozen=True)
class LogSettings:
    """How chatty the simulated jobs are."""

    trainer_lines_per_second: float = 0.0  # simulated seconds; 0: no trainer output at all


def log_settings_from_dict(raw: Any, base: LogSettings | None = None) -> LogSettings:
    """``base`` with what ``raw`` (the config's ``job_logs``) sets."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"job_logs: must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"trainer_lines_per_second"})
    if unknown:
        raise ConfigError(
            f"job_logs: unknown key(s) {', '.join(unknown)}; allowed: trainer_lines_per_second"
        )
    base = base or LogSettings()
    rate = raw.get("trainer_lines_per_second", base.trainer_lines_per_second)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or rate < 0:
        raise ConfigError(
            f"job_logs.trainer_lines_per_second: must be a non-negative number, got {rate!r}"
        )
    return LogSettings(trainer_lines_per_second=float(rate))


@dataclass
class TrainerOutput:
    """How much trainer output one running job has written so far."""

    since: datetime  # when it started running
    lines: int = 0


class JobLogs:
    """The entries written so far, oldest first, each with its cursor (1, 2, ...)."""

    def __init__(self, settings: LogSettings | None = None) -> None:
        self.settings = settings or LogSettings()
        self._entries: deque[tuple[int, Entry]] = deque(maxlen=MAX_ENTRIES)
        self._cursors = itertools.count(1)
        self._trainers: dict[str, TrainerOutput] = {}

    def clear(self) -> None:
        """Forget every entry (the cursor keeps counting, so a reader's cursor stays valid)."""
        self._entries.clear()
        self._trainers.clear()

    def entries(self, after: int = 0, limit: int = 1000) -> tuple[list[Entry], int]:
        """Up to ``limit`` entries whose cursor is above ``after``; and the cursor to pass next."""
        page = list(itertools.islice((e for e in self._entries if e[0] > after), limit))
        return [entry for _, entry in page], page[-1][0] if page else after

    def state_changed(
        self,
        job: aiplatform_v1.CustomJob,
        state: JobState,
        at: datetime,
        error_message: str = "",
    ) -> None:
        """Write the service lines of ``job`` entering ``state`` at ``at`` (``error_message``:
        a failed job's error, which the job itself may get only later)."""
        if state == JobState.JOB_STATE_RUNNING:
            self._trainers[job.name] = TrainerOutput(since=at)
        elif job.name in self._trainers:  # it stops running: its trainer has printed all
            self.trainer_output_until(at)
            del self._trainers[job.name]
        ran = bool(job.start_time)
        teardown = tuple(("INFO", text) for text in TEAR_DOWN) if ran else ()
        lines = tuple(("INFO", text) for text in SERVICE_LINES.get(state, ()))
        if state == JobState.JOB_STATE_FAILED:
            if ran:
                self._write(job.name, at, TRAINER_TASK, "ERROR", _TRACEBACK)
            failed = f"{FAILED_PREFIX} {error_message}" if error_message else FAILED_PREFIX
            lines = (*teardown, ("ERROR", failed))
        elif state == JobState.JOB_STATE_CANCELLED:
            lines = (*teardown, ("INFO", CANCELLED_LINE))
        for severity, text in lines:
            self._write(job.name, at, SERVICE_TASK, severity, text)

    def trainer_output_until(self, moment: datetime) -> None:
        """Write what the running jobs' trainers printed up to ``moment``, oldest first."""
        rate = self.settings.trainer_lines_per_second
        if rate <= 0 or not self._trainers:
            return
        due: list[tuple[datetime, str, int]] = []
        for name, output in self._trainers.items():
            total = math.floor((moment - output.since).total_seconds() * rate)
            for number in range(output.lines, total):
                due.append((output.since + timedelta(seconds=number / rate), name, number))
            output.lines = max(output.lines, total)
        for at, name, number in sorted(due):
            self._write_trainer_line(name, at, number)

    def _write_trainer_line(self, job_name: str, at: datetime, number: int) -> None:
        text = f"step {number}: loss={1.0 / (1 + number):.6f} lr=0.001"
        self._write(job_name, at, TRAINER_TASK, "INFO", text)

    def _write(self, job_name: str, at: datetime, task: str, severity: str, text: str) -> None:
        parts = job_name.split("/")  # projects/P/locations/R/customJobs/ID
        project, region, job_id = parts[1], parts[3], parts[-1]
        trainer = task != SERVICE_TASK
        self._append(_entry(project, job_id, region, task, severity, text, at, json=trainer))

    def _append(self, entry: Entry) -> None:
        cursor = next(self._cursors)
        entry["insertId"] = f"{cursor:016x}"
        self._entries.append((cursor, entry))

    def __len__(self) -> int:
        return len(self._entries)


_TRACEBACK = (
    'Traceback (most recent call last):\n  File "/trainer/task.py", line 42, in <module>\n'
    "    main()\nRuntimeError: Job failed: the training code raised"
)


def _entry(
    project: str,
    job_id: str,
    region: str,
    task: str,
    severity: str,
    text: str,
    at: datetime,
    *,
    json: bool,
) -> Entry:
    """One LogEntry as a log sink publishes it (the trainer's as jsonPayload, like Python
    logging's structured lines; the service's as textPayload)."""
    entry: Entry = {
        "logName": f"projects/{project}/logs/ml.googleapis.com%2F{job_id}",
        "resource": {
            "type": "ml_job",
            "labels": {"job_id": job_id, "project_id": project, "task_name": task},
        },
        "severity": severity,
        "timestamp": rfc3339(at),
        "receiveTimestamp": rfc3339(at),
    }
    if json:
        entry["jsonPayload"] = {"message": text, "levelname": severity}
        entry["labels"] = {"compute.googleapis.com/zone": f"{region}-a"}
    else:
        entry["textPayload"] = text
    return entry
