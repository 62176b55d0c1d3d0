"""Fixtures for the reconcile tests: an in-process Vertex AI emulator, a fresh ledger, the topics.

The emulator runs in this process with a frozen clock that only ``advance`` moves, and is reset
before each test; each test gets its own ledger collection and its own subscriptions, so tests
share only the session's emulators and topics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from reconcile_test_support import CONFIG, VERTEX_WORLD, Subscription, VertexAdmin, World, topic

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator, PubSubEmulator
from shared.adapters import clients
from shared.adapters.config_source import load_config
from shared.adapters.ledger import Ledger
from shared.handlers.services import Services
from vertex_ai_emulator.config import EmulatorConfig
from vertex_ai_emulator.server import EmulatorServer


@pytest.fixture(scope="session")
def vertex_server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig.from_dict(VERTEX_WORLD), time_scale=0) as server:
        yield server


@pytest.fixture(scope="session")
def topics(pubsub_emulator: PubSubEmulator) -> None:
    from google.api_core.exceptions import AlreadyExists

    for kind in ("alerts", "requests", "hints"):
        with contextlib.suppress(AlreadyExists):
            clients.publisher_client().create_topic(name=topic(kind))


@pytest.fixture
def world(
    vertex_server: EmulatorServer,
    firestore_emulator: FirestoreEmulator,
    topics: None,
    fresh_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[World]:
    from google.cloud import pubsub_v1

    monkeypatch.delenv(clients.VERTEX_REST_EMULATOR_VARIABLE, raising=False)
    monkeypatch.setenv(clients.VERTEX_GRPC_EMULATOR_VARIABLE, vertex_server.grpc_target)
    vertex = VertexAdmin(vertex_server.rest_url)
    vertex.call("POST", "reset")
    ledger = Ledger(clients.firestore_client(LOCAL_PROJECT), fresh_name("runs"), clock=vertex.now)
    subscriber = pubsub_v1.SubscriberClient()
    names = {}
    for kind in ("hints", "requests", "alerts"):
        names[kind] = f"projects/{LOCAL_PROJECT}/subscriptions/{fresh_name(kind)}"
        subscriber.create_subscription(name=names[kind], topic=topic(kind))
    services = Services(load_config(str(CONFIG)), now=vertex.now, _ledger=ledger)
    yield World(
        services=services,
        vertex=vertex,
        hints=Subscription(subscriber, names["hints"]),
        retries=Subscription(subscriber, names["requests"]),
        alerts=Subscription(subscriber, names["alerts"]),
    )
    for name in names.values():
        subscriber.delete_subscription(subscription=name)
    subscriber.close()
