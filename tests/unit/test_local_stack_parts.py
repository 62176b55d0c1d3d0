"""The local stack's pure parts: cron matching, Eventarc's event shape and retry, push routes."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from emulator_stack.cron import CronError, cron_matches
from emulator_stack.eventarc import DeliveryPolicy, finalized_event
from emulator_stack.wiring import PushRoute, topic_path


@pytest.mark.parametrize(
    ("expression", "moment", "fires"),
    [
        ("0 2 * * *", datetime(2026, 12, 1, 2, 0), True),
        ("0 2 * * *", datetime(2026, 12, 1, 2, 1), False),
        ("*/15 * * * *", datetime(2026, 12, 1, 9, 45), True),
        ("*/15 * * * *", datetime(2026, 12, 1, 9, 46), False),
        ("0 9-17 * * 1-5", datetime(2026, 12, 4, 12, 0), True),  # a Friday
        ("0 9-17 * * 1-5", datetime(2026, 12, 5, 12, 0), False),  # a Saturday
        ("0 0 * * 7", datetime(2026, 12, 6, 0, 0), True),  # Sunday as 7
        ("0 0 1 * 0", datetime(2026, 12, 1, 0, 0), True),  # day 1 OR Sunday
        ("30 4 1,15 * *", datetime(2026, 12, 15, 4, 30), True),
    ],
)
def test_cron_matches(expression: str, moment: datetime, fires: bool) -> None:
    assert cron_matches(expression, moment) is fires


@pytest.mark.parametrize(
    ("expression", "says"),
    [("0 2 * *", "five"), ("61 * * * *", "0-59"), ("x * * * *", "minute")],
)
def test_cron_errors_name_the_field(expression: str, says: str) -> None:
    with pytest.raises(CronError, match=says):
        cron_matches(expression, datetime(2026, 12, 1))


def test_finalized_event_is_shaped_as_eventarc_sends_it() -> None:
    resource = {
        "bucket": "demo-datasets",
        "name": "imagenet/2026-12-01/_SUCCESS",
        "generation": 1733100000000000,
        "metageneration": 1,
        "size": 0,
        "contentType": "text/plain",
    }
    headers, body = finalized_event(resource)
    assert headers["ce-type"] == "google.cloud.storage.object.v1.finalized"
    assert headers["ce-source"] == "//storage.googleapis.com/projects/_/buckets/demo-datasets"
    assert headers["ce-subject"] == "objects/imagenet/2026-12-01/_SUCCESS"
    data = json.loads(body)
    assert (data["generation"], data["metageneration"], data["size"]) == (
        "1733100000000000",
        "1",
        "0",
    )


@pytest.mark.parametrize(("failed", "seconds"), [(1, 0.5), (2, 1.0), (3, 2.0), (5, 5.0)])
def test_delivery_backoff_doubles_to_a_cap(failed: int, seconds: float) -> None:
    assert DeliveryPolicy().backoff(failed) == seconds


@pytest.mark.parametrize(
    ("topic", "subscription", "endpoint"),
    [
        (
            "projects/local-project/topics/training-requests",
            "projects/local-project/subscriptions/training-requests-push",
            "http://127.0.0.1:9000/projects/local-project/topics/training-requests",
        ),
    ],
)
def test_push_route_posts_to_the_topic_path(topic: str, subscription: str, endpoint: str) -> None:
    route = PushRoute(topic, "http://127.0.0.1:9000")
    assert (route.subscription, route.endpoint) == (subscription, endpoint)


@pytest.mark.parametrize(
    ("topic", "full"),
    [("alerts", "projects/p/topics/alerts"), ("projects/q/topics/a1b", "projects/q/topics/a1b")],
)
def test_topic_path(topic: str, full: str) -> None:
    assert topic_path("p", topic) == full
