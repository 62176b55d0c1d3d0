"""The three kinds of Vertex AI training job a template can become, and how a job's name says which.

A template makes a ``CustomJob`` unless it has a ``hyperparameter_tuning`` block (a
``HyperparameterTuningJob``: JobService) or a ``training_pipeline`` block (a ``TrainingPipeline``:
PipelineService). Every kind is named ``projects/P/locations/R/{collection}/ID``; the collection
is how code that holds only a name (the ledger's attempt, a hint) knows which service to ask.
No proto is imported here: the enum is compared by value, as stored in the ledger.
"""

from __future__ import annotations

import enum
import re
from typing import Final


class JobKind(enum.StrEnum):
    """A Vertex AI training job type; the value is what the ledger stores (``Attempt.job_kind``)."""

    CUSTOM_JOB = "custom_job"
    HYPERPARAMETER_TUNING_JOB = "hyperparameter_tuning_job"
    TRAINING_PIPELINE = "training_pipeline"

    @property
    def collection(self) -> str:
        """The REST collection of the kind's resource names: ``customJobs``, ..."""
        return _COLLECTIONS[self]

    @property
    def resource(self) -> str:
        """The API's name of the resource type: ``CustomJob``, ``HyperparameterTuningJob``, ..."""
        return _RESOURCES[self]

    @property
    def resumes(self) -> bool:
        """Whether a resubmitted job of the kind resumes from the previous attempt's output
        (docs/architecture.md, "Resume"). Not a sweep: Vertex AI gives each trial its own
        ``<base>/<trial id>/`` directory and trial ids restart at 1 in every tuning job, so trial
        N of an earlier attempt ran other hyperparameters; a resubmitted sweep starts its trials
        over, each attempt under its own directory. A pipeline's training task is one job."""
        return self is not JobKind.HYPERPARAMETER_TUNING_JOB


_COLLECTIONS: Final[dict[JobKind, str]] = {
    JobKind.CUSTOM_JOB: "customJobs",
    JobKind.HYPERPARAMETER_TUNING_JOB: "hyperparameterTuningJobs",
    JobKind.TRAINING_PIPELINE: "trainingPipelines",
}
_RESOURCES: Final[dict[JobKind, str]] = {
    JobKind.CUSTOM_JOB: "CustomJob",
    JobKind.HYPERPARAMETER_TUNING_JOB: "HyperparameterTuningJob",
    JobKind.TRAINING_PIPELINE: "TrainingPipeline",
}
_KIND_BY_COLLECTION: Final[dict[str, JobKind]] = {
    collection: kind for kind, collection in _COLLECTIONS.items()
}
_JOB_NAME: Final = re.compile(r"^projects/[^/]+/locations/[^/]+/(?P<collection>[A-Za-z]+)/[^/]+$")


def kind_of_collection(collection: str) -> JobKind | None:
    """The kind whose resource names use ``collection`` (``customJobs``, ...), or None."""
    return _KIND_BY_COLLECTION.get(collection)


def kind_of_job_name(name: str) -> JobKind | None:
    """The kind a job's resource name names, or None for a name of no training job."""
    match = _JOB_NAME.match(name)
    return kind_of_collection(match.group("collection")) if match else None
