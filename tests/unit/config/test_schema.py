"""shared/config/schema.json (for editors) names exactly the keys the loader accepts."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

import pytest

from shared.config.guards import GUARD_KEYS
from shared.config.loader import TOP_LEVEL_KEYS
from shared.config.model import QUIET_KEYS, FailureClass, RetryPolicy
from shared.config.placements import (
    FLEX_START_KEYS,
    MACHINE_KEYS,
    ON_DEMAND_KEYS,
    PERSISTENT_RESOURCE_KEYS,
    PLACEMENT_KINDS,
    RESERVATION_KEYS,
    SPOT_KEYS,
)
from shared.config.quiet import AFTER_START_NAMES
from shared.config.retry import BACKOFF_KEYS, RETRY_KEYS, RETRYABLE_NAMES
from shared.config.routes import COMPLETIONS, GCS_KEYS, PUBSUB_KEYS, ROUTE_KEYS
from shared.config.shorthand import (
    ACCELERATOR_KEYS,
    BOOT_DISK_TYPES,
    DISK_KEYS,
    PYTHON_PACKAGE_KEYS,
    WORKER_POOL_KEYS,
)
from shared.config.templates import PLACEMENT_ORDER_NAMES, TEMPLATE_KEYS
from shared.config.tuning import (
    ALGORITHM_NAMES,
    GOAL_NAMES,
    MODEL_KEYS,
    PARAMETER_KEYS,
    PIPELINE_KEYS,
    RANGE_KEYS,
    SCALE_NAMES,
    TUNING_KEYS,
)
from shared.config.watching import FORMAT_NAMES, WEBHOOK_KEYS

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "shared/config/schema.json").read_text())
DEFS = SCHEMA["$defs"]
PLACEMENTS = DEFS["placement"]["oneOf"]
FLEX = PLACEMENTS[1]["properties"]["flex_start"]
KIND = {next(iter(entry["required"])): entry for entry in PLACEMENTS}


@pytest.mark.parametrize(
    ("schema_object", "loader_keys"),
    [
        (SCHEMA, TOP_LEVEL_KEYS),
        (DEFS["guards"], GUARD_KEYS),
        (DEFS["route"], ROUTE_KEYS),
        (DEFS["route"]["properties"]["gcs"], GCS_KEYS),
        (DEFS["route"]["properties"]["pubsub"], PUBSUB_KEYS),
        (DEFS["template"], TEMPLATE_KEYS),
        (DEFS["worker_pool"], WORKER_POOL_KEYS),
        (DEFS["accelerator"], ACCELERATOR_KEYS),
        (DEFS["worker_pool"]["properties"]["disk"], DISK_KEYS),
        (DEFS["worker_pool"]["properties"]["python_package"], PYTHON_PACKAGE_KEYS),
        (PLACEMENTS[0], PERSISTENT_RESOURCE_KEYS),
        (FLEX, FLEX_START_KEYS),
        (DEFS["machine_override"], MACHINE_KEYS),
        (KIND["spot"]["properties"]["spot"], SPOT_KEYS),
        (KIND["on_demand"]["properties"]["on_demand"], ON_DEMAND_KEYS),
        (KIND["reservation"]["properties"]["reservation"], RESERVATION_KEYS),
        (DEFS["retry"], RETRY_KEYS),
        (DEFS["retry"]["properties"]["backoff"], BACKOFF_KEYS),
        (DEFS["alert_webhook"], WEBHOOK_KEYS),
        (DEFS["hyperparameter_tuning"], TUNING_KEYS),
        (DEFS["tuning_parameter"], PARAMETER_KEYS),
        (DEFS["tuning_parameter"]["properties"]["double"], RANGE_KEYS),
        (DEFS["tuning_parameter"]["properties"]["integer"], RANGE_KEYS),
        (DEFS["training_pipeline"], PIPELINE_KEYS),
        (DEFS["training_pipeline"]["properties"]["model"], MODEL_KEYS),
    ],
)
def test_schema_keys_match_the_loader(schema_object: dict, loader_keys: Collection[str]) -> None:
    assert schema_object["additionalProperties"] is False
    assert set(schema_object["properties"]) == set(loader_keys)


@pytest.mark.parametrize(
    ("schema_enum", "loader_values"),
    [
        (DEFS["retry"]["properties"]["retry_on"]["items"]["enum"], RETRYABLE_NAMES),
        (DEFS["worker_pool"]["properties"]["disk"]["properties"]["type"]["enum"], BOOT_DISK_TYPES),
        (DEFS["alert_webhook"]["properties"]["format"]["enum"], FORMAT_NAMES),
        (DEFS["route"]["properties"]["gcs"]["properties"]["completion"]["enum"], COMPLETIONS),
        (
            DEFS["route"]["properties"]["gcs"]["properties"]["after_start"]["enum"],
            AFTER_START_NAMES,
        ),
        (DEFS["hyperparameter_tuning"]["properties"]["algorithm"]["enum"], ALGORITHM_NAMES),
        (
            DEFS["hyperparameter_tuning"]["properties"]["metrics"]["additionalProperties"]["enum"],
            GOAL_NAMES,
        ),
        (DEFS["tuning_parameter"]["properties"]["scale"]["enum"], SCALE_NAMES),
        (DEFS["template"]["properties"]["placement_order"]["enum"], PLACEMENT_ORDER_NAMES),
        (
            DEFS["retry"]["properties"]["retry_on"]["default"],
            [kind.value for kind in RetryPolicy().retry_on],
        ),
    ],
)
def test_schema_enums_match_the_loader(schema_enum: list, loader_values: Collection[str]) -> None:
    assert sorted(schema_enum) == sorted(loader_values)
    assert set(RETRYABLE_NAMES) < {kind.value for kind in FailureClass}


def test_schema_has_one_entry_per_placement_kind() -> None:
    assert list(KIND) == list(PLACEMENT_KINDS)
    for kind in ("flex_start", "spot", "on_demand", "reservation"):
        inner = KIND[kind]["properties"][kind]["properties"]
        assert "machine" in inner and inner["machine"] == {"$ref": "#/$defs/machine_override"}


def test_the_schema_says_which_gcs_keys_need_completion_quiet() -> None:
    gcs = DEFS["route"]["properties"]["gcs"]
    (rule,) = gcs["allOf"]
    assert rule["if"]["properties"]["completion"] == {"const": "quiet"}
    assert rule["then"] == {"required": ["dataset"]}
    quiet_only = {key for entry in rule["else"]["not"]["anyOf"] for key in entry["required"]}
    assert quiet_only == set(QUIET_KEYS) == GCS_KEYS - {"bucket", "match", "completion"}


def test_the_schema_allows_one_job_kind_and_one_parameter_type() -> None:
    template = DEFS["template"]
    assert template["not"] == {"required": ["hyperparameter_tuning", "training_pipeline"]}
    types = [entry["required"] for entry in DEFS["tuning_parameter"]["oneOf"]]
    assert types == [["double"], ["integer"], ["discrete"], ["categorical"]]
