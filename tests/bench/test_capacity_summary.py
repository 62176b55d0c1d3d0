"""The stockout benchmark's arithmetic (bench.capacity_summary), as tables."""

from __future__ import annotations

from typing import Any

import pytest

from bench import capacity_summary as summary
from bench.capacity_summary import JobRecord, TriggerOutcome


def job(
    name: str,
    owner: str = "r1",
    started_s: float | None = 0.0,
    ended_s: float | None = 3600.0,
    created_s: float = 0.0,
    gpus: int = 1,
    state: str = "JOB_STATE_SUCCEEDED",
) -> JobRecord:
    return JobRecord(name, owner, state, created_s, started_s, ended_s, gpus)


@pytest.mark.parametrize(
    ("samples", "fraction", "expected"),
    [
        ([], 0.5, None),
        ([7.0], 0.5, 7.0),
        ([7.0], 0.95, 7.0),
        ([1.0, 2.0], 0.5, 1.0),
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([float(n) for n in range(1, 101)], 0.95, 95.0),
        ([float(n) for n in range(1, 101)], 0.5, 50.0),
        ([float(n) for n in range(1, 21)], 0.95, 19.0),
    ],
)
def test_percentile_is_nearest_rank(
    samples: list[float], fraction: float, expected: float | None
) -> None:
    assert summary.percentile(samples, fraction) == expected


@pytest.mark.parametrize(
    ("record", "end_s", "hours"),
    [
        (job("a", started_s=None, ended_s=None), 10_000.0, 0.0),  # never ran
        (job("a", started_s=0.0, ended_s=3600.0), 10_000.0, 1.0),
        (job("a", started_s=0.0, ended_s=3600.0, gpus=4), 10_000.0, 4.0),
        (job("a", started_s=1800.0, ended_s=None), 9000.0, 2.0),  # still running at the end
    ],
)
def test_gpu_hours_count_running_time_times_gpus(
    record: JobRecord, end_s: float, hours: float
) -> None:
    assert summary.gpu_hours(record, end_s) == pytest.approx(hours)


@pytest.mark.parametrize(
    ("jobs", "owned", "expected"),
    [
        ([job("a"), job("b")], {"a", "b"}, 0.0),
        ([job("a"), job("b")], {"a"}, 1.0),  # b: a second job nothing owns
        ([job("a"), job("b", started_s=None, ended_s=None)], {"a"}, 0.0),  # never ran
        ([], set(), 0.0),
    ],
)
def test_duplicate_gpu_hours_are_the_jobs_nothing_owns(
    jobs: list[JobRecord], owned: set[str], expected: float
) -> None:
    assert summary.duplicate_gpu_hours(jobs, owned, 7200.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        ([job("a", "t1", created_s=5), job("b", "t1", created_s=35)], {"a"}),
        ([job("b", "t1", created_s=35), job("a", "t1", created_s=5)], {"a"}),
        ([job("a", "t1"), job("b", "t2")], {"a", "b"}),
        ([], set()),
    ],
)
def test_the_naive_policy_owns_the_first_job_of_each_trigger(
    jobs: list[JobRecord], expected: set[str]
) -> None:
    assert summary.first_job_per_owner(jobs) == expected


def test_summarize_reports_the_contract_keys_and_marks_redone_work_not_measured() -> None:
    outcomes = [
        TriggerOutcome(0, 0.0, 600.0, True),
        TriggerOutcome(1, 100.0, 1300.0, True),
        TriggerOutcome(2, 200.0, None, False),
        TriggerOutcome(3, 300.0, 400.0, False),
    ]
    figures = summary.summarize(
        outcomes, [job("a"), job("b")], {"a"}, 7200.0, alerts=2, redone_gpu_hours=None
    )
    assert set(summary.CONTRACT_KEYS) <= set(figures)
    assert figures["success_rate"] == 0.5
    # Of 100, 600, 1200 and never (trigger 2): the median is 600, the p95 never.
    assert figures["time_to_running_p50_s"] == 600.0
    assert figures["time_to_running_p95_s"] is None
    assert figures["triggers_started"] == 3
    assert figures["duplicate_gpu_hours"] == 1.0
    assert figures["alerts"] == 2
    assert figures["redone_gpu_hours"] == 0.0
    assert figures["redone_gpu_hours_note"] == summary.NOT_MEASURED
    measured = summary.summarize(outcomes, [], set(), 0.0, alerts=0, redone_gpu_hours=0.25)
    assert measured["redone_gpu_hours"] == 0.25
    assert "redone_gpu_hours_note" not in measured


@pytest.mark.parametrize(
    ("jobs", "owned", "expected"),
    [
        ([job("a", state="JOB_STATE_FAILED")], {"a"}, 1.0),  # preempted after an hour
        ([job("a")], {"a"}, 0.0),  # succeeded: nothing lost
        ([job("a", state="JOB_STATE_FAILED")], set(), 0.0),  # a duplicate: counted there
        ([job("a", state="JOB_STATE_RUNNING", ended_s=None)], {"a"}, 0.0),  # still running
    ],
)
def test_lost_gpu_hours_are_owned_jobs_that_ran_and_ended_without_success(
    jobs: list[JobRecord], owned: set[str], expected: float
) -> None:
    assert summary.lost_gpu_hours(jobs, owned, 7200.0) == pytest.approx(expected)


def figures(rate: float, p50: float | None, duplicates: float = 0.0) -> dict[str, Any]:
    return {"success_rate": rate, "time_to_running_p50_s": p50, "duplicate_gpu_hours": duplicates}


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        (
            {
                "naive": figures(0.2, 3000),
                "static": figures(0.95, 7000),
                "learned": figures(1.0, 600),
            },
            ["met", "met", "met"],
        ),
        (
            {
                "naive": figures(0.9, 3000),
                "static": figures(0.95, 1000),
                "learned": figures(0.98, 900, 1.5),
            },
            ["MISSED", "MISSED", "MISSED"],
        ),
        (
            {"naive": figures(0.2, 3000), "static": figures(0.95, None), "learned": figures(1, 1)},
            ["met", "met", "met"],  # static's median trigger never started
        ),
        (
            {"naive": figures(0.2, None), "static": figures(0.95, 60), "learned": figures(1, None)},
            ["met", "MISSED", "met"],  # learned's median trigger never started
        ),
    ],
)
def test_verdicts_against_the_issue_targets(
    policies: dict[str, dict[str, Any]], expected: list[str]
) -> None:
    assert list(summary.verdicts(policies).values()) == expected


def test_the_table_has_a_column_per_policy_and_a_row_per_contract_key() -> None:
    outcome = [TriggerOutcome(0, 0.0, 60.0, True)]
    policies = {
        name: summary.summarize(outcome, [], set(), 0.0, alerts=0, redone_gpu_hours=None)
        for name in summary.POLICIES
    }
    lines = summary.render_table(policies).splitlines()
    assert lines[0].split() == ["figure", *summary.POLICIES]
    for key in summary.CONTRACT_KEYS:
        assert any(line.startswith(key) for line in lines)
    assert any("(not measured)" in line for line in lines)
    assert any(line.startswith("target:") for line in lines)


def directory(interval_s: float, *gpus: int, redone: float = 0.0) -> dict[str, Any]:
    return {
        "checkpoint_every_seconds": interval_s,
        "redone_gpu_hours": redone,
        "jobs": [{"gpus": g} for g in gpus],
    }


@pytest.mark.parametrize(
    ("directories", "expected"),
    [
        ([], (0.0, 0.0, 0)),
        ([directory(1800, 1)], (0.0, 0.0, 0)),  # one job: no resubmission
        ([directory(1800, 1, 1, redone=0.25)], (0.25, 0.5, 1)),
        ([directory(1800, 1, 1, 1, redone=0.5), directory(3600, 8, 8)], (0.5, 9.0, 3)),
    ],
)
def test_redone_work_and_its_bound_of_one_interval_per_resubmission(
    directories: list[dict[str, Any]], expected: tuple[float, float, int]
) -> None:
    assert summary.redone(directories) == pytest.approx(expected)
