"""Valid first, then one field broken: the positive path and every refusal from one generator.

Random events rarely match a route, so tests/property/test_property_events.py mostly proves the
refusal path. Here hypothesis first builds events that examples/config.yaml accepts (an Eventarc
object.finalized on each Cloud Storage route, a job request naming a real template with all its
params, a Cloud Scheduler tick, a retry message for a run the ledger holds) and checks that they
decode, route and render to a CustomJob that passes every offline rule and is exactly the
template's. Then it breaks exactly one field of such an event (``property_test_support.
mutations``) and checks that dispatch either refuses it with a specific ``PermanentError``
subclass, or ignores it because a field that routes match on changed, or still renders the
template's job, image, service account, project, region, GPUs, command and env untouched, each
parameter value inside its one argument. No other exception may escape: it would be a 500 and a
redelivery storm.

No emulator: the ledger of a retry is a dict, and the checks are the offline ones (``plan``'s).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from cloudevents.http import CloudEvent
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from property_test_support import (
    CONTROL,
    DOT_DOT,
    FLAG_LIKE,
    KINDS,
    LABEL_BREAKERS,
    MUTATION_KINDS,
    NEWLINES,
    NON_UTF8,
    ODD_UNICODE,
    REQUESTS_SOURCE,
    SHELL,
    SMUGGLED_BODY_FIELDS,
    SMUGGLED_PARAMS,
    VALID_SHAPES,
    Mutation,
    Outcome,
    Shape,
    Target,
    applicable,
    apply,
    check_job_is_the_templates,
    check_values_are_single_arguments,
    cloud_event,
    every_target,
    example_config,
    may_drop_the_route,
    mutations,
    run_pipeline,
    shape_run_snapshot,
    valid_shapes,
)

from shared.decode.events import (
    IDEMPOTENCY_KEY_ATTRIBUTE,
    KIND_ATTRIBUTE,
    PUBSUB_PUBLISHED,
    STORAGE_FINALIZED,
)
from shared.decode.routing import RequestRejected
from shared.model.errors import InvalidJobSpec, MalformedEvent, PermanentError, RetryRejected
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick

PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TRIGGER_TYPES = {
    "object": ObjectFinalized,
    "request": JobRequest,
    "tick": ScheduleTick,
    "retry": RetryRequest,
}
# The refusals a broken event may get, by stage.
REFUSALS = {
    "decode": (MalformedEvent,),
    "route": (RequestRejected,),
    "render": (InvalidJobSpec,),
    "retry": (RetryRejected,),
}


def requested_params(shape: Shape) -> Mapping[str, Any]:
    """The params a request's body fills (what must land verbatim), {} for other kinds."""
    body = shape.doc.get("body")
    if shape.kind != "request" or not isinstance(body, Mapping):
        return {}
    params = body.get("params")
    return params if isinstance(params, Mapping) else {}


def check_accepted(shape: Shape, outcome: Outcome) -> None:
    """An accepted event renders the template's job, and a request's params land verbatim."""
    config = example_config()
    check_job_is_the_templates(outcome, config)
    requested = requested_params(shape)
    for name, value in requested.items():
        assert outcome.params[name] == value, name
    check_values_are_single_arguments(outcome, requested)
    if shape.kind == "retry":
        assert shape.run is not None
        assert outcome.params == shape.run.params


# --- the positive path ------------------------------------------------------------------------


def check_valid(shape: Shape, outcome: Outcome) -> None:
    """What a valid shape of each kind must become, beyond the template's job."""
    assert outcome.status == "accepted", (outcome.stage, outcome.error)
    assert isinstance(outcome.trigger, TRIGGER_TYPES[shape.kind])
    assert outcome.route == shape.route
    check_accepted(shape, outcome)
    trigger = outcome.trigger
    if isinstance(trigger, ObjectFinalized):
        directory, _, _ = trigger.name.rpartition("/")
        every_object = shape.route == "eval-shards"
        expected_uri = (
            f"gs://{trigger.bucket}/{trigger.name}"
            if every_object
            else f"gs://{trigger.bucket}/{directory}/"
        )
        assert outcome.params["dataset_uri"] == expected_uri
        if shape.route != "nightly-export":  # a quiet route's run is its dataset's, no object's
            assert outcome.params["object"] == trigger.name
    if isinstance(trigger, ScheduleTick):
        assert outcome.params["schedule"] == shape.doc["body"]["schedule"]
    if isinstance(trigger, RetryRequest):
        body = shape.doc["body"]
        assert (outcome.attempt, outcome.run_id) == (body["attempt"], body["run_id"])
        assert [rendered.index for rendered in outcome.placements] == [body["placement_index"]]


@pytest.mark.parametrize("target", every_target(), ids="/".join)
@settings(PROPERTY_SETTINGS, max_examples=25)
@given(data=st.data())
def test_a_valid_event_decodes_routes_and_renders_the_templates_job(
    target: Target, data: st.DataObject
) -> None:
    """Every route of the example config, with every template it can start, and a retry of
    every template: valid shapes of each are accepted and render exactly the template's job."""
    shape = data.draw(valid_shapes(target), label="valid shape")
    outcome = run_pipeline(cloud_event(shape), example_config(), shape_run_snapshot(shape))
    check_valid(shape, outcome)
    assert outcome.template is not None
    assert (outcome.route or "retry", outcome.template.name) == target[1:]


# --- one field broken -------------------------------------------------------------------------


def check_mutated(shape: Shape, mutation: Mutation, outcome: Outcome) -> None:
    if outcome.status == "refused":
        assert isinstance(outcome.error, REFUSALS[outcome.stage]), outcome.error
        assert str(outcome.error), "a refusal must say what is wrong"
        assert type(outcome.error) is not PermanentError
    elif outcome.status == "ignored":
        assert may_drop_the_route(shape, mutation.path), (
            f"{mutation.describe()} made the event match no route, but that field is not one "
            "routes match on: it should have been refused"
        )
    else:
        check_accepted(shape, outcome)


@pytest.mark.parametrize(
    ("kind", "how"),
    [(kind, how) for kind in KINDS for how in MUTATION_KINDS if applicable(kind, how)],
)
@settings(PROPERTY_SETTINGS, max_examples=20)
@given(data=st.data())
def test_one_broken_field_is_refused_ignored_or_changes_nothing(
    kind: str, how: str, data: st.DataObject
) -> None:
    shape = data.draw(VALID_SHAPES[kind], label="valid shape")
    mutation = data.draw(mutations(shape, how), label="mutation")
    placement = data.draw(st.integers(min_value=0, max_value=3), label="placement")
    broken = apply(shape, mutation)
    ledger = shape_run_snapshot(broken)
    outcome = run_pipeline(cloud_event(broken), example_config(), ledger, placement=placement)
    check_mutated(broken, mutation, outcome)
    error = type(outcome.error).__name__ if outcome.error else ""
    event(f"{outcome.status} {error}".rstrip())


# --- tables: the smuggling attempts and hostile fragments, each on a valid event ----------------

FLEX_START = 1  # resnet-a100's FLEX_START placement in the config's region: tables render it only

VALID_OBJECT = Shape(
    "object",
    {
        "ce": {
            "type": STORAGE_FINALIZED,
            "source": "//storage.googleapis.com/projects/_/buckets/acme-datasets",
            "id": "1733100000000001",
            "subject": "objects/imagenet/2026-12-01/_SUCCESS",
        },
        "data": {
            "bucket": "acme-datasets",
            "name": "imagenet/2026-12-01/_SUCCESS",
            "generation": "1733100000000000",
            "metageneration": "1",
            "size": "0",
        },
    },
    "imagenet-daily",
)
# Non-UTF-8 bytes as Python sees them once decoded with errors="replace": U+FFFD.
NON_UTF8_TEXT = tuple(raw.decode("utf-8", "replace") for raw in NON_UTF8)


def resnet_request(body_extra: Mapping[str, Any], params_extra: Mapping[str, Any]) -> Shape:
    body = {
        "template": "resnet-a100",
        "params": {"dataset_uri": "gs://acme-datasets/imagenet/2026-12-01/", **params_extra},
        **body_extra,
    }
    doc = {
        "ce": {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": "9182736450"},
        "message": {
            "attributes": {"kind": "train"},
            "messageId": "9182736450",
            "publishTime": "2026-12-01T02:00:03.412Z",
        },
        "body": body,
    }
    return Shape("request", doc, "on-request")


@pytest.mark.parametrize(
    ("body_extra", "params_extra", "refused_by"),
    [
        pytest.param({"image": "docker.io/evil/miner"}, {}, None, id="body image"),
        pytest.param({"serviceAccount": "owner@acme-ml.iam"}, {}, None, id="body service account"),
        pytest.param({"region": "asia-east1"}, {}, None, id="body region"),
        pytest.param({"accelerator": {"count": 64}}, {}, None, id="body accelerator"),
        pytest.param({"command": ["sh"]}, {}, None, id="body command"),
        pytest.param({}, {"dataset_uri": "--foo"}, None, id="param that looks like a flag"),
        pytest.param({}, {"dataset_uri": "; rm -rf /"}, None, id="param with a shell command"),
        pytest.param({}, {"dataset_uri": "a b\tc"}, RequestRejected, id="param with a tab"),
        pytest.param({}, {"epochs": "9000"}, RequestRejected, id="undeclared param"),
        pytest.param({}, {"region": "asia-east1"}, RequestRejected, id="param region"),
        pytest.param({}, {"image": "evil"}, RequestRejected, id="param image"),
        pytest.param({}, {"dataset_uri": 7}, RequestRejected, id="param not a string"),
        pytest.param({"params": "x"}, {}, MalformedEvent, id="params not an object"),
    ],
)
def test_a_smuggled_field_is_refused_or_has_no_effect(
    body_extra: Mapping[str, Any], params_extra: Mapping[str, Any], refused_by: type | None
) -> None:
    shape = resnet_request(body_extra, params_extra)
    outcome = run_pipeline(cloud_event(shape), example_config(), {}, placement=FLEX_START)
    if refused_by is None:
        assert outcome.status == "accepted"
        check_accepted(shape, outcome)
    else:
        assert outcome.status == "refused"
        assert type(outcome.error) is refused_by


@settings(PROPERTY_SETTINGS, max_examples=100)
@given(
    body_extra=st.dictionaries(
        st.sampled_from(sorted(SMUGGLED_BODY_FIELDS)),
        st.sampled_from(list(SMUGGLED_BODY_FIELDS.values())),
        max_size=4,
    ),
    params_extra=st.dictionaries(
        st.sampled_from(sorted(SMUGGLED_PARAMS)), st.sampled_from(FLAG_LIKE), max_size=2
    ),
)
def test_any_mix_of_smuggled_fields_is_refused_or_has_no_effect(
    body_extra: dict[str, Any], params_extra: dict[str, str]
) -> None:
    """Several smuggling attempts at once: an undeclared param is refused, the rest ignored."""
    shape = resnet_request(body_extra, params_extra)
    outcome = run_pipeline(cloud_event(shape), example_config(), {}, placement=FLEX_START)
    undeclared = params_extra.keys() - {"dataset_uri"}
    if undeclared:
        assert outcome.status == "refused"
        assert type(outcome.error) is RequestRejected
        assert any(f"body.params.{name}" in str(outcome.error) for name in undeclared)
    else:
        assert outcome.status == "accepted"
        check_accepted(shape, outcome)
    event(f"smuggled mix: {outcome.status}")


EVERY_FRAGMENT = sorted(
    {*ODD_UNICODE, *DOT_DOT, *NEWLINES, *SHELL, *LABEL_BREAKERS, *FLAG_LIKE, *NON_UTF8_TEXT}
)


@pytest.mark.parametrize("fragment", EVERY_FRAGMENT, ids=ascii)
@pytest.mark.parametrize("prefix", ["", "gs://acme-datasets/x/"], ids=["alone", "after a URI"])
def test_every_hostile_fragment_in_a_param_is_one_argument_or_refused(
    fragment: str, prefix: str
) -> None:
    shape = resnet_request({}, {"dataset_uri": prefix + fragment})
    outcome = run_pipeline(cloud_event(shape), example_config(), {}, placement=FLEX_START)
    if CONTROL.search(fragment):
        assert outcome.status == "refused"
        assert type(outcome.error) is RequestRejected
    else:
        assert outcome.status == "accepted"
        check_accepted(shape, outcome)


@pytest.mark.parametrize("fragment", EVERY_FRAGMENT, ids=ascii)
def test_every_hostile_fragment_in_an_object_name_is_matched_verbatim_or_refused(
    fragment: str,
) -> None:
    """In ``imagenet/*/_SUCCESS`` the ``*`` takes any fragment without ``/``, verbatim."""
    shape = VALID_OBJECT
    name = f"imagenet/{fragment}/_SUCCESS"
    broken = apply(shape, Mutation(("data", "name"), "table", name))
    broken = apply(broken, Mutation(("ce", "subject"), "table", f"objects/{name}"))
    outcome = run_pipeline(cloud_event(broken), example_config(), {}, placement=FLEX_START)
    dot_segment = bool({".", ".."} & set(name.split("/")))
    if CONTROL.search(fragment) or len(name.encode()) > 1024 or dot_segment:
        assert outcome.status == "refused"
        assert type(outcome.error) is MalformedEvent
    elif "/" in fragment:
        assert outcome.status == "ignored"
    else:
        assert outcome.status == "accepted"
        assert outcome.params["dataset_uri"] == f"gs://acme-datasets/imagenet/{fragment}/"
        check_accepted(broken, outcome)


# --- lone surrogates: valid JSON, not encodable as UTF-8 ----------------------------------------

LONE_SURROGATE = "\ud800"


def request_with(
    *,
    attributes: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    message_id: str = "9182736450",
) -> CloudEvent:
    """A valid resnet-a100 request with one field changed; the body escapes non-ASCII."""
    body = {
        "template": "resnet-a100",
        "params": params or {"dataset_uri": "gs://acme-datasets/imagenet/2026-12-01/"},
    }
    message = {
        "data": base64.b64encode(json.dumps(body, ensure_ascii=True).encode()).decode(),
        "attributes": {"kind": "train", **(attributes or {})},
        "messageId": message_id,
        "publishTime": "2026-12-01T02:00:03.412Z",
    }
    return CloudEvent(
        {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": "9182736450"},
        {"message": message},
    )


def retry_with_reason(reason: str) -> CloudEvent:
    body = {"run_id": "r-3f2a9c0d1e4b5a6978877665", "attempt": 2, "placement_index": 0}
    message = {
        "data": base64.b64encode(json.dumps({**body, "reason": reason}).encode()).decode(),
        "attributes": {KIND_ATTRIBUTE: "retry"},
        "messageId": "9182736451",
    }
    return CloudEvent(
        {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": "9182736451"},
        {"message": message},
    )


def object_named(name: str) -> CloudEvent:
    return CloudEvent(
        {
            "type": STORAGE_FINALIZED,
            "source": "//storage.googleapis.com/projects/_/buckets/acme-datasets",
            "id": "1",
        },
        {"bucket": "acme-datasets", "name": name, "generation": "1", "metageneration": "1"},
    )


@pytest.mark.parametrize(
    "cloud_event_",
    [
        pytest.param(
            request_with(params={"dataset_uri": "gs://b/" + LONE_SURROGATE}),
            id="request param value",
        ),
        pytest.param(
            request_with(attributes={IDEMPOTENCY_KEY_ATTRIBUTE: "k" + LONE_SURROGATE}),
            id="idempotency_key attribute",
        ),
        pytest.param(
            request_with(attributes={"x" + LONE_SURROGATE: "v"}),
            id="attribute key",
        ),
        pytest.param(
            request_with(attributes={"note": LONE_SURROGATE}),
            id="attribute value",
        ),
        pytest.param(
            request_with(message_id="m" + LONE_SURROGATE),
            id="message id",
        ),
        pytest.param(
            object_named("imagenet/" + LONE_SURROGATE + "/_SUCCESS"),
            id="object name",
        ),
        pytest.param(
            retry_with_reason("capacity" + LONE_SURROGATE),
            id="retry reason",
        ),
        pytest.param(
            CloudEvent(
                {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": "e" + LONE_SURROGATE},
                {"message": {"data": "", "messageId": "1"}},
            ),
            id="CloudEvent id",
        ),
    ],
)
def test_a_lone_surrogate_is_refused_when_decoded(cloud_event_: CloudEvent) -> None:
    outcome = run_pipeline(cloud_event_, example_config(), {})
    assert outcome.status == "refused"
    assert outcome.stage == "decode"
    assert isinstance(outcome.error, MalformedEvent)
    assert "lone UTF-16 surrogate" in str(outcome.error)
    str(outcome.error).encode("utf-8")  # the message itself can be logged, stored and alerted
