"""shared.model.runkeys: one key per trigger, stable across versions, ids safe as labels and doc
ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.model.runkeys import (
    dataset_run_key,
    is_run_id,
    object_run_key,
    request_run_key,
    rfc3339,
    run_id,
    schedule_run_key,
)

# A label value: at most 63 characters of [a-z0-9_-]; a run id must also start with a letter.
LABEL_VALUE = re.compile(r"[a-z][a-z0-9_-]{0,62}")
TICK = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)

RUN_KEYS = [
    (
        object_run_key("acme-inbox", "uploads/batch-17.csv", 1733100000000000),
        "gcs:acme-inbox/uploads/batch-17.csv@1733100000000000",
    ),
    (
        dataset_run_key("acme-datasets", "imagenet/2026-12-01", 1733100000000000),
        "gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
    ),
    (dataset_run_key("acme-datasets", "", 7), "gcs:acme-datasets/@7"),
    (request_run_key("9876543210", "retrain-2026-12-01"), "request-key:retrain-2026-12-01"),
    (request_run_key("9876543210", None), "request-message:9876543210"),
    (schedule_run_key("nightly-retrain", TICK), "schedule:nightly-retrain@2026-12-01T02:00:00Z"),
    (
        schedule_run_key(
            "nightly-retrain", datetime(2026, 12, 1, 3, 0, tzinfo=timezone(timedelta(hours=1)))
        ),
        "schedule:nightly-retrain@2026-12-01T02:00:00Z",
    ),
]


@pytest.mark.parametrize(("run_key", "expected"), RUN_KEYS)
def test_run_key_per_trigger_kind(run_key: str, expected: str) -> None:
    assert run_key == expected


# Golden ids: the ledger and job labels of existing runs depend on these never changing.
GOLDEN_IDS = [
    ("gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000", "r-f54b759517c3e627353adde8"),
    ("request-key:retrain-2026-12-01", "r-b4f07da95532dd1e41a4f361"),
    ("schedule:nightly-retrain@2026-12-01T02:00:00Z", "r-0419010ae84b175857651082"),
]


@pytest.mark.parametrize(("run_key", "expected"), GOLDEN_IDS)
def test_run_id_is_stable(run_key: str, expected: str) -> None:
    assert run_id(run_key) == expected


@given(st.text(max_size=2000))
def test_run_id_is_a_label_value_and_a_document_id(run_key: str) -> None:
    the_id = run_id(run_key)
    assert LABEL_VALUE.fullmatch(the_id)
    assert is_run_id(the_id)
    assert "/" not in the_id and the_id not in {".", ".."}  # Firestore document id rules


def test_idempotency_key_and_message_id_namespaces_differ() -> None:
    assert run_id(request_run_key("abc", "abc")) != run_id(request_run_key("abc", None))


def test_a_new_marker_generation_is_a_new_run() -> None:
    first = dataset_run_key("acme-datasets", "imagenet/2026-12-01", 1)
    rewritten = dataset_run_key("acme-datasets", "imagenet/2026-12-01", 2)
    assert run_id(first) != run_id(rewritten)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("r-f54b759517c3e627353adde8", True),
        ("r-F54B759517C3E627353ADDE8", False),
        ("r-f54b759517c3e627353add", False),
        ("x-f54b759517c3e627353adde8", False),
        ("r-f54b759517c3e627353adde8\n", False),
    ],
)
def test_is_run_id(text: str, expected: bool) -> None:
    assert is_run_id(text) is expected


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (TICK, "2026-12-01T02:00:00Z"),
        (TICK.replace(microsecond=412000), "2026-12-01T02:00:00.412000Z"),
        (datetime(2026, 12, 1, 0, 0, tzinfo=timezone(timedelta(hours=-5))), "2026-12-01T05:00:00Z"),
    ],
)
def test_rfc3339_is_utc_with_z(moment: datetime, expected: str) -> None:
    assert rfc3339(moment) == expected


def test_rfc3339_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="time zone"):
        rfc3339(datetime(2026, 12, 1, 2, 0))
