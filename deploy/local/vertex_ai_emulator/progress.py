"""Training progress and checkpoints, per output directory: what a resubmitted job resumes from.

An outcome with `work` (outcomes.py) is a training that needs that much RUNNING time in all; with
`checkpoint_every` it saves a checkpoint each time its progress reaches a multiple of that
interval (and once more when the work is done). Progress is kept per output directory, the job's
`jobSpec.baseOutputDirectory.outputUriPrefix` (a trial of a tuning job: `DIR/TRIAL/`, Vertex AI's
layout), so every attempt of a run that shares one directory shares its checkpoints:

- a job starts RUNNING from progress 0, or, when its env has `VERTEX_DISPATCH_PREVIOUS_OUTPUT`
  naming a directory with a checkpoint, from that directory's last checkpoint (its trials from
  `PREVIOUS/TRIAL/`). A succeeding job then runs for the work left, not its outcome's duration;
- a job stopped before its work is done (preempted, failed, cancelled) keeps only what its last
  checkpoint saved: the work since is lost;
- work redone is the RUNNING time a job spent on progress some job of the directory had already
  reached before it started (a job that does not resume redoes everything before; one that
  resumes redoes at most one interval). GPU-hours redone are that time x the job's GPUs.

A job without `work`, or without an output directory (nothing to save to), runs as before and is
not tracked. Everything here is read at a given instant (`describe(now)`): a running job's
progress and checkpoints are counted up to then, without events of their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from google.cloud import aiplatform_v1

PREVIOUS_OUTPUT_ENV = "VERTEX_DISPATCH_PREVIOUS_OUTPUT"
SECONDS_PER_HOUR = 3600.0


@dataclass
class Stint:
    """One job's time RUNNING on a directory's work."""

    job: str
    gpus: int
    started_at: datetime
    start_progress: float  # the checkpoint it resumed from (0: from scratch)
    reached_before: float  # the furthest progress the directory's jobs reached before it
    resumed_from: str | None  # the directory of that checkpoint, None from scratch
    ended_at: datetime | None = None
    end_state: str | None = None  # the JobState name it left RUNNING for

    def progress(self, now: datetime, work: float) -> float:
        """How far the training got by ``now`` (or its end)."""
        end = self.ended_at or now
        ran = max((end - self.started_at).total_seconds(), 0.0)
        return min(work, self.start_progress + ran)

    def redone(self, now: datetime, work: float) -> float:
        """Seconds spent on progress already reached before it started."""
        return max(min(self.progress(now, work), self.reached_before) - self.start_progress, 0.0)


@dataclass
class Directory:
    """One output directory's training: its work, checkpoint interval and jobs."""

    output_dir: str
    work: float
    checkpoint_every: float | None
    stints: list[Stint] = field(default_factory=list)

    def checkpoints(self, now: datetime) -> list[tuple[float, datetime, str]]:
        """(progress saved, when, by which job), oldest first."""
        saved = []
        for stint in self.stints:
            progress = stint.progress(now, self.work)
            marks = _marks(stint.start_progress, progress, self.checkpoint_every)
            if progress >= self.work > stint.start_progress and self.work not in marks:
                marks.append(self.work)  # the finished training's final save
            for mark in marks:
                at = stint.started_at + timedelta(seconds=mark - stint.start_progress)
                saved.append((mark, at, stint.job))
        return sorted(saved, key=lambda entry: entry[1])

    def checkpointed(self, now: datetime) -> float:
        """The progress of the last checkpoint (0: none)."""
        return max((mark for mark, _, _ in self.checkpoints(now)), default=0.0)

    def reached(self, now: datetime) -> float:
        """The furthest progress any job of the directory reached, saved or not."""
        return max((stint.progress(now, self.work) for stint in self.stints), default=0.0)

    def describe(self, now: datetime) -> dict[str, Any]:
        """The admin view (docs/vertex-ai-emulator.md, `GET /emulator/v1/progress`)."""
        redone = [(stint, stint.redone(now, self.work)) for stint in self.stints]
        checkpointed = self.checkpointed(now)
        lost = sum(
            max(stint.progress(now, self.work) - _last_mark(stint, now, self), 0.0)
            for stint in self.stints
            if stint.ended_at is not None and stint.progress(now, self.work) < self.work
        )
        return {
            "output_dir": self.output_dir,
            "work_seconds": self.work,
            "checkpoint_every_seconds": self.checkpoint_every,
            "progress_seconds": self.reached(now),
            "checkpointed_seconds": checkpointed,
            "done": checkpointed >= self.work,
            "checkpoints": [
                {"progress_seconds": mark, "at": at.isoformat(), "job": job}
                for mark, at, job in self.checkpoints(now)
            ],
            "redone_seconds": sum(seconds for _, seconds in redone),
            "redone_gpu_hours": sum(stint.gpus * seconds for stint, seconds in redone)
            / SECONDS_PER_HOUR,
            "lost_seconds": lost,
            "jobs": [
                {
                    "job": stint.job,
                    "gpus": stint.gpus,
                    "started_at": stint.started_at.isoformat(),
                    "ended_at": stint.ended_at.isoformat() if stint.ended_at else None,
                    "end_state": stint.end_state,
                    "resumed_from": stint.resumed_from,
                    "start_progress_seconds": stint.start_progress,
                    "progress_seconds": stint.progress(now, self.work),
                    "redone_seconds": seconds,
                }
                for stint, seconds in redone
            ],
        }


def _marks(start: float, progress: float, every: float | None) -> list[float]:
    """The checkpoint marks (multiples of ``every``) in (start, progress]."""
    if not every:
        return []
    first = math.floor(start / every) + 1
    last = math.floor(progress / every + 1e-9)
    return [k * every for k in range(first, last + 1)]


def _last_mark(stint: Stint, now: datetime, directory: Directory) -> float:
    marks = _marks(
        stint.start_progress, stint.progress(now, directory.work), directory.checkpoint_every
    )
    return marks[-1] if marks else stint.start_progress


class Progress:
    """Every output directory's training, and which job runs on which."""

    def __init__(self) -> None:
        self.directories: dict[str, Directory] = {}
        self._running: dict[str, Directory] = {}  # job key -> the directory it works on

    def start(
        self,
        job_key: str,
        *,
        output_dir: str,
        previous_output: str | None,
        work: float,
        checkpoint_every: float | None,
        gpus: int,
        now: datetime,
    ) -> float:
        """A job starts RUNNING on ``output_dir``'s work; returns the seconds of work it has
        left (all of it, unless it resumes from ``previous_output``'s last checkpoint)."""
        directory = self.directories.get(output_dir)
        if directory is None:
            directory = Directory(output_dir, work, checkpoint_every)
            self.directories[output_dir] = directory
        source = self.directories.get(previous_output) if previous_output else None
        start = source.checkpointed(now) if source is not None else 0.0
        reached = max(directory.reached(now), source.reached(now) if source else 0.0)
        directory.stints.append(
            Stint(
                job=job_key,
                gpus=gpus,
                started_at=now,
                start_progress=min(start, directory.work),
                reached_before=reached,
                resumed_from=previous_output if start > 0 else None,
            )
        )
        self._running[job_key] = directory
        return max(directory.work - start, 0.0)

    def stop(self, job_key: str, now: datetime, state: str) -> None:
        """A job left RUNNING (for ``state``): its progress since its last checkpoint is kept
        only as far as that checkpoint (``Directory.checkpointed`` reads the marks)."""
        directory = self._running.pop(job_key, None)
        if directory is None:
            return
        for stint in directory.stints:
            if stint.job == job_key and stint.ended_at is None:
                stint.ended_at = now
                stint.end_state = state

    def describe(self, now: datetime) -> list[dict[str, Any]]:
        """Every directory's view, in the order first seen."""
        return [directory.describe(now) for directory in self.directories.values()]


def output_dir_of(job: aiplatform_v1.CustomJob, trial: int | None) -> str | None:
    """Where a job saves: its base output directory (a trial's: ``DIR/TRIAL/``); None: none."""
    base = job.job_spec.base_output_directory.output_uri_prefix
    if not base:
        return None
    return _trial_dir(base, trial)


def previous_output_of(job: aiplatform_v1.CustomJob, trial: int | None) -> str | None:
    """The directory the job's env says to resume from (a trial's: ``PREVIOUS/TRIAL/``)."""
    for pool in job.job_spec.worker_pool_specs:
        for program in (pool.container_spec, pool.python_package_spec):
            for variable in program.env:
                if variable.name == PREVIOUS_OUTPUT_ENV and variable.value:
                    return _trial_dir(variable.value, trial)
    return None


def _trial_dir(base: str, trial: int | None) -> str:
    # One spelling per directory (gs://b/r and gs://b/r/ are the same place).
    directory = f"{base.rstrip('/')}/"
    return directory if trial is None else f"{directory}{trial}/"
