"""shared.decode.events: real-shaped CloudEvents in, triggers or MalformedEvent out."""

from __future__ import annotations

import base64
import contextlib
import json
from datetime import UTC, datetime

import flask
import pytest
from cloudevents.http import CloudEvent
from functions_framework import event_conversion
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.decode.events import PUBSUB_PUBLISHED, STORAGE_FINALIZED, decode
from shared.model.errors import MalformedEvent
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick

BUCKET = "acme-datasets"
MARKER = "imagenet/2026-12-01/_SUCCESS"
EVENT_TIME = "2026-12-01T01:59:58.123456Z"
PUBLISH_TIME = "2026-12-01T02:00:03.412Z"
RUN_ID = "r-3f2a9c0d1e4b5a6978877665"


def object_resource(**overrides: object) -> dict[str, object]:
    """The object resource as Eventarc delivers it: int64 fields are JSON strings."""
    resource: dict[str, object] = {
        "kind": "storage#object",
        "id": f"{BUCKET}/{MARKER}/1733100000000000",
        "bucket": BUCKET,
        "name": MARKER,
        "generation": "1733100000000000",
        "metageneration": "1",
        "size": "0",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "timeCreated": "2026-12-01T01:59:58.123Z",
        "md5Hash": "1B2M2Y8AsgTpgAmY7PhCfg==",
    }
    resource.update(overrides)
    return {k: v for k, v in resource.items() if v is not None}


def storage_event(data: object = None, **attributes: str) -> CloudEvent:
    return CloudEvent(
        {
            "type": STORAGE_FINALIZED,
            "source": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
            "subject": f"objects/{MARKER}",
            "id": "7264937102123456",
            "time": EVENT_TIME,
            **attributes,
        },
        object_resource() if data is None else data,
    )


def encoded(body: object) -> str:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return base64.b64encode(raw).decode()


def pubsub_event(
    body: object = None, attributes: dict[str, object] | None = None, **message: object
) -> CloudEvent:
    """A messagePublished CloudEvent as Eventarc delivers it; body None means no data."""
    fields: dict[str, object] = {"messageId": "9876543210", "publishTime": PUBLISH_TIME}
    if body is not None:
        fields["data"] = encoded(body)
    if attributes is not None:
        fields["attributes"] = attributes
    fields.update(message)
    return CloudEvent(
        {
            "type": PUBSUB_PUBLISHED,
            "source": "//pubsub.googleapis.com/projects/acme-ml/topics/requests",
            "id": "9876543210",
            "time": PUBLISH_TIME,
        },
        {
            "message": {k: v for k, v in fields.items() if v is not None},
            "subscription": "projects/acme-ml/subscriptions/eventarc-requests",
        },
    )


def pushed_event(body: object, attributes: dict[str, str]) -> CloudEvent:
    """A plain Pub/Sub push body converted by functions-framework's own code."""
    push_body = {
        "message": {
            "data": encoded(body),
            "attributes": attributes,
            "messageId": "1111111111",
            "message_id": "1111111111",
            "publishTime": PUBLISH_TIME,
            "publish_time": PUBLISH_TIME,
        },
        "subscription": "projects/acme-ml/subscriptions/push-requests",
    }
    app = flask.Flask(__name__)
    path = "/projects/acme-ml/topics/requests"
    with app.test_request_context(path, method="POST", json=push_body):
        return event_conversion.background_event_to_cloud_event(flask.request)


def without_time(event: CloudEvent) -> CloudEvent:
    del event["time"]
    return event


PUBLISHED_AT = datetime(2026, 12, 1, 2, 0, 3, 412000, tzinfo=UTC)

DECODED = [
    pytest.param(
        storage_event(),
        ObjectFinalized(
            bucket=BUCKET,
            name=MARKER,
            generation=1733100000000000,
            metageneration=1,
            size=0,
            event_id="7264937102123456",
            event_time=datetime(2026, 12, 1, 1, 59, 58, 123456, tzinfo=UTC),
            content_type="application/octet-stream",
        ),
        id="storage-int64-as-strings",
    ),
    pytest.param(
        storage_event(object_resource(generation=1733100000000001, size=524288, contentType=None)),
        ObjectFinalized(
            bucket=BUCKET,
            name=MARKER,
            generation=1733100000000001,
            metageneration=1,
            size=524288,
            event_id="7264937102123456",
            event_time=datetime(2026, 12, 1, 1, 59, 58, 123456, tzinfo=UTC),
        ),
        id="storage-int64-as-numbers",
    ),
    pytest.param(
        storage_event(json.dumps(object_resource()).encode()),
        ObjectFinalized(
            bucket=BUCKET,
            name=MARKER,
            generation=1733100000000000,
            metageneration=1,
            size=0,
            event_id="7264937102123456",
            event_time=datetime(2026, 12, 1, 1, 59, 58, 123456, tzinfo=UTC),
            content_type="application/octet-stream",
        ),
        id="storage-data-as-raw-json-bytes",
    ),
    pytest.param(
        pubsub_event(
            {"template": "resnet-a100", "params": {"dataset_uri": "gs://acme-datasets/x/"}},
            {"vertex_dispatch_kind": "request", "idempotency_key": "retrain-2026-12-01"},
        ),
        JobRequest(
            message_id="9876543210",
            attributes={"vertex_dispatch_kind": "request", "idempotency_key": "retrain-2026-12-01"},
            body={"template": "resnet-a100", "params": {"dataset_uri": "gs://acme-datasets/x/"}},
            publish_time=PUBLISHED_AT,
            idempotency_key="retrain-2026-12-01",
        ),
        id="request-with-idempotency-key",
    ),
    pytest.param(
        pubsub_event(None, {"kind": "train"}),
        JobRequest(
            message_id="9876543210",
            attributes={"kind": "train"},
            body={},
            publish_time=PUBLISHED_AT,
        ),
        id="request-attributes-only-kind-defaults-to-request",
    ),
    pytest.param(
        pushed_event({"template": "resnet-a100"}, {"kind": "train"}),
        JobRequest(
            message_id="1111111111",
            attributes={"kind": "train"},
            body={"template": "resnet-a100"},
            publish_time=PUBLISHED_AT,
        ),
        id="request-pubsub-push-wrapped-body",
    ),
    pytest.param(
        pubsub_event({"schedule": "nightly-retrain"}, {"vertex_dispatch_kind": "schedule"}),
        ScheduleTick(
            message_id="9876543210",
            schedule="nightly-retrain",
            tick_time=datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
            attributes={"vertex_dispatch_kind": "schedule"},
        ),
        id="tick-time-is-publish-minute",
    ),
    pytest.param(
        pubsub_event(
            {"schedule": "nightly-retrain", "time": "2026-11-30T02:00:00+01:00"},
            {"vertex_dispatch_kind": "schedule"},
        ),
        ScheduleTick(
            message_id="9876543210",
            schedule="nightly-retrain",
            tick_time=datetime(2026, 11, 30, 1, 0, tzinfo=UTC),
            attributes={"vertex_dispatch_kind": "schedule"},
        ),
        id="tick-time-from-body-backfill",
    ),
    pytest.param(
        pubsub_event(
            {"run_id": RUN_ID, "attempt": 2, "placement_index": 1, "reason": "capacity"},
            {"vertex_dispatch_kind": "retry"},
        ),
        RetryRequest(
            message_id="9876543210",
            run_id=RUN_ID,
            attempt=2,
            placement_index=1,
            reason="capacity",
        ),
        id="retry",
    ),
    pytest.param(
        pubsub_event(
            {"run_id": RUN_ID, "attempt": 3, "placement_index": 0},
            {"vertex_dispatch_kind": "retry"},
            messageId=None,
        ),
        RetryRequest(
            message_id="9876543210", run_id=RUN_ID, attempt=3, placement_index=0, reason=""
        ),
        id="retry-message-id-from-cloudevent-id",
    ),
]


@pytest.mark.parametrize(("event", "expected"), DECODED)
def test_decode_accepts_real_shaped_events(event: CloudEvent, expected: object) -> None:
    assert decode(event) == expected


SCHEDULE = {"vertex_dispatch_kind": "schedule"}
RETRY = {"vertex_dispatch_kind": "retry"}
GOOD_RETRY = {"run_id": RUN_ID, "attempt": 2, "placement_index": 1}
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000

MALFORMED = [
    # event type
    (CloudEvent({"type": "google.cloud.storage.object.v1.deleted", "source": "s"}, {}), "type"),
    (CloudEvent({"type": "com.example.unknown", "source": "s"}, {}), "not accepted"),
    # Cloud Storage
    (storage_event(["not", "an", "object"]), "must be a JSON object"),
    (storage_event(b"\x80\x81 not utf-8"), "not UTF-8"),
    (storage_event(b"{not json"), "not JSON"),
    (storage_event(b"{" + b" " * 300_000 + b"}"), "over 262144 bytes"),
    (storage_event(object_resource(bucket=None)), "data.bucket"),
    (storage_event(object_resource(name="")), "data.name"),
    (storage_event(object_resource(name="x" * 1025), subject="objects/" + "x" * 1025), "1024"),
    (storage_event(object_resource(name="a\tb"), subject="objects/a\tb"), "control character"),
    (storage_event(object_resource(generation="abc")), "data.generation"),
    (storage_event(object_resource(generation="0")), "data.generation"),
    (storage_event(object_resource(generation=True)), "data.generation"),
    (storage_event(object_resource(generation=1.5)), "data.generation"),
    (storage_event(object_resource(generation=str(2**63))), "data.generation"),
    (storage_event(object_resource(metageneration=None)), "data.metageneration"),
    (storage_event(object_resource(size="-1")), "data.size"),
    (storage_event(object_resource(contentType=7)), "data.contentType"),
    (storage_event(subject="objects/other/_SUCCESS"), "subject"),
    (storage_event(source="//storage.googleapis.com/projects/_/buckets/other"), "source"),
    (storage_event(time="yesterday"), "attribute time"),
    # Pub/Sub envelope
    (CloudEvent({"type": PUBSUB_PUBLISHED, "source": "s"}, {"subscription": "x"}), "message"),
    (pubsub_event({}, ["kind", "train"]), "attributes must be an object"),
    (pubsub_event({}, {f"a{i}": "v" for i in range(33)}), "33 attributes"),
    (pubsub_event({}, {"kind": 1}), "string to a string"),
    (pubsub_event({}, {"": "v"}), "attribute key"),
    (pubsub_event({}, {"kind": "v" * 1025}), "over 1024 bytes"),
    (pubsub_event({}, {"vertex_dispatch_kind": "cancel"}), "vertex_dispatch_kind='cancel'"),
    (pubsub_event(None, data="not base64!"), "base64"),
    (pubsub_event(None, data=12), "base64 string"),
    (pubsub_event(None, data="A" * 90_000), "over 65536 bytes"),
    (pubsub_event({}, messageId=42), "messageId"),
    (pubsub_event({}, publishTime="2026-12-01 02:00"), "publishTime"),
    # bodies
    (pubsub_event(b"\xff\xfe{}"), "not UTF-8"),
    (pubsub_event(b"template=resnet"), "not JSON"),
    (pubsub_event(["resnet-a100"]), "must be a JSON object"),
    (pubsub_event(b'{"template": "resnet-a100", "params": {"lr": NaN}}'), "NaN"),
    (pubsub_event(DEEP_JSON[:60_000]), "not JSON"),
    # job request
    (pubsub_event({"template": ["resnet-a100"]}), "body.template"),
    (pubsub_event({"template": ""}), "body.template"),
    (pubsub_event({"params": ["dataset_uri"]}), "body.params"),
    (pubsub_event({}, {"idempotency_key": ""}), "idempotency_key"),
    # schedule tick
    (pubsub_event(None, SCHEDULE), "schedule tick body is not JSON"),
    (pubsub_event({"time": "2026-12-01T02:00:00Z"}, SCHEDULE), "body.schedule"),
    (pubsub_event({"schedule": "nightly retrain"}, SCHEDULE), "body.schedule"),
    (pubsub_event({"schedule": "n", "time": "2026-12-01T02:00:00"}, SCHEDULE), "body.time"),
    (without_time(pubsub_event({"schedule": "n"}, SCHEDULE, publishTime=None)), "publishTime"),
    # retry
    (pubsub_event({**GOOD_RETRY, "run_id": "run-1"}, RETRY), "body.run_id"),
    (pubsub_event({**GOOD_RETRY, "attempt": 0}, RETRY), "body.attempt"),
    (pubsub_event({**GOOD_RETRY, "attempt": "2"}, RETRY), "body.attempt"),
    (pubsub_event({**GOOD_RETRY, "attempt": True}, RETRY), "body.attempt"),
    (pubsub_event({"run_id": RUN_ID, "placement_index": 1}, RETRY), "body.attempt"),
    (pubsub_event({**GOOD_RETRY, "placement_index": -1}, RETRY), "body.placement_index"),
    (pubsub_event({**GOOD_RETRY, "reason": "x" * 1025}, RETRY), "body.reason"),
]


@pytest.mark.parametrize(("event", "message_part"), MALFORMED)
def test_decode_refuses_malformed_events(event: CloudEvent, message_part: str) -> None:
    with pytest.raises(MalformedEvent) as caught:
        decode(event)
    assert message_part in str(caught.value)


def test_an_object_event_without_time_has_no_event_time() -> None:
    assert decode(without_time(storage_event())).event_time is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children)
    ),
    max_leaves=6,
)
fields_of = st.dictionaries(
    st.sampled_from(["bucket", "name", "generation", "metageneration", "size", "message", "data"]),
    json_values,
)


@settings(max_examples=150, deadline=None)
@given(data=fields_of, kind=st.sampled_from(["request", "schedule", "retry", "x"]))
def test_decode_never_lets_a_raw_error_out(data: dict[str, object], kind: str) -> None:
    events = [
        CloudEvent({"type": STORAGE_FINALIZED, "source": "s"}, data),
        CloudEvent({"type": PUBSUB_PUBLISHED, "source": "s"}, {"message": data}),
        pubsub_event(data, {"vertex_dispatch_kind": kind}),
    ]
    for event in events:
        with contextlib.suppress(MalformedEvent):
            decode(event)


@pytest.mark.parametrize(
    ("updated", "expected"),
    [
        ("2026-12-01T01:59:58.123Z", datetime(2026, 12, 1, 1, 59, 58, 123000, tzinfo=UTC)),
        (None, None),  # absent: the event's time serves
        ("yesterday", None),  # unreadable: left out, never a reason to refuse the event
    ],
)
def test_an_objects_updated_time_is_decoded_when_readable(
    updated: str | None, expected: datetime | None
) -> None:
    trigger = decode(storage_event(object_resource(updated=updated)))
    assert isinstance(trigger, ObjectFinalized)
    assert trigger.updated == expected
