"""shared.decode.routing for ``completion: quiet`` routes: an object names its dataset's run."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from test_routing import CONFIG, GENERATION, finalized

from shared.config.model import AfterStart, Completion, Config, GcsRoute, QuietRule
from shared.decode.routing import (
    DatasetNotFound,
    QuietDataset,
    RouteMatch,
    dataset_version_match,
    route,
)
from shared.model.errors import ConfigError
from shared.model.runkeys import dataset_version_run_key, run_id

RULE = QuietRule(
    dataset="exports/{date}/",
    quiet_for=timedelta(minutes=10),
    min_objects=3,
    after_start=AfterStart.NEW_RUN,
)
QUIET_ROUTE = GcsRoute(
    name="nightly-export",
    bucket="acme-exports",
    match="exports/**",
    template="resnet-a100",
    completion=Completion.QUIET,
    params={"output": "gs://acme-outputs/{date}/{run_id}/", "day": "{date}"},
    quiet=RULE,
)
QUIET_CONFIG: Config = dataclasses.replace(CONFIG, routes=(*CONFIG.routes, QUIET_ROUTE))

V1_KEY = "gcs-dataset:acme-exports/exports/2026-12-01/#1"
V1_ID = run_id(V1_KEY)


def test_a_shard_names_version_1_of_its_dataset_with_the_dataset_builtins() -> None:
    match = route(finalized("exports/2026-12-01/part-00042.parquet", "acme-exports"), QUIET_CONFIG)
    dataset = QuietDataset(
        QUIET_ROUTE, "acme-exports", "exports/2026-12-01/", {"date": "2026-12-01"}
    )
    assert match == RouteMatch(
        route="nightly-export",
        template="resnet-a100",
        params={
            "date": "2026-12-01",
            "run_id": V1_ID,
            "bucket": "acme-exports",
            "dirname": "exports/2026-12-01",
            "dataset_uri": "gs://acme-exports/exports/2026-12-01/",
            "output": f"gs://acme-outputs/2026-12-01/{V1_ID}/",
            "day": "2026-12-01",
        },
        run_key=V1_KEY,
        run_id=V1_ID,
        dataset=dataset,
    )
    assert dataset_version_run_key("acme-exports", "exports/2026-12-01/", 1) == V1_KEY
    assert dataset.rule is RULE and dataset.uri == "gs://acme-exports/exports/2026-12-01/"


# (object name, the dataset directory it belongs to)
SAME_DATASET = [
    ("exports/2026-12-01/part-00000.parquet", "exports/2026-12-01/"),
    ("exports/2026-12-01/part-99999.parquet", "exports/2026-12-01/"),
    ("exports/2026-12-01/nested/deeper/x.bin", "exports/2026-12-01/"),
    ("exports/2026-12-01/_SUCCESS", "exports/2026-12-01/"),
    ("exports/2026-12-02/part-00000.parquet", "exports/2026-12-02/"),
]


@pytest.mark.parametrize(("name", "prefix"), SAME_DATASET)
def test_every_object_under_a_dataset_directory_names_that_directorys_run(
    name: str, prefix: str
) -> None:
    match = route(finalized(name, "acme-exports"), QUIET_CONFIG)
    assert match is not None and match.dataset is not None
    assert match.dataset.prefix == prefix
    assert match.run_key == dataset_version_run_key("acme-exports", prefix, 1)
    assert "object" not in match.params and "generation" not in match.params


def test_versions_have_their_own_run_and_run_id_in_their_params() -> None:
    match = route(finalized("exports/2026-12-01/p.parquet", "acme-exports"), QUIET_CONFIG)
    assert match is not None and match.dataset is not None
    second = dataset_version_match(match.dataset, 2, QUIET_CONFIG)
    two_id = run_id("gcs-dataset:acme-exports/exports/2026-12-01/#2")
    assert (second.run_key, second.run_id) == (
        "gcs-dataset:acme-exports/exports/2026-12-01/#2",
        two_id,
    )
    assert second.params["run_id"] == two_id
    assert second.params["output"] == f"gs://acme-outputs/2026-12-01/{two_id}/"
    assert second.params["dataset_uri"] == match.params["dataset_uri"]
    assert second.dataset == match.dataset


@pytest.mark.parametrize(
    "name",
    [
        "exports/part-00000.parquet",  # directly under exports/: no {date} directory
        "exports/2026-12-01",  # the directory's own name, as an object
    ],
)
def test_an_object_the_match_takes_but_no_dataset_holds_is_a_config_error(name: str) -> None:
    with pytest.raises(DatasetNotFound) as raised:
        route(finalized(name, "acme-exports"), QUIET_CONFIG)
    assert isinstance(raised.value, ConfigError)
    message = str(raised.value)
    assert "nightly-export" in message and repr(RULE.dataset) in message and name in message


def test_a_folder_object_named_as_a_dataset_directory_starts_nothing() -> None:
    # The Cloud Console's "create folder" writes exports/2026-12-01/ as an empty object.
    assert route(finalized("exports/2026-12-01/", "acme-exports"), QUIET_CONFIG) is None
    # Nor does one deeper down: a placeholder holds no data (the reconciler does not count it).
    assert route(finalized("exports/2026-12-01/sub/", "acme-exports"), QUIET_CONFIG) is None


def test_a_quiet_routes_other_bucket_or_unmatched_object_matches_nothing() -> None:
    assert route(finalized("exports/2026-12-01/p.parquet", "other"), QUIET_CONFIG) is None
    assert route(finalized("imports/2026-12-01/p.parquet", "acme-exports"), QUIET_CONFIG) is None


def test_a_captured_name_shadowing_a_builtin_does_not_replace_it() -> None:
    shadow = dataclasses.replace(
        QUIET_ROUTE, quiet=dataclasses.replace(RULE, dataset="{bucket}/{date}/"), match="**"
    )
    config = dataclasses.replace(CONFIG, routes=(shadow,))
    match = route(finalized("evil/2026-12-01/p.parquet", "acme-exports"), config)
    assert match is not None
    assert match.params["bucket"] == "acme-exports"
    assert match.params["dataset_uri"] == "gs://acme-exports/evil/2026-12-01/"


def test_marker_routes_are_unchanged_by_quiet_routes() -> None:
    match = route(finalized("imagenet/2026-12-01/_SUCCESS"), QUIET_CONFIG)
    assert match is not None and match.dataset is None
    assert match.params["generation"] == str(GENERATION)
