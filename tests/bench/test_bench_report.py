"""The table's verdicts, from real-shaped raw results (what ``python -m bench`` writes)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import report
from bench.report import Verdict
from bench.workloads import percentile


def cold(seconds: float, rss: float, clients: list[str] | None = None) -> dict[str, Any]:
    return {
        "samples": 7,
        "median_seconds": seconds,
        "max_seconds": seconds * 1.2,
        "median_rss_mib": rss,
        "max_rss_mib": rss + 1,
        "cloud_clients_imported": clients or [],
    }


FLOOR = {"unmatched": cold(0.25, 32.0)}  # binary-exact, so the limits below are exact
BASELINE = {
    "unmatched": cold(3.4, 196.0),
    "submit": cold(5.0, 200.0),
    "job_state": cold(5.5, 196.0),
}


def verdicts(rows: list[report.Row], contains: str) -> list[Verdict]:
    return [row.verdict for row in rows if contains in row.figure]


@pytest.mark.parametrize(
    ("ours", "expected"),
    [
        pytest.param(
            {"unmatched": cold(0.30, 33.6), "submit": cold(2.0, 100.0)},
            {
                "(1a) cold start, object event matching no route: time": Verdict.MET,
                "(1a) cold start, object event matching no route: peak RSS": Verdict.MET,
                "cloud clients imported": Verdict.MET,
                "(1b) cold start, marker submitting a FLEX_START job: time": Verdict.MET,
                "(1b) cold start, marker submitting a FLEX_START job: peak RSS": Verdict.MET,
            },
            id="all-met",
        ),
        pytest.param(
            {
                "unmatched": cold(0.60, 60.0, ["google.cloud.aiplatform_v1"]),
                "submit": cold(3.67, 127.7),
            },
            {
                "(1a) cold start, object event matching no route: time": Verdict.MISSED,
                "(1a) cold start, object event matching no route: peak RSS": Verdict.MISSED,
                "cloud clients imported": Verdict.MISSED,
                "(1b) cold start, marker submitting a FLEX_START job: time": Verdict.MISSED,
                "(1b) cold start, marker submitting a FLEX_START job: peak RSS": Verdict.MET,
            },
            id="unmatched-imports-vertex-and-submit-too-slow",
        ),
        pytest.param(
            {"unmatched": cold(0.3125, 48.0), "submit": cold(2.5, 140.0)},
            {
                "(1a) cold start, object event matching no route: time": Verdict.MET,
                "(1a) cold start, object event matching no route: peak RSS": Verdict.MET,
                "(1b) cold start, marker submitting a FLEX_START job: time": Verdict.MISSED,
                "(1b) cold start, marker submitting a FLEX_START job: peak RSS": Verdict.MISSED,
            },
            # 1.25x the floor's time and 1.5x its memory are allowed, "under half" and "under
            # 70%" of the baseline are not
            id="exactly-at-the-limits",
        ),
        pytest.param(
            {"unmatched": cold(0.34, 40.0), "submit": cold(2.0, 100.0)},
            {
                "(1a) cold start, object event matching no route: time": Verdict.MISSED,
                "(1a) cold start, object event matching no route: peak RSS": Verdict.MET,
            },
            id="unmatched-time-over-the-tighter-limit",  # 1.36x: within 1.5x, not within 1.25x
        ),
    ],
)
def test_cold_start_targets(ours: dict[str, Any], expected: dict[str, Verdict]) -> None:
    rows = report.cold_rows({"floor": FLOOR, "vertex-dispatch": ours, "baseline": BASELINE})
    for figure, verdict in expected.items():
        assert verdicts(rows, figure) == [verdict], figure


SWEEP = "(1d) cold start, marker submitting a FLEX_START hyperparameter tuning job"
CREATE_SWEEP = "CreateHyperparameterTuningJob"


def counted(summary: dict[str, Any], calls: dict[str, int], most: int) -> dict[str, Any]:
    return {**summary, "vertex_calls_by_method": calls, "vertex_calls_max": most}


@pytest.mark.parametrize(
    ("ours", "expected"),
    [
        pytest.param(
            counted(cold(2.0, 100.0), {CREATE_SWEEP: 7}, 1),
            {"time": Verdict.MET, "peak RSS": Verdict.MET, "calls": Verdict.MET},
            id="all-met",
        ),
        pytest.param(
            counted(cold(2.5, 140.0), {CREATE_SWEEP: 7, "ListHyperparameterTuningJobs": 7}, 2),
            {"time": Verdict.MISSED, "peak RSS": Verdict.MISSED, "calls": Verdict.MISSED},
            id="at-the-limits-and-a-list-per-submission",
        ),
        pytest.param(
            counted(cold(2.0, 100.0), {CREATE_SWEEP: 8}, 2),  # one sample created twice
            {"calls": Verdict.MISSED},
            id="a-second-create",
        ),
        pytest.param(
            cold(2.0, 100.0),  # a --smoke-like summary: no request log was read
            {"calls": Verdict.NOT_RUN},
            id="not-counted",
        ),
    ],
)
def test_sweep_cold_start_targets(ours: dict[str, Any], expected: dict[str, Verdict]) -> None:
    baseline = {
        **BASELINE,
        "submit_sweep": counted(cold(5.0, 200.0), {CREATE_SWEEP: 7}, 1),
    }
    rows = report.cold_rows(
        {"floor": FLOOR, "vertex-dispatch": {"submit_sweep": ours}, "baseline": baseline}
    )
    figures = {"time": ": time", "peak RSS": ": peak RSS", "calls": ": Vertex AI calls"}
    for key, verdict in expected.items():
        assert verdicts(rows, SWEEP + figures[key]) == [verdict], key


def test_summarize_cold_counts_the_vertex_calls_of_every_sample() -> None:
    samples = [
        {"seconds": 1.0, "peak_rss_mib": 80.0, "vertex_calls": {CREATE_SWEEP: 1}},
        {"seconds": 1.1, "peak_rss_mib": 80.0, "vertex_calls": {CREATE_SWEEP: 1, "X": 1}},
    ]
    summary = report.summarize_cold(samples)
    assert summary["vertex_calls_by_method"] == {CREATE_SWEEP: 2, "X": 1}
    assert summary["vertex_calls_max"] == 2
    unmatched = report.summarize_cold([{"seconds": 0.2, "peak_rss_mib": 30.0}])
    assert unmatched["vertex_calls_by_method"] is None


def test_the_unmatched_time_ratio_shows_three_decimals_and_the_cpu_time_ratio() -> None:
    # 1.252x must not print as "1.25x" beside a MISSED verdict for a limit of 1.25x.
    floor = {"unmatched": {**cold(0.25, 32.0), "median_cpu_seconds": 0.2}}
    ours = {"unmatched": {**cold(0.313, 33.0), "median_cpu_seconds": 0.24}}
    rows = report.cold_rows({"floor": floor, "vertex-dispatch": ours})
    (row,) = [r for r in rows if r.figure.endswith("matching no route: time")]
    assert "= 1.252x floor (CPU time 1.200x), n/a baseline" in row.measured
    assert row.verdict is Verdict.MISSED


def test_summarize_cold_gives_the_cpu_median_only_when_every_sample_has_it() -> None:
    samples = [
        {"seconds": 0.3, "cpu_seconds": 0.2, "peak_rss_mib": 33.0},
        {"seconds": 0.5, "cpu_seconds": 0.4, "peak_rss_mib": 34.0},
        {"seconds": 0.4, "cpu_seconds": 0.3, "peak_rss_mib": 33.5},
    ]
    assert report.summarize_cold(samples)["median_cpu_seconds"] == 0.3
    older = [{"seconds": 0.3, "peak_rss_mib": 33.0}, *samples[1:]]
    assert report.summarize_cold(older)["median_cpu_seconds"] is None


def warm(flex_methods: dict[str, int], ledger_max: int, state_reads: int) -> dict[str, Any]:
    def summary(count: int, methods: dict[str, int], vertex_max: int) -> dict[str, Any]:
        return {
            "count": count,
            "p50_seconds": 0.05,
            "p99_seconds": 0.09,
            "vertex_calls_max": vertex_max,
            "vertex_calls_by_method": methods,
            "ledger_round_trips_max": ledger_max,
            "ledger_round_trips_mean": float(ledger_max),
        }

    return {
        "flex_start": summary(50, flex_methods, max(flex_methods.values())),
        "persistent_resource": summary(10, {"CreateCustomJob": 10, "GetPersistentResource": 10}, 2),
        "job_state": summary(50, {"GetCustomJob": 50 * state_reads}, state_reads),
    }


@pytest.mark.parametrize(
    ("results", "figure", "expected"),
    [
        (warm({"CreateCustomJob": 50}, 3, 1), "per FLEX_START submission", Verdict.MET),
        (
            warm({"CreateCustomJob": 50, "ListCustomJobs": 50}, 3, 1),
            "per FLEX_START submission",
            Verdict.MISSED,
        ),
        (warm({"CreateCustomJob": 50}, 4, 1), "ledger round trips", Verdict.MISSED),
        (warm({"CreateCustomJob": 50}, 3, 2), "reads per job-state event", Verdict.MISSED),
    ],
)
def test_warm_path_targets(results: dict[str, Any], figure: str, expected: Verdict) -> None:
    assert verdicts(report.warm_rows(results), figure) == [expected]


def sweep_summary(methods: dict[str, int], ledger_max: int) -> dict[str, Any]:
    return {
        "count": 10,
        "p50_seconds": 0.06,
        "p99_seconds": 0.1,
        "vertex_calls_max": max(methods.values()),
        "vertex_calls_by_method": methods,
        "ledger_round_trips_max": ledger_max,
        "ledger_round_trips_mean": float(ledger_max),
    }


@pytest.mark.parametrize(
    ("sweep", "figure", "expected"),
    [
        (sweep_summary({CREATE_SWEEP: 10}, 3), "calls per tuning-job", Verdict.MET),
        (sweep_summary({"CreateCustomJob": 10}, 3), "calls per tuning-job", Verdict.MISSED),
        (
            sweep_summary({CREATE_SWEEP: 10, "ListHyperparameterTuningJobs": 10}, 3),
            "Vertex AI calls per tuning-job submission",
            Verdict.MISSED,
        ),
        (sweep_summary({CREATE_SWEEP: 10}, 3), "ledger round trips per tuning", Verdict.MET),
        (sweep_summary({CREATE_SWEEP: 10}, 4), "ledger round trips per tuning", Verdict.MISSED),
    ],
)
def test_warm_path_sweep_targets(sweep: dict[str, Any], figure: str, expected: Verdict) -> None:
    results = {**warm({"CreateCustomJob": 50}, 3, 1), "sweep": sweep}
    assert verdicts(report.warm_rows(results), figure) == [expected]


def test_a_warm_run_without_sweeps_has_no_sweep_rows() -> None:
    rows = report.warm_rows(warm({"CreateCustomJob": 50}, 3, 1))
    assert not [row for row in rows if "tuning" in row.figure]


def burst(events_per_second: float, jobs: int) -> dict[str, Any]:
    return {
        "shard_events": 20_000,
        "unmatched_events_per_second": events_per_second,
        "events_per_second": events_per_second * 0.9,
        "jobs_created": jobs,
        "outcomes": {"ignored": 20_000, "submitted": 1, "duplicate": 1},
        "peak_rss_mib": 121.0,
        "peak_rss_after_shards_mib": 26.0,
    }


@pytest.mark.parametrize(
    ("results", "figure", "expected"),
    [
        (burst(38_000, 1), "events per second", Verdict.MET),
        (burst(999, 1), "events per second", Verdict.MISSED),
        (burst(38_000, 2), "jobs created", Verdict.MISSED),
    ],
)
def test_burst_targets(results: dict[str, Any], figure: str, expected: Verdict) -> None:
    assert verdicts(report.burst_rows(results), figure) == [expected]


def quiet_burst(events_per_second: float, writes: int, rewritten: bool, jobs: int) -> dict:
    return {
        "shards": 10_000,
        "events": 20_000,
        "events_per_second": events_per_second,
        "outcomes": {"waiting_data": 20_000},
        "ledger_writes": writes,
        "ledger_reads": 30,
        "run_written_after_create": rewritten,
        "jobs_created": jobs,
    }


@pytest.mark.parametrize(
    ("results", "figure", "expected"),
    [
        (quiet_burst(5_000, 1, False, 0), "events per second", Verdict.MET),
        (quiet_burst(999, 1, False, 0), "events per second", Verdict.MISSED),
        (quiet_burst(5_000, 1, False, 0), "ledger writes", Verdict.MET),
        (quiet_burst(5_000, 6, False, 0), "ledger writes", Verdict.MISSED),
        (quiet_burst(5_000, 1, True, 0), "ledger writes", Verdict.MISSED),
        (quiet_burst(5_000, 1, False, 1), "jobs created", Verdict.MISSED),
    ],
)
def test_quiet_burst_targets(results: dict[str, Any], figure: str, expected: Verdict) -> None:
    assert verdicts(report.quiet_burst_rows(results), figure) == [expected]


def reconcile(calls: int) -> dict[str, Any]:
    return {
        "runs": 2000,
        "regions": ["us-central1", "us-east4"],
        "page_size": 100,
        "vertex_calls": calls,
        "vertex_calls_by_method": {"ListCustomJobs": calls},
        "vertex_calls_target": 42,
        "jobs_not_listed": 0,
        "states_recorded": 0,
        "tick_seconds": 3.0,
        "runs_read": 2000,
        "jobs_listed": 2000,
    }


@pytest.mark.parametrize(
    ("calls", "expected"), [(20, Verdict.MET), (42, Verdict.MET), (43, Verdict.MISSED)]
)
def test_reconcile_calls_grow_with_pages(calls: int, expected: Verdict) -> None:
    assert verdicts(report.reconcile_rows(reconcile(calls)), "Vertex AI calls") == [expected]


def reconcile_round(ticks_to_cover: int | None, tick_seconds_max: float) -> dict[str, Any]:
    return {
        "runs": 20_000,
        "regions": ["europe-west4", "us-central1", "us-east4"],
        "reconcile_max_runs": 2000,
        "ticks_to_cover": ticks_to_cover,
        "ticks_bound": 10,
        "runs_read_twice_before_covered": 0,
        "vertex_calls_per_tick_p50": 21.5,
        "vertex_calls_per_tick_max": 30,
        "tick_seconds_p50": 4.0,
        "tick_seconds_max": tick_seconds_max,
        "seed_jobs_seconds": 60.0,
        "seed_ledger_seconds": 90.0,
        "function_timeout_seconds": 300,
    }


@pytest.mark.parametrize(
    ("results", "figure", "expected"),
    [
        (reconcile_round(10, 5.0), "ticks until every one", Verdict.MET),
        (reconcile_round(11, 5.0), "ticks until every one", Verdict.MISSED),
        (reconcile_round(None, 5.0), "ticks until every one", Verdict.MISSED),
        (reconcile_round(10, 99.9), "wall time of one tick", Verdict.MET),
        (reconcile_round(10, 100.0), "wall time of one tick", Verdict.MISSED),
    ],
)
def test_reconcile_round_targets(results: dict[str, Any], figure: str, expected: Verdict) -> None:
    assert verdicts(report.reconcile_round_rows(results), figure) == [expected]


def test_only_one_workload_shows_only_its_rows() -> None:
    rows = report.all_rows(
        {"settings": {"only": "reconcile_round"}, "reconcile_round": reconcile_round(10, 5.0)}
    )

    assert {row.figure.split(":")[0] for row in rows} == {"(5) reconcile round"}


def test_sections_missing_from_the_results_are_not_run() -> None:
    rows = report.all_rows({"cold_start": {"floor": FLOOR}})
    assert [row.figure for row in rows if row.verdict is Verdict.NOT_RUN] == [
        *report.SCENARIO_TITLES.values(),
        "(2) warm path",
        "(3) burst",
        "(3b) quiet burst",
        "(4) reconcile",
        "(5) reconcile round",
    ]


@pytest.mark.parametrize(
    ("samples", "fraction", "expected"),
    [
        ([5.0], 0.99, 5.0),
        ([float(i) for i in range(1, 101)], 0.99, 99.0),
        ([float(i) for i in range(1, 51)], 0.99, 50.0),
        ([3.0, 1.0, 2.0], 0.5, 2.0),
    ],
)
def test_percentile_is_nearest_rank(samples: list[float], fraction: float, expected: float) -> None:
    assert percentile(samples, fraction) == expected
