"""The demo's summary line for chapter 1 says only what the demo saw: no "runs" unless the
ledger showed the job RUNNING (at 600x, QUEUED -> SUCCEEDED between two reads is common)."""

from __future__ import annotations

import pytest

from tooling.demo_story import dataset_summary

FLEX = "FLEX_START"


@pytest.mark.parametrize(
    ("states", "jobs", "strategy", "completion", "summary"),
    [
        (
            ["INTENT", "QUEUED", "RUNNING", "SUCCEEDED"], 1, FLEX, True,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED seen) -> runs -> succeeds "
            "-> completion",
        ),
        (
            ["INTENT", "QUEUED", "SUCCEEDED"], 1, FLEX, True,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED seen) -> succeeds (RUNNING "
            "not seen) -> completion",
        ),
        (
            ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"], 1, 6, True,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED, PENDING seen) -> runs -> "
            "succeeds -> completion",
        ),
        (
            ["INTENT", "QUEUED"], 1, FLEX, False,
            "dataset -> exactly one FLEX_START job -> waits (QUEUED seen) -> last seen QUEUED "
            "-> no completion",
        ),
        (
            ["RUNNING", "SUCCEEDED"], 2, FLEX, True,
            "dataset -> 2 jobs -> runs -> succeeds -> completion",
        ),
        (
            ["SUCCEEDED"], 1, "STANDARD", True,
            "dataset -> one job (strategy STANDARD) -> succeeds (RUNNING not seen) -> completion",
        ),
        ([], 0, None, False, "dataset -> 0 jobs -> no job state seen -> no completion"),
    ],
)  # fmt: skip
def test_the_summary_names_only_the_states_seen(
    states: list[str], jobs: int, strategy: object, completion: bool, summary: str
) -> None:
    assert dataset_summary(states, jobs, strategy, completion) == summary
