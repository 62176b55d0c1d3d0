"""Which run and attempt a job's labels name: anything else is not our job (never a crash)."""

from __future__ import annotations

import pytest
from google.cloud.aiplatform_v1 import CustomJob

from shared.handlers.jobstate import _run_and_attempt


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"vd-run": "r-1", "vd-attempt": "2"}, ("r-1", 2)),
        ({"vd-run": "r-1"}, ("r-1", None)),
        ({"vd-run": "r-1", "vd-attempt": "two"}, ("r-1", None)),
        ({"vd-run": "r-1", "vd-attempt": "²"}, ("r-1", None)),  # isdigit, yet int() refuses it
        ({"vd-run": "r-1", "vd-attempt": "٣"}, ("r-1", None)),  # an Arabic-Indic digit
        ({}, (None, None)),
    ],
)
def test_run_and_attempt(labels: dict[str, str], expected: tuple[str | None, int | None]) -> None:
    assert _run_and_attempt(CustomJob(labels=labels)) == expected
