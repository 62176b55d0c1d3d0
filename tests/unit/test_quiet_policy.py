"""The quiet-dataset rule (policy/quiet.py): when a marker-less dataset is complete, when it is
worth listing, when it is overdue, and which shards dispatch need not read the ledger for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.adapters.storage import StoredObject
from shared.config.model import QuietRule
from shared.handlers.quiet_datasets import dataset_location
from shared.policy import quiet
from shared.policy.quiet import (
    HORIZON_MARGIN,
    arrival_is_covered,
    data_overdue,
    earliest_completion,
    horizon,
    is_complete,
    overdue_at,
    quiet_from,
    worth_listing,
)

T = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
RULE = QuietRule(dataset="exports/{date}/", quiet_for=10 * MINUTE, min_objects=3)
DAY = timedelta(hours=24)


def test_a_dataset_cannot_be_complete_before_its_newest_object_plus_quiet_for() -> None:
    assert earliest_completion(T, RULE) == T + 10 * MINUTE


@pytest.mark.parametrize(
    ("objects", "newest", "now", "complete"),
    [
        pytest.param(3, T, T + 10 * MINUTE, True, id="quiet-exactly-quiet_for-with-min"),
        pytest.param(100_000, T, T + 11 * MINUTE, True, id="many-objects-quiet"),
        pytest.param(3, T, T + 10 * MINUTE - timedelta(seconds=1), False, id="a-second-early"),
        pytest.param(2, T, T + DAY, False, id="quiet-but-short-of-min_objects"),
        pytest.param(0, None, T + DAY, False, id="no-object-at-all"),
        pytest.param(3, T + MINUTE, T, False, id="newest-after-now-clock-skew"),
    ],
)
def test_is_complete(objects: int, newest: datetime | None, now: datetime, complete: bool) -> None:
    assert is_complete(objects, newest, now, RULE) is complete


@pytest.mark.parametrize(
    ("newest_seen", "now", "worth"),
    [
        pytest.param(None, T, True, id="never-listed"),
        pytest.param(T, T + 9 * MINUTE, False, id="still-being-written-as-far-as-known"),
        pytest.param(T, T + 10 * MINUTE, True, id="quiet_for-passed-since-newest-seen"),
    ],
)
def test_worth_listing(newest_seen: datetime | None, now: datetime, worth: bool) -> None:
    assert worth_listing(newest_seen, now, RULE) is worth


@pytest.mark.parametrize(
    ("objects", "newest", "listed_at", "expected"),
    [
        pytest.param(3, T, T + 5 * MINUTE, T, id="min-met-the-newest-object"),
        pytest.param(
            2, T, T + 30 * MINUTE, T + 30 * MINUTE - HORIZON_MARGIN, id="short-the-listing-time"
        ),
        pytest.param(
            0, None, T + 30 * MINUTE, T + 30 * MINUTE - HORIZON_MARGIN, id="empty-the-listing"
        ),
        # Short, with an object newer than the listing's clock (Cloud Storage's clock ahead).
        pytest.param(1, T + MINUTE, T, T + MINUTE, id="short-newest-after-listing"),
    ],
)
def test_quiet_from(
    objects: int, newest: datetime | None, listed_at: datetime, expected: datetime
) -> None:
    assert quiet_from(objects, newest, listed_at, RULE) == expected


def test_a_short_dataset_is_listed_again_only_quiet_for_after_the_listing() -> None:
    # Listed at L, short of min_objects: an object written after L can complete it no earlier
    # than L + quiet_for, so ticks in between need no listing.
    listed_at = T + 30 * MINUTE
    remembered = quiet_from(2, T, listed_at, RULE)
    assert not worth_listing(remembered, listed_at + 9 * MINUTE, RULE)
    assert worth_listing(remembered, listed_at + 10 * MINUTE - HORIZON_MARGIN, RULE)


@pytest.mark.parametrize(
    ("objects", "newest", "since", "now", "deadline", "overdue"),
    [
        pytest.param(2, T, T - MINUTE, T + DAY, T + DAY, True, id="short-nothing-written-a-day"),
        pytest.param(2, T, T - MINUTE, T + DAY - MINUTE, T + DAY, False, id="short-a-minute-early"),
        pytest.param(0, None, T, T + DAY, T + DAY, True, id="nothing-ever-from-since"),
        # Objects written then removed: the newest left is older than the wait's start.
        pytest.param(1, T - DAY, T, T + DAY, T + DAY, True, id="newest-before-since"),
        pytest.param(3, T, T, T + 7 * DAY, None, False, id="min-met-never-overdue"),
    ],
)
def test_data_overdue(
    objects: int,
    newest: datetime | None,
    since: datetime,
    now: datetime,
    deadline: datetime | None,
    overdue: bool,
) -> None:
    assert overdue_at(objects, newest, since, DAY, RULE) == deadline
    assert data_overdue(objects, newest, since, now, DAY, RULE) is overdue


@pytest.mark.parametrize(
    ("written", "known_horizon", "covered"),
    [
        pytest.param(T, horizon(T, RULE), True, id="the-shard-that-set-the-horizon"),
        pytest.param(horizon(T, RULE) - timedelta(seconds=1), horizon(T, RULE), True, id="before"),
        pytest.param(horizon(T, RULE), horizon(T, RULE), False, id="at-the-horizon"),
        pytest.param(None, horizon(T, RULE), False, id="no-event-time"),
        pytest.param(T, None, False, id="no-horizon-known"),
    ],
)
def test_arrival_is_covered(
    written: datetime | None, known_horizon: datetime | None, covered: bool
) -> None:
    assert arrival_is_covered(written, known_horizon) is covered


def test_the_horizon_is_the_earliest_completion_less_the_clock_margin() -> None:
    assert horizon(T, RULE) == earliest_completion(T, RULE) - HORIZON_MARGIN


@pytest.mark.parametrize(
    ("uri", "location"),
    [
        ("gs://acme/exports/2026-12-01/", ("acme", "exports/2026-12-01/")),
        # Without its slash the prefix would also list exports/2026-12-010/...
        ("gs://acme/exports/2026-12-01", ("acme", "exports/2026-12-01/")),
    ],
)
def test_dataset_location(uri: str, location: tuple[str, str]) -> None:
    assert dataset_location(uri) == location


def stored(name: str, minute: int) -> StoredObject:
    return StoredObject(name, 1, 1, None, datetime(2026, 12, 1, 11, minute, tzinfo=UTC))


def test_a_tally_counts_only_what_the_route_matches_after_the_earlier_cutoff() -> None:
    listed = [
        stored("exports/2026-12-01/part-00001.parquet", 10),
        stored("exports/2026-12-01/part-00002.parquet", 30),
        stored("exports/2026-12-01/_tmp/part-00003.parquet", 50),  # not matched: not counted
        stored("exports/2026-12-01/README", 59),
        stored("exports/2026-12-01/part-00000.parquet", 20),
    ]
    match = "exports/*/part-*.parquet"

    assert quiet.tally(listed, match) == quiet.Tally(3, datetime(2026, 12, 1, 11, 30, tzinfo=UTC))
    # Version 2 after a version 1 whose cutoff was 11:20: the objects written at or before it
    # were version 1's.
    cutoff = datetime(2026, 12, 1, 11, 20, tzinfo=UTC)
    assert quiet.tally(listed, match, after=cutoff) == quiet.Tally(
        1, datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    )
    assert quiet.tally([], "exports/**") == quiet.Tally(0, None)
    # exports/** matches a folder placeholder too; it holds no data and is not counted.
    placeholder = [stored("exports/2026-12-01/", 50), stored("exports/2026-12-01/a", 5)]
    assert quiet.tally(placeholder, "exports/**") == quiet.Tally(
        1, datetime(2026, 12, 1, 11, 5, tzinfo=UTC)
    )
