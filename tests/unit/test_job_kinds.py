"""``job_kinds``: a collection or a job's name says its kind, and nothing else does."""

from __future__ import annotations

import pytest

from shared.model.job_kinds import JobKind, kind_of_collection, kind_of_job_name


@pytest.mark.parametrize(
    ("collection", "kind"),
    [
        ("customJobs", JobKind.CUSTOM_JOB),
        ("hyperparameterTuningJobs", JobKind.HYPERPARAMETER_TUNING_JOB),
        ("trainingPipelines", JobKind.TRAINING_PIPELINE),
        ("persistentResources", None),
        ("CustomJobs", None),
        ("", None),
    ],
)
def test_a_collection_names_its_kind(collection: str, kind: JobKind | None) -> None:
    assert kind_of_collection(collection) is kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("projects/p/locations/us-central1/customJobs/1", JobKind.CUSTOM_JOB),
        ("projects/p/locations/us-central1/trainingPipelines/2", JobKind.TRAINING_PIPELINE),
        ("projects/p/locations/us-central1/persistentResources/r", None),
        ("customJobs/1", None),
    ],
)
def test_a_job_name_names_its_kind(name: str, kind: JobKind | None) -> None:
    assert kind_of_job_name(name) is kind
