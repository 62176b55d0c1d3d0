"""The watchdogs' pure rules: how long a job may queue, and what a run no placement takes is due."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob
from run_builders import FLEX_2H, NOW, POOL, an_attempt

from shared.config.model import (
    Config,
    FlexStartPlacement,
    PersistentResourcePlacement,
    Template,
)
from shared.policy.watchdogs import (
    NoPlacementDue,
    NoPlacementLimits,
    QueueLimit,
    QueueLimitSource,
    alert_claim,
    no_placement_due,
    no_placement_limits,
    queue_limit,
)

GRACE = timedelta(minutes=30)
FLEX_FOREVER = {"flex_start": {"max_wait": "0s"}}
TEMPLATE = Template(
    name="resnet-a100",
    display_name="resnet-{run_id}",
    job_spec={},
    placements=(
        PersistentResourcePlacement("a100-pool"),
        FlexStartPlacement(max_wait=timedelta(hours=2)),
    ),
)
HOURLY = replace(TEMPLATE, max_queue=timedelta(hours=1))


def job(strategy: str = "FLEX_START", max_wait: str | None = "7200s") -> CustomJob:
    scheduling: dict[str, Any] = {"strategy": strategy}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    return CustomJob.from_json(json.dumps({"jobSpec": {"scheduling": scheduling}}))


def limit(hours: float, source: QueueLimitSource) -> QueueLimit:
    return QueueLimit(timedelta(hours=hours), source)


@pytest.mark.parametrize(
    ("template", "placement", "the_job", "expected"),
    [
        pytest.param(
            TEMPLATE,
            FLEX_2H,
            job(),
            limit(2.5, QueueLimitSource.MAX_WAIT),
            id="flex-max-wait+grace",
        ),
        pytest.param(
            TEMPLATE,
            POOL,
            job("STRATEGY_UNSPECIFIED", None),
            limit(24, QueueLimitSource.DEFAULT),
            id="persistent-resource-24h",
        ),
        pytest.param(
            TEMPLATE,
            FLEX_FOREVER,
            job(max_wait="86400s"),
            limit(24, QueueLimitSource.DEFAULT),
            id="flex-max-wait-0-24h",
        ),
        pytest.param(
            HOURLY,
            POOL,
            job("STRATEGY_UNSPECIFIED", None),
            limit(1, QueueLimitSource.MAX_QUEUE),
            id="max-queue-on-a-persistent-resource",
        ),
        pytest.param(
            HOURLY,
            FLEX_2H,
            job(),
            limit(1, QueueLimitSource.MAX_QUEUE),
            id="max-queue-on-flex-start",
        ),
        pytest.param(
            replace(TEMPLATE, max_queue=timedelta(days=3)),
            FLEX_FOREVER,
            job(max_wait="0s"),
            limit(72, QueueLimitSource.MAX_QUEUE),
            id="max-queue-longer-than-the-default",
        ),
        pytest.param(
            None,
            FLEX_2H,
            job(),
            limit(2.5, QueueLimitSource.MAX_WAIT),
            id="template-left-the-config",
        ),
        pytest.param(
            None,
            {},
            job(max_wait=None),
            limit(24.5, QueueLimitSource.MAX_WAIT),
            id="no-record-flex-job-vertex-default-1-day+grace",
        ),
    ],
)
def test_queue_limit(
    template: Template | None, placement: dict[str, Any], the_job: CustomJob, expected: QueueLimit
) -> None:
    attempt = an_attempt(1, placement=placement)
    assert queue_limit(template, the_job, attempt, GRACE) == expected


LIMITS = NoPlacementLimits(alert_after=timedelta(hours=6), give_up_after=timedelta(days=7))


def claim(scope: str) -> str:
    return f"no_placement@2026-12-01T12:00:00Z/{scope}"


@pytest.mark.parametrize(
    ("waited", "expected_claim", "give_up"),
    [
        pytest.param(timedelta(0), None, False, id="just-began"),
        pytest.param(timedelta(hours=5, minutes=59), None, False, id="before-the-alert"),
        pytest.param(timedelta(hours=6), claim("day0"), False, id="at-the-alert"),
        pytest.param(timedelta(hours=29, minutes=59), claim("day0"), False, id="same-day"),
        pytest.param(timedelta(hours=30), claim("day1"), False, id="a-day-later"),
        pytest.param(timedelta(days=6, hours=23), claim("day6"), False, id="last-day"),
        pytest.param(timedelta(days=7), claim("end"), True, id="give-up"),
        pytest.param(timedelta(days=40), claim("end"), True, id="long-past-give-up"),
    ],
)
def test_no_placement_due(waited: timedelta, expected_claim: str | None, give_up: bool) -> None:
    due = no_placement_due(NOW, NOW + waited, LIMITS, "no_placement")
    assert due == NoPlacementDue(waited, give_up=give_up, alert_claim=expected_claim)


def test_a_clock_behind_the_wait_start_has_waited_nothing() -> None:
    assert no_placement_due(NOW, NOW - timedelta(minutes=1), LIMITS, "no_placement") == (
        NoPlacementDue(timedelta(0))
    )


def test_each_wait_has_claims_of_its_own() -> None:
    later = NOW + timedelta(days=2)
    first = no_placement_due(NOW, NOW + timedelta(hours=7), LIMITS, "no_placement")
    second = no_placement_due(later, later + timedelta(hours=7), LIMITS, "no_placement")
    assert first.alert_claim != second.alert_claim


def test_a_templates_own_limits_win_over_the_configs() -> None:
    config = Config(project="acme-ml", region="us-central1", source="t", alerts_topic="a")
    own = replace(TEMPLATE, no_placement_alert=timedelta(hours=1))
    assert no_placement_limits(config, TEMPLATE) == NoPlacementLimits(
        timedelta(hours=6), timedelta(days=7)
    )
    assert no_placement_limits(config, own) == NoPlacementLimits(
        timedelta(hours=1), timedelta(days=7)
    )


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ((), "watchdog_overdue_wait"),
        (("attempt2",), "watchdog_overdue_wait@attempt2"),
        ((NOW, "day3"), "watchdog_overdue_wait@2026-12-01T12:00:00Z/day3"),
    ],
)
def test_alert_claim(scope: tuple[object, ...], expected: str) -> None:
    assert alert_claim("watchdog_overdue_wait", *scope) == expected
