"""shared.decode.events: what the decoder lets through must be storable and real, else
MalformedEvent.

A job request's body is kept whole in the ledger, so a body Firestore cannot store (nested too
deep, an integer beyond int64, an array inside an array, a key it refuses) must be refused at
decoding, as the malformed input it is, naming where it is; and a timestamp that matches the
RFC 3339 pattern but names no real moment (30 February, hour 24, a UTC time outside years
1-9999) must be refused there too. Before, both escaped as ValueError/OverflowError (HTTP 500,
redelivered for ever, nothing recorded, nobody alerted). The limits are in docs/messages.md.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from cloudevents.http import CloudEvent

from shared.decode import events
from shared.decode.events import MAX_JSON_DEPTH, MAX_KEY_PATH_BYTES, PUBSUB_PUBLISHED, decode
from shared.model.errors import MalformedEvent
from shared.model.triggers import JobRequest, ScheduleTick

SCHEDULE = {"vertex_dispatch_kind": "schedule"}
GOOD_TIME = "2026-12-01T02:00:03.412Z"


def pubsub_event(
    body: dict[str, Any] | bytes,
    attributes: dict[str, str] | None = None,
    publish_time: str = GOOD_TIME,
) -> CloudEvent:
    """A messagePublished CloudEvent as Eventarc delivers it."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return CloudEvent(
        {"type": PUBSUB_PUBLISHED, "source": "//pubsub.googleapis.com/x", "id": "42"},
        {
            "message": {
                "data": base64.b64encode(raw).decode(),
                "attributes": attributes or {},
                "messageId": "42",
                "publishTime": publish_time,
            },
            "subscription": "projects/acme-ml/subscriptions/requests",
        },
    )


def nested(levels: int, leaf: object = 1) -> object:
    """``levels`` objects, one inside the other, around ``leaf``: nested(2) == {"n": {"n": 1}}."""
    value = leaf
    for _ in range(levels):
        value = {"n": value}
    return value


def body_of_depth(depth: int) -> dict[str, Any]:
    """A job request body whose deepest object is at level ``depth`` (the body is level 1)."""
    return {"template": "resnet", "extra": nested(depth - 1)}


def tick(time: str) -> CloudEvent:
    return pubsub_event({"schedule": "nightly-retrain", "time": time}, SCHEDULE)


# --- timestamps ------------------------------------------------------------------------------

IMPOSSIBLE_TIMES = [
    pytest.param("2026-02-30T00:00:00Z", "day is out of range", id="30-february"),
    pytest.param("2026-13-01T00:00:00Z", "month must be in 1..12", id="month-13"),
    pytest.param("2026-12-01T24:00:00Z", "hour must be in 0..23", id="hour-24"),
    pytest.param("2026-12-01T02:61:00Z", "minute must be in 0..59", id="minute-61"),
    pytest.param("2026-12-31T23:59:60Z", "second must be in 0..59", id="leap-second"),
    pytest.param("0000-01-01T00:00:00Z", "year 0 is out of range", id="year-0"),
    pytest.param("2026-12-01T02:00:00+24:00", "offset", id="offset-24h"),
    # Valid as written, but outside datetime's range once in UTC (the run key is UTC).
    pytest.param("9999-12-31T23:59:59-01:00", "out of range", id="utc-after-year-9999"),
    pytest.param("0001-01-01T00:00:00+01:00", "out of range", id="utc-before-year-1"),
]


@pytest.mark.parametrize(("time", "reason"), IMPOSSIBLE_TIMES)
def test_a_tick_time_naming_no_real_moment_is_malformed(time: str, reason: str) -> None:
    with pytest.raises(MalformedEvent) as caught:
        decode(tick(time))
    message = str(caught.value)
    assert "schedule tick body.time" in message
    assert repr(time) in message and "no real moment" in message
    assert reason in message


@pytest.mark.parametrize(("time", "reason"), IMPOSSIBLE_TIMES[:3])
def test_a_publish_time_naming_no_real_moment_is_malformed(time: str, reason: str) -> None:
    with pytest.raises(MalformedEvent, match="publishTime") as caught:
        decode(pubsub_event({"template": "resnet"}, publish_time=time))
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("time", "expected"),
    [
        ("2028-02-29T00:00:00Z", datetime(2028, 2, 29, tzinfo=UTC)),
        ("9999-12-31T23:59:59Z", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("0001-01-01T00:00:00-01:00", datetime(1, 1, 1, 1, 0, tzinfo=UTC)),
        ("2026-12-01T03:00:00.123456789+01:00", datetime(2026, 12, 1, 2, 0, 0, 123456, UTC)),
    ],
)
def test_real_moments_at_the_edges_are_accepted(time: str, expected: datetime) -> None:
    decoded = decode(tick(time))
    assert isinstance(decoded, ScheduleTick) and decoded.tick_time == expected


# --- bodies the ledger could not store -------------------------------------------------------

UNSTORABLE_BODIES = [
    pytest.param(
        body_of_depth(MAX_JSON_DEPTH + 1),
        f"nested {MAX_JSON_DEPTH + 1} levels deep",
        "job request body.extra" + ".n" * (MAX_JSON_DEPTH - 1),
        id="objects-one-level-too-deep",
    ),
    pytest.param(
        {"extra": [{"a": [{"b": [{"c": [{"d": [{"e": [1]}]}]}]}]}]},
        "nested",
        "job request body.extra[0]",
        id="arrays-and-objects-too-deep",
    ),
    pytest.param(
        {"extra": nested(40)},
        f"nested {MAX_JSON_DEPTH + 1} levels deep",
        "job request body.extra",
        id="forty-levels",
    ),
    pytest.param(
        {"note": 2**63}, "outside int64", "job request body.note", id="integer-above-int64"
    ),
    pytest.param(
        {"note": [1, {"x": -(2**63) - 1}]},
        "outside int64",
        "job request body.note[1].x",
        id="integer-below-int64-inside-an-array",
    ),
    pytest.param(
        {"shape": [[1, 2], [3, 4]]},
        "array directly inside an array",
        "job request body.shape[",
        id="array-in-array",
    ),
    pytest.param({"": 1}, "empty", "job request body", id="empty-key"),
    pytest.param({"a": {"__name__": 1}}, "reserved", "job request body.a", id="reserved-key"),
    pytest.param(
        {"k" * (MAX_KEY_PATH_BYTES + 1): 1},
        f"{MAX_KEY_PATH_BYTES + 1} bytes in UTF-8, over the limit",
        "job request body",
        id="key-too-long",
    ),
    pytest.param(
        {"k" * 600: [{"é" * 212: 1}]},  # 600 + "." + 424 bytes
        f"{MAX_KEY_PATH_BYTES + 1} bytes in UTF-8, over the limit",
        "job request body.kkkk",
        id="key-path-too-long-through-an-array",
    ),
]


@pytest.mark.parametrize(("body", "rule", "where"), UNSTORABLE_BODIES)
def test_a_body_the_ledger_cannot_store_is_malformed(
    body: dict[str, Any], rule: str, where: str
) -> None:
    with pytest.raises(MalformedEvent) as caught:
        decode(pubsub_event(body))
    message = str(caught.value)
    assert rule in message and where in message
    assert len(message) < 1000  # a huge body cannot flood the logs through the message


def test_a_body_too_deep_for_the_json_parser_says_so() -> None:
    raw = b'{"a": ' + b'{"n": ' * 5000 + b"1" + b"}" * 5001
    with pytest.raises(MalformedEvent, match="nested"):
        decode(pubsub_event(raw))


def test_a_reserved_attribute_key_is_malformed() -> None:
    # A tick's and a request's attributes are stored with the run too.
    with pytest.raises(MalformedEvent, match="reserved"):
        decode(pubsub_event({"template": "resnet"}, {"__x__": "1"}))


STORABLE_BODIES = [
    pytest.param(body_of_depth(MAX_JSON_DEPTH), id="exactly-the-depth-limit"),
    pytest.param(
        {"extra": [{"a": [{"b": [{"c": [{"d": 1}]}]}]}]}, id="arrays-of-objects-within-limit"
    ),
    pytest.param({"big": 2**63 - 1, "small": -(2**63), "flag": True}, id="int64-extremes"),
    pytest.param({"x": 1e308, "y": -0.0}, id="floats"),
    pytest.param({"k" * 600: {"j" * 423: 1}, "_x_": 1, "__x": 1, "x__": 1}, id="legal-keys"),
    pytest.param({"k" * MAX_KEY_PATH_BYTES: 1, "a.b": 1, "`": 1}, id="longest-key"),
]


@pytest.mark.parametrize("body", STORABLE_BODIES)
def test_storable_bodies_up_to_the_limits_are_accepted(body: dict[str, Any]) -> None:
    decoded = decode(pubsub_event(body))
    assert isinstance(decoded, JobRequest) and decoded.body == body


def test_the_documented_depth_limit_is_the_constant() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "messages.md").read_text()
    assert f"at most {events.MAX_JSON_DEPTH} levels" in doc
