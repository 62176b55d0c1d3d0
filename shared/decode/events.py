"""CloudEvent → Trigger: the one place that trusts nothing about what the platform delivers.

``decode`` turns the CloudEvent functions-framework passes (Eventarc, or a Pub/Sub push body it
converted) into a ``shared.model.triggers`` value. Anything malformed, oversized, non-UTF-8, not
JSON where JSON is required, or of an unknown type raises ``MalformedEvent`` with a message naming
the field, the rule and the fix; no ``KeyError`` or ``TypeError`` escapes. The accepted shapes and
limits are documented in docs/messages.md, which this module and its tests must agree with.

No Google Cloud client is imported here: decoding happens before routing, and an event that
matches no route must stay cheap (docs/architecture.md, "Costs").
"""

from __future__ import annotations

import base64
import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shared.model.errors import MalformedEvent
from shared.model.runkeys import is_run_id
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger

if TYPE_CHECKING:
    from cloudevents.abstract import CloudEvent

STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"

KIND_ATTRIBUTE = "vertex_dispatch_kind"
IDEMPOTENCY_KEY_ATTRIBUTE = "idempotency_key"


class MessageKind(enum.Enum):
    """What a message on the requests topic is, told by its ``vertex_dispatch_kind`` attribute."""

    REQUEST = "request"  # run a template (the default when the attribute is absent)
    SCHEDULE = "schedule"  # a Cloud Scheduler tick
    RETRY = "retry"  # the job-state function asking for the next attempt of a run


# Limits (docs/messages.md). Pub/Sub itself allows 10 MB bodies and 100 attributes; a request
# needs a few hundred bytes, so anything near those sizes is a mistake or an attack.
MAX_OBJECT_NAME_BYTES = 1024  # Cloud Storage's own limit
MAX_EVENT_DATA_BYTES = 256 * 1024  # event data that arrives as raw bytes instead of parsed JSON
MAX_BODY_BYTES = 64 * 1024  # decoded Pub/Sub message body
MAX_ATTRIBUTES = 32
MAX_ATTRIBUTE_KEY_BYTES = 256
MAX_ATTRIBUTE_VALUE_BYTES = 1024
MAX_MESSAGE_ID_CHARS = 256
MAX_RETRY_ATTEMPT = 1000
MAX_PLACEMENT_INDEX = 100
MAX_REASON_CHARS = 1024
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# A job request's body is stored whole in the ledger (Firestore), so a JSON body must be one
# Firestore can store: maps and arrays nested at most 20 deep in the document (the body sits at
# trigger.body, and the emulator counts an array as up to two levels), field paths of at most
# 1500 bytes, integers within int64, no array directly in an array, no empty or __reserved__ key.
# The limits below leave a margin under Firestore's; a body past them is malformed, refused here
# with its path, rather than a ledger error (measured against the emulator: a ValueError or
# protobuf DecodeError from the client, or INVALID_ARGUMENT).
MAX_JSON_DEPTH = 10  # objects and arrays, the body itself being level 1
MAX_KEY_PATH_BYTES = 1024  # the keys leading to any value, joined with ".", in UTF-8

_MAX_BODY_BASE64_CHARS = 4 * -(-MAX_BODY_BYTES // 3)
_INT64_STRING = re.compile(r"-?[0-9]{1,19}")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
_SCHEDULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Cloud Storage forbids CR and LF in names; other control characters would reach job arguments.
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_STORAGE_SOURCE = re.compile(r"//storage\.googleapis\.com/projects/[^/]+/buckets/(?P<bucket>[^/]+)")
_SHOWN_VALUE_CHARS = 80
# JSON's \ud800-style escapes decode to lone UTF-16 surrogates: Python strings that UTF-8 cannot
# encode, so they would fail at the first ledger write or hash (a 500, redelivered forever)
# rather than here, as the malformed input they are. Searched only in text that is not ASCII
# (ASCII holds no surrogate), and compiled on that first search (re's cache), not at import: its
# character class takes about 0.3 ms to compile, on every cold start.
_LONE_SURROGATE = "[\ud800-\udfff]"
_RESERVED_KEY = re.compile("__.*__", re.DOTALL)  # Firestore reserves these field names
_SHOWN_PATH_CHARS = 160


def decode(cloud_event: CloudEvent) -> Trigger:
    """The trigger ``cloud_event`` carries; ``MalformedEvent`` when it is not one we accept."""
    event_type = cloud_event.get("type")
    decoder = _DECODERS.get(event_type) if isinstance(event_type, str) else None
    if decoder is None:
        accepted = ", ".join(sorted(_DECODERS))
        raise MalformedEvent(
            f"CloudEvent type {_shown(event_type)} is not accepted: the functions take only "
            f"{accepted}; point the trigger at one of those event types"
        )
    refuse_lone_surrogates(cloud_event.get_attributes(), "CloudEvent attributes")
    return decoder(cloud_event)


def refuse_lone_surrogates(value: object, where: str) -> None:
    """``MalformedEvent`` if any string in ``value`` (and the keys and items it holds) contains
    a lone UTF-16 surrogate, which is not text."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and re.search(_LONE_SURROGATE, item):
                raise MalformedEvent(
                    f"{where} holds a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without "
                    "its pair), which is not Unicode text; send valid UTF-8"
                )
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)


def printable(value: object) -> str:
    """``str(value)`` with any lone surrogate written as its escape: safe to store or hash."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


# --- Cloud Storage ---------------------------------------------------------------------------


def _decode_object_finalized(cloud_event: CloudEvent) -> ObjectFinalized:
    data = _event_data(cloud_event, "storage event")
    bucket = _required_text(data, "bucket", "storage event data")
    name = _required_text(data, "name", "storage event data")
    _check_object_name(name)
    _check_source_agrees(cloud_event, bucket, name)
    return ObjectFinalized(
        bucket=bucket,
        name=name,
        generation=_int64(data, "generation", minimum=1),
        metageneration=_int64(data, "metageneration", minimum=1),
        size=_int64(data, "size", minimum=0),
        event_id=_event_id(cloud_event),
        event_time=_optional_timestamp(cloud_event.get("time"), "CloudEvent attribute time"),
        content_type=_optional_text(data, "contentType", "storage event data"),
        updated=_lenient_timestamp(data.get("updated")),
    )


def _lenient_timestamp(value: object) -> datetime | None:
    """An optional timestamp that only refines a decision (the object's ``updated``): one that
    cannot be read is left out rather than refusing an event Cloud Storage sent."""
    try:
        return _optional_timestamp(value, "storage event data.updated")
    except MalformedEvent:
        return None


def _check_object_name(name: str) -> None:
    if len(name.encode("utf-8")) > MAX_OBJECT_NAME_BYTES:
        raise MalformedEvent(
            f"storage event data.name is longer than {MAX_OBJECT_NAME_BYTES} bytes in UTF-8, "
            "Cloud Storage's limit: the event was not emitted by Cloud Storage; drop it"
        )
    if _CONTROL_CHARACTER.search(name):
        raise MalformedEvent(
            f"storage event data.name {_shown(name)} contains a control character, which "
            "vertex-dispatch refuses to pass into job arguments; rename the object"
        )
    if {".", ".."} & set(name.split("/")):
        # Legal in Cloud Storage, but a "." or ".." segment in a dataset URI reads as another
        # directory to any tool that normalises paths (gcsfuse, a POSIX join in the job).
        raise MalformedEvent(
            f"storage event data.name {_shown(name)} has a '.' or '..' path segment, which "
            "vertex-dispatch refuses to pass into job arguments; rename the object"
        )


def _check_source_agrees(cloud_event: CloudEvent, bucket: str, name: str) -> None:
    """A hand-built event whose attributes contradict its data is refused rather than guessed."""
    source = cloud_event.get("source")
    found = _STORAGE_SOURCE.fullmatch(source) if isinstance(source, str) else None
    if found and found["bucket"] != bucket:
        raise MalformedEvent(
            f"CloudEvent source {_shown(source)} names bucket {found['bucket']!r} but "
            f"data.bucket is {bucket!r}; send the event exactly as Eventarc delivers it"
        )
    subject = cloud_event.get("subject")
    if subject is not None and subject != f"objects/{name}":
        raise MalformedEvent(
            f"CloudEvent subject {_shown(subject)} does not equal 'objects/' + data.name "
            f"({_shown(name)}); send the event exactly as Eventarc delivers it"
        )


# --- Pub/Sub ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Envelope:
    """The parts of a Pub/Sub message every kind needs, already checked."""

    message_id: str
    attributes: dict[str, str]
    body: bytes
    publish_time: datetime | None


def _decode_message_published(cloud_event: CloudEvent) -> Trigger:
    data = _event_data(cloud_event, "Pub/Sub event")
    message = data.get("message")
    if not isinstance(message, Mapping):
        raise MalformedEvent(
            "Pub/Sub event data.message is missing or not an object; publish through Pub/Sub "
            "(or push its envelope {'message': {...}, 'subscription': ...}) unchanged"
        )
    attributes = _attributes(message.get("attributes"))
    kind_name = attributes.get(KIND_ATTRIBUTE, MessageKind.REQUEST.value)
    try:
        kind = MessageKind(kind_name)
    except ValueError:
        kinds = ", ".join(k.value for k in MessageKind)
        raise MalformedEvent(
            f"Pub/Sub attribute {KIND_ATTRIBUTE}={_shown(kind_name)} is unknown: use one of "
            f"{kinds}, or leave it out for a job request"
        ) from None
    envelope = _Envelope(
        message_id=_message_id(message, cloud_event),
        attributes=attributes,
        body=_body(message.get("data")),
        publish_time=_publish_time(message, cloud_event),
    )
    return _MESSAGE_DECODERS[kind](envelope)


def _decode_request(envelope: _Envelope) -> JobRequest:
    body = _json_object(envelope.body, "job request body", empty_allowed=True)
    template = body.get("template")
    if template is not None and not (isinstance(template, str) and template):
        raise MalformedEvent(
            f"job request body.template must be a non-empty string naming a template; got "
            f"{_shown(template)}"
        )
    params = body.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise MalformedEvent(
            "job request body.params must be a JSON object of parameter name to string value, "
            f'e.g. {{"dataset_uri": "gs://..."}}; got {_shown(params)}'
        )
    idempotency_key = envelope.attributes.get(IDEMPOTENCY_KEY_ATTRIBUTE)
    if idempotency_key == "":
        raise MalformedEvent(
            f"Pub/Sub attribute {IDEMPOTENCY_KEY_ATTRIBUTE} is empty; set a non-empty key that "
            "names this request, or leave the attribute out to key the run by message ID"
        )
    return JobRequest(
        message_id=envelope.message_id,
        attributes=envelope.attributes,
        body=body,
        publish_time=envelope.publish_time,
        idempotency_key=idempotency_key,
    )


def _decode_schedule_tick(envelope: _Envelope) -> ScheduleTick:
    body = _json_object(envelope.body, "schedule tick body", empty_allowed=False)
    schedule = body.get("schedule")
    if not (isinstance(schedule, str) and _SCHEDULE_NAME.fullmatch(schedule)):
        raise MalformedEvent(
            "schedule tick body.schedule must name the schedule: 1-128 letters, digits, '_', '.' "
            f"or '-', starting with a letter or digit; got {_shown(schedule)}"
        )
    if "time" in body:
        tick_time = _timestamp(body["time"], "schedule tick body.time")
    elif envelope.publish_time is not None:
        # Cloud Scheduler publishes seconds after the scheduled minute and cannot template its
        # body, so the minute of the publish time is the scheduled time (and a re-publish of
        # the same tick lands on the same run key).
        tick_time = envelope.publish_time.replace(second=0, microsecond=0)
    else:
        raise MalformedEvent(
            "schedule tick has no body.time and its message no publishTime; add "
            '"time": "<RFC 3339>" to the body'
        )
    return ScheduleTick(
        message_id=envelope.message_id,
        schedule=schedule,
        tick_time=tick_time,
        attributes=envelope.attributes,
    )


def _decode_retry(envelope: _Envelope) -> RetryRequest:
    body = _json_object(envelope.body, "retry body", empty_allowed=False)
    run_id = body.get("run_id")
    if not (isinstance(run_id, str) and is_run_id(run_id)):
        raise MalformedEvent(
            "retry body.run_id must be a run id as the ledger records it ('r-' + 24 lowercase "
            f"hex digits); got {_shown(run_id)}"
        )
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise MalformedEvent(
            f"retry body.reason must be a string of at most {MAX_REASON_CHARS} characters; "
            f"got {_shown(reason)}"
        )
    return RetryRequest(
        message_id=envelope.message_id,
        run_id=run_id,
        attempt=_bounded_int(body, "attempt", 1, MAX_RETRY_ATTEMPT),
        placement_index=_bounded_int(body, "placement_index", 0, MAX_PLACEMENT_INDEX),
        reason=reason,
    )


def _message_id(message: Mapping[str, Any], cloud_event: CloudEvent) -> str:
    # Push envelopes carry both spellings; Eventarc's CloudEvent id is the message ID too.
    candidate = message.get("messageId", message.get("message_id", cloud_event.get("id")))
    if isinstance(candidate, str) and 0 < len(candidate) <= MAX_MESSAGE_ID_CHARS:
        return candidate
    raise MalformedEvent(
        "Pub/Sub event data.message.messageId must be a string of 1-"
        f"{MAX_MESSAGE_ID_CHARS} characters; got {_shown(candidate)}; publish through Pub/Sub, "
        "which sets it"
    )


def _publish_time(message: Mapping[str, Any], cloud_event: CloudEvent) -> datetime | None:
    if "publishTime" in message:
        return _timestamp(message["publishTime"], "Pub/Sub event data.message.publishTime")
    return _optional_timestamp(cloud_event.get("time"), "CloudEvent attribute time")


def _attributes(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise MalformedEvent(
            f"Pub/Sub event data.message.attributes must be an object; got {_shown(raw)}"
        )
    if len(raw) > MAX_ATTRIBUTES:
        raise MalformedEvent(
            f"Pub/Sub message has {len(raw)} attributes, over the limit of {MAX_ATTRIBUTES}; "
            "move data into the JSON body"
        )
    for key, value in raw.items():
        if not (isinstance(key, str) and isinstance(value, str)):
            raise MalformedEvent(
                f"Pub/Sub attribute {_shown(key)} must map a string to a string; got "
                f"{_shown(value)}"
            )
        if not 0 < len(key.encode("utf-8")) <= MAX_ATTRIBUTE_KEY_BYTES:
            raise MalformedEvent(
                f"Pub/Sub attribute key {_shown(key)} must be 1-{MAX_ATTRIBUTE_KEY_BYTES} bytes"
            )
        if _RESERVED_KEY.fullmatch(key):
            # Stored with the run (trigger.attributes), where Firestore refuses such a name.
            raise MalformedEvent(
                f"Pub/Sub attribute key {_shown(key)} has the form __name__, reserved by "
                "Firestore: the ledger cannot store it; rename the attribute"
            )
        if len(value.encode("utf-8")) > MAX_ATTRIBUTE_VALUE_BYTES:
            raise MalformedEvent(
                f"Pub/Sub attribute {key!r} is over {MAX_ATTRIBUTE_VALUE_BYTES} bytes; move "
                "the value into the JSON body"
            )
    return dict(raw)


def _body(raw: object) -> bytes:
    """The message body: base64 as Pub/Sub sends it; absent for an attributes-only message."""
    if raw is None:
        return b""
    if not isinstance(raw, str):
        raise MalformedEvent(
            f"Pub/Sub event data.message.data must be a base64 string; got {_shown(raw)}"
        )
    if len(raw) > _MAX_BODY_BASE64_CHARS:
        raise MalformedEvent(
            f"Pub/Sub message body is over {MAX_BODY_BYTES} bytes; send a reference (e.g. a "
            "gs:// URI parameter) instead of the data"
        )
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII characters
        raise MalformedEvent(
            "Pub/Sub event data.message.data is not valid standard base64; publish the body "
            "through a Pub/Sub client, which encodes it"
        ) from None


# --- shared field readers --------------------------------------------------------------------


def _event_data(cloud_event: CloudEvent, what: str) -> Mapping[str, Any]:
    """The event's data as a mapping: functions-framework parses JSON data, else gives bytes."""
    data = cloud_event.get_data()
    if isinstance(data, Mapping):
        refuse_lone_surrogates(data, f"{what} data")
        return data
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, bytes | bytearray):
        if len(data) > MAX_EVENT_DATA_BYTES:
            raise MalformedEvent(
                f"{what} data is over {MAX_EVENT_DATA_BYTES} bytes; it cannot be a real event"
            )
        return _json_object(bytes(data), f"{what} data", empty_allowed=False)
    raise MalformedEvent(f"{what} data must be a JSON object; got {_shown(data)}")


def _json_object(raw: bytes, what: str, *, empty_allowed: bool) -> dict[str, Any]:
    if not raw.strip() and empty_allowed:
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedEvent(
            f"{what} is not UTF-8 (bad byte at offset {error.start}); encode it as UTF-8 JSON"
        ) from None
    try:
        parsed = json.loads(text, parse_constant=_reject_non_finite)
    except RecursionError:
        raise MalformedEvent(
            f"{what} is not JSON that can be read: it is nested too deep to parse (the limit is "
            f"{MAX_JSON_DEPTH} levels of objects and arrays); send a flatter object"
        ) from None
    except ValueError as error:
        raise MalformedEvent(f"{what} is not JSON ({error}); send a JSON object") from None
    if not isinstance(parsed, dict):
        raise MalformedEvent(f"{what} must be a JSON object; got {_shown(parsed)}")
    refuse_lone_surrogates(parsed, what)
    _refuse_unstorable(parsed, what)
    return parsed


def _refuse_unstorable(document: dict[str, Any], what: str) -> None:
    """``MalformedEvent``, naming the place, if the ledger could not store ``document``: the
    limits above (depth, key paths, int64, arrays in arrays, empty and reserved keys)."""
    # (value, depth of the value if it is an object or array, path of keys and indices, bytes of
    # the keys joined with ".", whether the value is an array's item)
    pending: list[tuple[object, int, tuple[str | int, ...], int, bool]] = [
        (document, 1, (), 0, False)
    ]
    while pending:
        value, depth, path, path_bytes, in_array = pending.pop()
        if isinstance(value, bool) or not isinstance(value, int | dict | list):
            continue  # null, true/false, floats (doubles, as Firestore's) and strings fit
        if isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise _unstorable(
                    what,
                    path,
                    f"is {_shown(value)}, an integer outside int64; send it as a string",
                )
            continue
        if depth > MAX_JSON_DEPTH:
            raise _unstorable(
                what,
                path,
                f"is nested {depth} levels deep, over the limit of {MAX_JSON_DEPTH} objects and "
                "arrays (the body itself is level 1); send a flatter object",
            )
        if isinstance(value, list):
            if in_array:
                raise _unstorable(
                    what,
                    path,
                    "is an array directly inside an array; wrap the inner array in an object "
                    '({"items": [...]})',
                )
            pending.extend(
                (item, depth + 1, (*path, index), path_bytes, True)
                for index, item in enumerate(value)
            )
            continue
        for key, item in value.items():
            key_bytes = path_bytes + bool(path_bytes) + len(key.encode("utf-8"))
            problem = (
                "is empty"
                if not key
                else "has the form __name__, reserved by Firestore"
                if _RESERVED_KEY.fullmatch(key)
                else f"makes the keys leading to its value, joined with '.', {key_bytes} bytes "
                f"in UTF-8, over the limit of {MAX_KEY_PATH_BYTES}"
                if key_bytes > MAX_KEY_PATH_BYTES
                else None
            )
            if problem is not None:
                raise _unstorable(
                    what, path, f"has the key {_shown(key)}, which {problem}; rename the key"
                )
            pending.append((item, depth + 1, (*path, key), key_bytes, False))


def _unstorable(what: str, path: tuple[str | int, ...], problem: str) -> MalformedEvent:
    return MalformedEvent(
        f"{_shown_path(what, path)} {problem} (the ledger, Firestore, could not store it; limits "
        "in docs/messages.md)"
    )


def _shown_path(what: str, path: tuple[str | int, ...]) -> str:
    """``what`` and the path into it, e.g. ``job request body.extra[0].n``, cut short."""
    text = what + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    if len(text) <= _SHOWN_PATH_CHARS:
        return text
    return text[:_SHOWN_PATH_CHARS] + "..."


def _reject_non_finite(constant: str) -> float:
    raise ValueError(f"{constant} is not valid JSON")


def _required_text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not (isinstance(value, str) and value):
        raise MalformedEvent(f"{where}.{key} must be a non-empty string; got {_shown(value)}")
    return value


def _optional_text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise MalformedEvent(f"{where}.{key} must be a string when present; got {_shown(value)}")


def _int64(data: Mapping[str, Any], key: str, *, minimum: int) -> int:
    """An int64 field: Cloud Storage sends them as JSON strings; plain integers are accepted."""
    value = data.get(key)
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT64_STRING.fullmatch(value):
        number = int(value)
    if number is None or not minimum <= number <= INT64_MAX:
        raise MalformedEvent(
            f"storage event data.{key} must be an int64 >= {minimum}, as a JSON string of "
            f'digits (e.g. "1733100000000000") or a number; got {_shown(value)}'
        )
    return number


def _bounded_int(data: Mapping[str, Any], key: str, minimum: int, maximum: int) -> int:
    value = data.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= maximum:
        return value
    raise MalformedEvent(
        f"retry body.{key} must be an integer from {minimum} to {maximum}; got {_shown(value)}"
    )


def _timestamp(value: object, where: str) -> datetime:
    if isinstance(value, str) and _RFC3339.fullmatch(value):
        try:
            moment = datetime.fromisoformat(value)
            # The run key and the ledger hold it in UTC, which can leave datetime's years 1-9999.
            moment.astimezone(UTC)
        except (ValueError, OverflowError) as error:  # 30 February, hour 24, a leap second, ...
            raise MalformedEvent(
                f"{where} {_shown(value)} names no real moment ({error}); send an existing "
                'date and time whose UTC time is in the years 1-9999, e.g. "2026-12-01T02:00:00Z"'
            ) from None
        return moment
    raise MalformedEvent(
        f"{where} must be an RFC 3339 timestamp with a time zone, e.g. "
        f'"2026-12-01T02:00:00Z"; got {_shown(value)}'
    )


def _optional_timestamp(value: object, where: str) -> datetime | None:
    return None if value is None else _timestamp(value, where)


def _event_id(cloud_event: CloudEvent) -> str:
    event_id = cloud_event.get("id")
    if isinstance(event_id, str) and event_id:
        return event_id
    raise MalformedEvent("CloudEvent attribute id is missing; deliver the event through Eventarc")


def _shown(value: object) -> str:
    """``value`` for an error message, cut short so a huge payload cannot flood the logs."""
    text = repr(value)
    if len(text) <= _SHOWN_VALUE_CHARS:
        return text
    return text[:_SHOWN_VALUE_CHARS] + f"... ({len(text)} characters)"


_DECODERS: dict[str, Callable[[CloudEvent], Trigger]] = {
    STORAGE_FINALIZED: _decode_object_finalized,
    PUBSUB_PUBLISHED: _decode_message_published,
}

_MESSAGE_DECODERS: dict[MessageKind, Callable[[_Envelope], Trigger]] = {
    MessageKind.REQUEST: _decode_request,
    MessageKind.SCHEDULE: _decode_schedule_tick,
    MessageKind.RETRY: _decode_retry,
}
