"""Conversions of API messages between proto-plus, raw protobuf, wire bytes and REST JSON.

The Vertex AI types are proto-plus classes while the `google.longrunning` and `google.protobuf`
types are raw protobuf classes; the transports handle both through these few functions. REST JSON
is printed the way the real API prints it: camelCase names, enum names, RFC 3339 timestamps; JSON
the real API would refuse is refused with the real API's wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import proto
from google.protobuf import json_format
from google.protobuf.message import Message as ProtobufMessage

from vertex_ai_emulator.errors import invalid_argument

MessageClass = type[proto.Message] | type[ProtobufMessage]

# Fragments of protobuf's ParseError messages, reworded into what the real API answers.
_UNKNOWN_FIELD = re.compile(r'has no field named "(?P<field>[^"]+)" at "(?P<path>[^"]+)"')
_INVALID_ENUM = re.compile(
    r"Invalid enum value (?P<value>\S+) for enum type (?P<enum>[\w.]+) at (?P<path>\w+(?:\.\w+)*)"
)
_NESTING_PREFIX = re.compile(r"^(?:Failed to parse \w+ field: )+")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def as_protobuf(message: proto.Message | ProtobufMessage) -> ProtobufMessage:
    """The raw protobuf message behind `message` (itself when it already is one)."""
    if isinstance(message, proto.Message):
        return type(message).pb(message)
    return message


def rfc3339(moment: datetime) -> str:
    """A UTC time as the REST API prints it: `2025-01-02T03:04:05.678Z`."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def to_rest_dict(
    message: proto.Message | ProtobufMessage, integer_enums: bool = False
) -> dict[str, Any]:
    """The message as REST JSON, decoded into Python values."""
    return json_format.MessageToDict(as_protobuf(message), use_integers_for_enums=integer_enums)


def to_rest_json(message: proto.Message | ProtobufMessage, integer_enums: bool = False) -> str:
    """The message as compact REST JSON text."""
    return json.dumps(to_rest_dict(message, integer_enums), separators=(",", ":"))


def from_rest_dict(message_class: MessageClass, fields: dict[str, Any]) -> Any:
    """Build a `message_class` from REST JSON values (enums as names or numbers).

    Raises `EmulatorError` INVALID_ARGUMENT, worded like the real API, for unknown fields and
    values of the wrong type.
    """
    is_proto_plus = issubclass(message_class, proto.Message)
    empty = message_class.pb()() if is_proto_plus else message_class()
    try:
        parsed = json_format.ParseDict(fields, empty, ignore_unknown_fields=False)
    except json_format.ParseError as error:
        raise invalid_argument(rest_parse_error_message(str(error))) from None
    return message_class.wrap(parsed) if is_proto_plus else parsed


def rest_parse_error_message(parse_error: str) -> str:
    """Reword a protobuf JSON `ParseError` the way the real API reports a bad payload."""
    if unknown := _UNKNOWN_FIELD.search(parse_error):
        location = _field_path(unknown["path"])
        at = f" at '{location}'" if location else ""
        field = unknown["field"]
        return f'Invalid JSON payload received. Unknown name "{field}"{at}: Cannot find field.'
    if invalid_enum := _INVALID_ENUM.search(parse_error):
        return (
            f"Invalid value at '{_field_path(invalid_enum['path'])}' "
            f'(type.googleapis.com/{invalid_enum["enum"]}), "{invalid_enum["value"]}"'
        )
    innermost = _NESTING_PREFIX.sub("", parse_error).rstrip(".")
    return f"Invalid JSON payload received. {innermost}."


def _field_path(parse_error_path: str) -> str:
    # ParseError paths start with the root message type ("CreateCustomJobRequest.customJob");
    # the real API names fields from the request root, in snake_case ("custom_job").
    json_names = parse_error_path.split(".")[1:]
    return ".".join(_CAMEL_HUMP.sub(r"_\1", name).lower() for name in json_names)


def wire_codec(
    message_class: MessageClass,
) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """The (serializer, deserializer) pair gRPC needs for `message_class`."""
    if issubclass(message_class, proto.Message):
        return message_class.serialize, message_class.deserialize
    return message_class.SerializeToString, message_class.FromString
