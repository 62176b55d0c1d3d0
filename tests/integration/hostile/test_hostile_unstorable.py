"""Input the ledger cannot store, on the real Firestore emulator: recorded, alerted, never a 500.

A job request's body is stored whole with its run. Before, a body nested past Firestore's depth,
an integer beyond int64 or an impossible tick time made dispatch raise (ValueError, protobuf
DecodeError, LedgerRejected from ``_reject_event`` writing the same refused record again): HTTP
500, redelivered for ever, no record, no alert. Now:

- the decoder refuses them as ``MalformedEvent`` (limits in docs/messages.md), so the run is
  REJECTED with the event's envelope and alerted once;
- should a body the decoder lets through still be refused by Firestore (simulated by switching the
  decoder's check off), the ledger's refusal is ``LedgerRejected`` and the rejection is recorded
  with the envelope only (no body), then alerted once;
- the decoder's limits leave room: a body at every limit is stored and read back unchanged.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cloudevents.http import CloudEvent

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.ledger import Ledger, Run, RunStatus
from shared.config.loader import parse_config
from shared.decode import events
from shared.handlers import rejections
from shared.handlers.dispatch import dispatch_event
from shared.handlers.services import Services
from shared.model.alerts import Alert
from shared.policy import records

DISPATCH_CONFIG = Path(__file__).parents[1] / "dispatch" / "configs" / "dispatch.yaml"
REQUEST = {"template": "flex-a100", "params": {"dataset_uri": "gs://dispatch-it-datasets/x/"}}
SOURCE = f"//pubsub.googleapis.com/projects/{LOCAL_PROJECT}/topics/requests"


def nested(levels: int, leaf: object = 1) -> object:
    value = leaf
    for _ in range(levels):
        value = {"n": value}
    return value


def message_event(body: dict[str, Any], attributes: dict[str, str]) -> CloudEvent:
    """A message on the requests topic as Eventarc delivers it, with a new message ID."""
    message_id = str(uuid.uuid4().int % 10**16)
    return CloudEvent(
        {"type": events.PUBSUB_PUBLISHED, "source": SOURCE, "id": message_id},
        {
            "message": {
                "data": base64.b64encode(json.dumps(body).encode()).decode(),
                "attributes": attributes,
                "messageId": message_id,
                "publishTime": "2026-12-02T12:00:00Z",
            },
            "subscription": f"projects/{LOCAL_PROJECT}/subscriptions/dispatch",
        },
    )


def request_event(**extra: object) -> CloudEvent:
    return message_event({**REQUEST, **extra}, {"kind": "train"})


def tick_event(time: str) -> CloudEvent:
    return message_event(
        {"schedule": "nightly-retrain", "time": time}, {"vertex_dispatch_kind": "schedule"}
    )


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Alert]:
    alerts: list[Alert] = []
    monkeypatch.setattr(rejections, "send_alert", lambda alert, *a, **k: alerts.append(alert))
    return alerts


@pytest.fixture
def services(firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]) -> Services:
    config = parse_config(DISPATCH_CONFIG.read_text(), "unstorable.yaml", DISPATCH_CONFIG.parent)
    ledger = Ledger(clients.firestore_client(LOCAL_PROJECT), fresh_name("unstorable-runs"))
    return Services(config, _ledger=ledger)


def dispatched_twice(
    event: CloudEvent, services: Services, sent: list[Alert]
) -> tuple[Run, list[Alert]]:
    """Dispatch ``event`` and its redelivery: both acknowledged as REJECTED, one run, one alert."""
    first = dispatch_event(event, services)
    again = dispatch_event(event, services)
    assert (first.outcome.value, again.outcome.value) == ("rejected", "rejected")
    assert first.run_id == again.run_id and first.run_id is not None
    stored = services.ledger.get_run(first.run_id)
    assert stored is not None
    assert stored.run.status is RunStatus.REJECTED
    assert stored.run.alerts == ("invalid_request",)
    assert [alert.run_id for alert in sent] == [first.run_id]
    return stored.run, sent


DECODER_REFUSES = [
    pytest.param(request_event(extra=nested(events.MAX_JSON_DEPTH)), "levels deep", id="depth-11"),
    pytest.param(request_event(extra=nested(18)), "levels deep", id="depth-19-firestore-refused"),
    pytest.param(request_event(extra=nested(30)), "levels deep", id="depth-31-protobuf-refused"),
    pytest.param(request_event(note=2**64), "outside int64", id="int-above-int64"),
    pytest.param(request_event(note=-(2**63) - 1), "outside int64", id="int-below-int64"),
    pytest.param(request_event(shape=[[1, 2]]), "array directly inside", id="array-in-array"),
    pytest.param(request_event(extra={"": 1}), "empty", id="empty-key"),
    pytest.param(request_event(extra={"__x__": 1}), "reserved", id="reserved-key"),
    pytest.param(tick_event("2026-02-30T00:00:00Z"), "no real moment", id="tick-30-february"),
    pytest.param(tick_event("9999-12-31T23:59:59-01:00"), "no real moment", id="tick-year-10000"),
]


@pytest.mark.parametrize(("event", "rule"), DECODER_REFUSES)
def test_input_the_ledger_cannot_hold_is_rejected_recorded_and_alerted_once(
    event: CloudEvent, rule: str, services: Services, sent: list[Alert]
) -> None:
    run, alerts = dispatched_twice(event, services, sent)
    assert run.trigger == {
        "kind": "UndecodableEvent",
        "type": events.PUBSUB_PUBLISHED,
        "source": SOURCE,
        "id": event["id"],
    }
    assert alerts[0].message.startswith("The event could not be read: ")
    assert rule in alerts[0].message


LEDGER_REFUSES = [
    pytest.param(request_event(extra=nested(20)), "invalid nested entity", id="depth-firestore"),
    pytest.param(request_event(extra=nested(40)), "MaxDepth", id="depth-protobuf-decode"),
    pytest.param(request_event(note=2**64), "Value out of range", id="int-client-encoder"),
    pytest.param(request_event(extra={"": 1}), "is empty", id="empty-key-client"),
    pytest.param(request_event(extra={"__x__": 1}), "reserved", id="reserved-key-firestore"),
    pytest.param(request_event(shape=[[1, 2]]), "array value in an array", id="array-in-array"),
]


@pytest.mark.parametrize(("event", "refusal"), LEDGER_REFUSES)
def test_a_record_the_ledger_refuses_is_rejected_with_the_envelope_only(
    event: CloudEvent,
    refusal: str,
    services: Services,
    sent: list[Alert],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A body the decoder's checks would miss: switch them off, so Firestore sees the body.
    monkeypatch.setattr(events, "_refuse_unstorable", lambda value, where: None)
    run, alerts = dispatched_twice(event, services, sent)
    assert run.trigger == {
        "kind": "UnstorableEvent",
        "type": events.PUBSUB_PUBLISHED,
        "source": SOURCE,
        "id": event["id"],
    }
    assert run.run_key == f"request-message:{event['id']}"  # the request's own run
    assert alerts[0].message.startswith("The run ledger (Firestore) refused the call: ")
    assert refusal in alerts[0].message
    assert alerts[0].trigger == f"job request, message {event['id']}"


def test_a_body_at_every_limit_is_stored_and_read_back_unchanged(services: Services) -> None:
    deepest = nested(events.MAX_JSON_DEPTH - 1)  # the body is level 1
    body = {
        **REQUEST,
        "deep": deepest,
        "objects_in_arrays": [{"a": [{"b": [{"c": [{"d": [1]}]}]}]}],
        "int64": [2**63 - 1, -(2**63)],
        "k" * events.MAX_KEY_PATH_BYTES: "longest key",
        "é" * 300: {"j" * (events.MAX_KEY_PATH_BYTES - 601): "longest key path"},
        "__x": [{"x__": "keys that look reserved but are not"}],
        "floats": [1e308, -0.0],
    }
    trigger = events.decode(request_event(**body))
    record = records.trigger_record(trigger)
    run = Run(
        run_id="r-" + uuid.uuid4().hex[:24],
        run_key="k",
        route="on-request",
        template="flex-a100",
        trigger=record,
    )
    services.ledger.open_run(run)
    stored = services.ledger.get_run(run.run_id)
    assert stored is not None and stored.run.trigger["body"] == body
