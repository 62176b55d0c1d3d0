"""``job_views``: a pipeline's state as the ``JobState`` its view carries, including a state a
newer API could add without a ``JobState`` twin (the view must still be made)."""

from __future__ import annotations

import pytest
from google.cloud.aiplatform_v1 import PipelineState, TrainingPipeline

from shared.aiplatform import JobState
from shared.model.jobstates import is_terminal
from shared.policy.job_views import job_state_of_pipeline_state, view_of


@pytest.mark.parametrize(
    ("pipeline_state", "job_state"),
    [
        ("PIPELINE_STATE_QUEUED", JobState.JOB_STATE_QUEUED),
        ("PIPELINE_STATE_RUNNING", JobState.JOB_STATE_RUNNING),
        ("PIPELINE_STATE_SUCCEEDED", JobState.JOB_STATE_SUCCEEDED),
        ("PIPELINE_STATE_CANCELLED", JobState.JOB_STATE_CANCELLED),
        ("PIPELINE_STATE_UNSPECIFIED", JobState.JOB_STATE_UNSPECIFIED),
        # Names no JobState has (a future PIPELINE_STATE_*, or not a pipeline state at all).
        ("PIPELINE_STATE_ARCHIVED", JobState.JOB_STATE_UNSPECIFIED),
        ("PIPELINE_STATE_", JobState.JOB_STATE_UNSPECIFIED),
        ("JOB_STATE_SUCCEEDED", JobState.JOB_STATE_UNSPECIFIED),
        ("", JobState.JOB_STATE_UNSPECIFIED),
    ],
)
def test_a_pipeline_state_maps_to_its_twin_or_to_unspecified(
    pipeline_state: str, job_state: JobState
) -> None:
    assert job_state_of_pipeline_state(pipeline_state) is job_state


def test_an_unknown_pipeline_state_is_not_terminal() -> None:
    assert not is_terminal(job_state_of_pipeline_state("PIPELINE_STATE_ARCHIVED"))


@pytest.mark.parametrize("state", list(PipelineState), ids=lambda s: s.name)
def test_every_pipeline_state_of_the_api_gives_a_view(state: PipelineState) -> None:
    view = view_of(TrainingPipeline(name="projects/p/locations/l/trainingPipelines/1", state=state))
    assert view.state.name == state.name.replace("PIPELINE_STATE_", "JOB_STATE_")
