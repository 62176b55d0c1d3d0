"""shared.config.quiet: the keys of completion: quiet, the dataset pattern, and covering match.

The coverage verdicts are checked against the decoder itself: for every pair judged covered,
sample objects ``match`` matches (``shared.decode.routing.glob_regex``) all fall in a dataset
(``shared.decode.datasets.dataset_of``); for every pair refused, an object ``match`` matches
falls in none.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from config_builders import DELETE, base_config, parse, with_value

from shared.config.model import (
    DEFAULT_DATA_TIMEOUT,
    AfterStart,
    Completion,
    GcsRoute,
    QuietRule,
)
from shared.config.placeholders import quiet_fields, route_fields
from shared.config.problems import InvalidConfig, Problems
from shared.config.quiet import (
    coverage_problem,
    dataset_pattern_problem,
    parse_dataset_pattern,
    read_quiet_for,
)
from shared.decode.datasets import dataset_of
from shared.decode.routing import glob_regex

Q = "routes[3]"  # the quiet route added to the base config
GCS = f"{Q}.gcs"
T = "templates.resnet"


def quiet_config(**gcs: object) -> dict[str, Any]:
    """The base config plus a quiet route on exports/{date}/ (``gcs`` overrides its keys)."""
    config = base_config()
    config["requests_topic"] = "training-requests"  # where the reconciler starts its runs
    route_gcs: dict[str, object] = {
        "bucket": "acme-exports",
        "match": "exports/*/part-*.parquet",
        "completion": "quiet",
        "dataset": "exports/{date}/",
    }
    route_gcs.update(gcs)
    config["routes"].append({"name": "exports", "gcs": route_gcs, "template": "resnet"})
    return config


def quiet_route(config: dict[str, Any]) -> GcsRoute:
    route = parse(config).routes[3]
    assert isinstance(route, GcsRoute)
    return route


def problems_of(config: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(InvalidConfig) as raised:
        parse(config)
    return [(problem.path, problem.message) for problem in raised.value.problems]


# --- loading -----------------------------------------------------------------------------------


def test_a_quiet_route_loads_with_its_defaults() -> None:
    route = quiet_route(quiet_config())
    assert route.completion is Completion.QUIET
    assert route.quiet == QuietRule(
        dataset="exports/{date}/",
        quiet_for=timedelta(minutes=10),
        min_objects=1,
        after_start=AfterStart.IGNORE,
    )


def test_a_quiet_route_loads_every_key() -> None:
    route = quiet_route(
        quiet_config(quiet_for="90s", min_objects=100, after_start="new_run", match="exports/*/**")
    )
    assert route.quiet == QuietRule(
        dataset="exports/{date}/",
        quiet_for=timedelta(seconds=90),
        min_objects=100,
        after_start=AfterStart.NEW_RUN,
    )
    assert route.match == "exports/*/**"


def test_other_completions_have_no_quiet_rule() -> None:
    assert all(
        route.quiet is None
        for route in parse(base_config()).routes
        if isinstance(route, GcsRoute) and route.completion is not Completion.QUIET
    )


def test_data_timeout_loads_with_its_default() -> None:
    assert parse(base_config()).data_timeout == DEFAULT_DATA_TIMEOUT == timedelta(hours=24)
    assert parse(with_value(base_config(), "data_timeout", "36h")).data_timeout == timedelta(
        hours=36
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, timedelta(minutes=10)),
        ("1m", timedelta(minutes=1)),
        ("60s", timedelta(minutes=1)),
        (60, timedelta(minutes=1)),
        ("1h30m", timedelta(minutes=90)),
    ],
)
def test_quiet_for_reads_durations_of_a_minute_or_more(value: object, expected: timedelta) -> None:
    problems = Problems()
    assert read_quiet_for(value, "quiet_for", problems) == expected
    assert not list(problems)


# Each broken quiet rule, reported at the key to fix, with the words that say how.
@pytest.mark.parametrize(
    ("changes", "reported_at", "says"),
    [
        ({"quiet_for": "59s"}, f"{GCS}.quiet_for", "at least 1m"),
        ({"quiet_for": 0}, f"{GCS}.quiet_for", "at least 1m"),
        ({"quiet_for": "soon"}, f"{GCS}.quiet_for", "not a duration"),
        ({"quiet_for": -60}, f"{GCS}.quiet_for", "cannot be negative"),
        ({"quiet_for": True}, f"{GCS}.quiet_for", "boolean"),
        ({"min_objects": 0}, f"{GCS}.min_objects", "1 or more"),
        ({"min_objects": "many"}, f"{GCS}.min_objects", "whole number"),
        ({"min_objects": 2.5}, f"{GCS}.min_objects", "whole number"),
        ({"after_start": "restart"}, f"{GCS}.after_start", "ignore"),
        ({"after_start": "new-run"}, f"{GCS}.after_start", "new_run"),
        ({"dataset": DELETE}, f"{GCS}.dataset", "required with completion: quiet"),
        ({"dataset": ""}, f"{GCS}.dataset", "is empty"),
        ({"dataset": "exports/{date}"}, f"{GCS}.dataset", "must end with /"),
        ({"dataset": "/exports/{date}/"}, f"{GCS}.dataset", "no leading /"),
        ({"dataset": "exports/*/"}, f"{GCS}.dataset", "not a glob"),
        ({"dataset": "exports/{da-te}/"}, f"{GCS}.dataset", "not a placeholder"),
        ({"dataset": "exports/{object}/"}, f"{GCS}.dataset", "a name dispatch fills itself"),
        ({"match": "exports/**"}, f"{GCS}.dataset", "holds **"),
        ({"match": "other/*/x"}, f"{GCS}.dataset", "may be named"),
        ({"match": "exports/*.csv"}, f"{GCS}.dataset", "1 directory deep"),
        ({"match": "exports/*/"}, f"{GCS}.dataset", "names the directory itself"),
        ({"completion": "quite"}, f"{GCS}.completion", "quiet"),
        ({"unknown": 1}, f"{GCS}.unknown", "unknown key"),
    ],
)
def test_each_broken_quiet_rule_is_reported_at_its_key(
    changes: dict[str, object], reported_at: str, says: str
) -> None:
    gcs = {key: value for key, value in changes.items() if value is not DELETE}
    config = quiet_config(**gcs)
    if changes.get("dataset") is DELETE:
        del config["routes"][3]["gcs"]["dataset"]
    found = problems_of(config)
    assert any(path == reported_at and says in message for path, message in found), found


def test_every_broken_quiet_key_is_reported_at_once() -> None:
    config = quiet_config(match="exports/**", quiet_for="30s", min_objects=0, after_start="x")
    assert {path for path, _ in problems_of(config)} == {
        f"{GCS}.dataset",
        f"{GCS}.quiet_for",
        f"{GCS}.min_objects",
        f"{GCS}.after_start",
    }


@pytest.mark.parametrize("key", ["dataset", "quiet_for", "min_objects", "after_start"])
@pytest.mark.parametrize("completion", ["marker", "manifest", "every_object"])
def test_quiet_keys_with_another_completion_say_they_need_quiet(key: str, completion: str) -> None:
    values = {"dataset": "imagenet/{day}/", "quiet_for": "10m", "min_objects": 2}
    config = with_value(base_config(), "routes[0].gcs.completion", completion)
    config = with_value(config, "requests_topic", "training-requests")  # manifest runs need it
    config = with_value(config, f"routes[0].gcs.{key}", values.get(key, "new_run"))
    assert problems_of(config) == [
        (
            f"routes[0].gcs.{key}",
            f"{key} applies only to completion: quiet (a dataset without a marker, complete once "
            "no new object arrived for quiet_for); set completion: quiet or remove it",
        )
    ]


@pytest.mark.parametrize(
    ("value", "says"),
    [("0s", "longer than 0s"), (0, "longer than 0s"), ("a day", "not a duration")],
)
def test_a_broken_data_timeout_is_reported(value: object, says: str) -> None:
    found = problems_of(with_value(base_config(), "data_timeout", value))
    assert any(path == "data_timeout" and says in message for path, message in found), found


@pytest.mark.parametrize(
    ("quiet_for", "data_timeout", "refused"),
    [("10m", "24h", False), ("2h", "1h", True), ("1h", "1h", True), ("59m", "1h", False)],
)
def test_quiet_for_must_be_shorter_than_data_timeout(
    quiet_for: str, data_timeout: str, refused: bool
) -> None:
    config = with_value(quiet_config(quiet_for=quiet_for), "data_timeout", data_timeout)
    if not refused:
        assert parse(config).data_timeout > quiet_route(config).quiet.quiet_for  # type: ignore[union-attr]
        return
    [message] = [message for path, message in problems_of(config) if path == f"{GCS}.quiet_for"]
    assert "not shorter than data_timeout" in message


def test_a_quiet_route_needs_a_requests_topic_to_start_its_runs() -> None:
    config = with_value(quiet_config(), "requests_topic", DELETE)
    [message] = [message for path, message in problems_of(config) if path == f"{GCS}.completion"]
    assert "requests_topic" in message and "reconciler" in message


# --- parameters and templates of a quiet route --------------------------------------------------


def test_a_quiet_routes_fields_are_the_directorys_and_the_patterns_names() -> None:
    route = quiet_route(quiet_config(dataset="exports/{date}/{shard_set}/", match="exports/*/*/*"))
    assert route_fields(route) == quiet_fields(route.quiet.dataset if route.quiet else "")
    assert route_fields(route) == {"bucket", "dirname", "dataset_uri", "date", "shard_set"}


def test_quiet_route_params_may_use_the_directory_and_the_patterns_names() -> None:
    config = quiet_config()
    config["routes"][3]["params"] = {"dataset_uri": "gs://{bucket}/{dirname}/?day={date}&{run_id}"}
    assert quiet_route(config).params["dataset_uri"].endswith("day={date}&{run_id}")


@pytest.mark.parametrize("name", ["object", "basename", "generation"])
def test_quiet_route_params_may_not_use_one_objects_fields(name: str) -> None:
    config = quiet_config()
    config["routes"][3]["params"] = {"dataset_uri": f"gs://{{bucket}}/{{{name}}}"}
    found = problems_of(config)
    assert any(
        path == f"{Q}.params.dataset_uri" and "first shard's" in message for path, message in found
    ), found


def test_quiet_route_params_may_not_use_another_triggers_fields() -> None:
    config = quiet_config()
    config["routes"][3]["params"] = {"dataset_uri": "{message_id}"}
    found = problems_of(config)
    assert any(
        path == f"{Q}.params.dataset_uri" and "not a field of a gcs trigger" in message
        for path, message in found
    ), found


def test_a_template_using_an_objects_field_cannot_serve_a_quiet_route() -> None:
    config = quiet_config()
    config = with_value(config, "templates.resnet.display_name", "resnet-{basename}")
    found = problems_of(config)
    assert any(
        path == f"{Q}.template" and "{basename}" in message and "quiet" in message
        for path, message in found
    ), found
    # the same template serves the marker route of the base config: no problem reported there
    assert not any(path.startswith("routes[0]") for path, _ in found), found


def test_a_template_may_use_the_patterns_names() -> None:
    config = quiet_config()
    config = with_value(config, f"{T}.params", ["dataset_uri", "date"])
    config = with_value(config, f"{T}.display_name", "resnet-{date}-{run_id}")
    # the marker route and the schedule carry no {date}: they must fill it themselves
    config = with_value(config, "routes[0].params.date", "{dirname}")
    config = with_value(config, "routes[2].params.date", "latest")
    assert quiet_route(config).quiet is not None


def test_a_template_using_a_name_the_pattern_lacks_is_reported() -> None:
    config = quiet_config()
    config = with_value(config, f"{T}.params", ["dataset_uri", "day"])
    config = with_value(config, f"{T}.display_name", "resnet-{day}")
    config = with_value(config, "routes[0].params.day", "{dirname}")
    config = with_value(config, "routes[2].params.day", "latest")
    found = problems_of(config)
    assert any(path == f"{Q}.params" and "{day}" in message for path, message in found), found


# --- the dataset pattern -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("exports/{date}/", None),
        ("exports/", None),
        ("{date}/", None),
        ("v{major}.{minor}/{date}/", None),
        ("exports/day-{n}_x/", None),
        ("exports/{date}", "must end with /"),
        ("/exports/", "no leading /"),
        ("exports//{date}/", "empty directory name"),
        ("exports/*/", "not a glob"),
        ("exports/[0-9]/", "not a glob"),
        ("exports/{date/", "not a placeholder"),
        ("exports/{}/", "not a placeholder"),
        ("exports/{1st}/", "not a placeholder"),
        ("exports/{a b}/", "not a placeholder"),
        ("exports/{a/b}/", "not a placeholder"),
        ("exports/date}/", "closes no placeholder"),
        ("{date}/{date}/", "twice"),
        ("{a}{b}/", "side by side"),
        ("{bucket}/", "dispatch fills itself"),
        ("x/{run_id}/", "dispatch fills itself"),
    ],
)
def test_dataset_patterns(pattern: str, says: str | None) -> None:
    problem = dataset_pattern_problem(pattern)
    if says is None:
        assert problem is None
    else:
        assert problem is not None and says in problem


def test_a_pattern_is_split_into_directories_and_names() -> None:
    pattern = parse_dataset_pattern("v{major}.{minor}/exports/{date}/")
    assert pattern.directories == (("v", "{major}", ".", "{minor}"), ("exports",), ("{date}",))
    assert pattern.names == ("major", "minor", "date")


# --- covering match: the verdict, and the decoder agreeing with it ----------------------------

COVERED = [
    # dataset, match, objects the match matches (all must fall in a dataset)
    ("exports/{date}/", "exports/*/part-*.parquet", ["exports/2026-12-01/part-00042.parquet"]),
    ("exports/{date}/", "exports/*/**", ["exports/d/a", "exports/d/a/b/c.parquet"]),
    ("exports/{date}/", "exports/2026-*/**", ["exports/2026-12-01/x"]),
    ("exports/{date}/", "exports/[0-9]*/x", ["exports/2026/x"]),
    ("exports/", "exports/**", ["exports/a", "exports/a/b"]),
    ("exports/", "exports/**/x.csv", ["exports/x.csv", "exports/a/b/x.csv"]),
    ("exports/day-{n}/", "exports/day-?*/x", ["exports/day-1/x", "exports/day-12/x"]),
    ("exports/day-{n}/", "exports/day-[0-9]/*", ["exports/day-7/a"]),
    ("{team}/{date}/", "*/*/*.parquet", ["vision/2026-12-01/a.parquet"]),
    ("v{major}.{minor}/", "v?.?*/**", ["v1.2/x", "v1.23/a/b"]),
    ("v{major}.{minor}/", "v1.2/x", ["v1.2/x"]),
    ("a{d}/", "a[!/]*?/x", ["abc/x", "abcd/x"]),
    ("{d}/", "[!x]*/y", ["a/y"]),
]


@pytest.mark.parametrize(("pattern", "match", "objects"), COVERED)
def test_a_covering_pattern_is_accepted_and_every_object_falls_in_a_dataset(
    pattern: str, match: str, objects: list[str]
) -> None:
    assert coverage_problem(parse_dataset_pattern(pattern), match) is None
    for name in objects:
        assert glob_regex(match).fullmatch(name), name
        assert dataset_of(pattern, name) is not None, name


UNCOVERED = [
    # dataset, match, what the reason says, an object the match matches that falls in no dataset
    ("exports/{date}/", "exports/**", "holds **", "exports/a.csv"),
    ("exports/{date}/", "exports/**/x", "holds **", "exports/x"),
    ("exports/{date}/", "**/x", "directory 1 holds **", "x"),
    ("exports/{date}/", "other/*/x", "may be named", "other/d/x"),
    ("exports/{date}/", "*/*/x", "may be named", "imports/d/x"),
    ("exports/{date}/", "exports/*.csv", "1 directory deep", "exports/a.csv"),
    ("exports/{date}/", "x", "0 directories deep", "x"),
    ("exports/{date}/", "exports/*/", "names the directory itself", "exports/d/"),
    ("exports/day-{n}/", "exports/day-*/x", "'day-'", "exports/day-/x"),
    ("exports/day-{n}/", "exports/*/x", "may be named", "exports/night-1/x"),
    ("exports/day-{n}/", "exports/day?/x", "may be named", "exports/dayx/x"),
    ("daily/", "*/x", "'daily' does not match", "weekly/x"),
    ("daily/", "dail?/x", "'daily' does not match", "dailx/x"),
    ("v{major}.{minor}/", "v*/x", "may be named", "v1/x"),
    ("a{d}/", "[ab]*/x", "may be named", "bcd/x"),
    ("{d}/", "[a/b]/x", "class with /", "//x"),
    ("{a}/{b}/", "*/**", "directory 2 holds **", "a/x"),
]


@pytest.mark.parametrize(("pattern", "match", "says", "stray"), UNCOVERED)
def test_a_pattern_that_leaves_objects_out_is_refused_and_says_why(
    pattern: str, match: str, says: str, stray: str
) -> None:
    problem = coverage_problem(parse_dataset_pattern(pattern), match)
    assert problem is not None and says in problem, problem
    assert glob_regex(match).fullmatch(stray)
    assert dataset_of(pattern, stray) is None
