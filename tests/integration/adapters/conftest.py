"""Fixtures for the adapter tests: an in-process Vertex AI emulator, a ledger, an alerts topic.

The Vertex AI emulator runs in this process with a frozen clock (``time_scale=0``) and its own
small world (one persistent resource, A100 capacity), reset before each test. ``vertex_transport``
points ``shared.adapters.clients`` at it over gRPC or REST by the environment, as production would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from adapter_test_support import VERTEX_WORLD, VertexAdmin

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator, PubSubEmulator
from shared.adapters import clients
from shared.adapters.ledger import Ledger
from vertex_ai_emulator.config import EmulatorConfig
from vertex_ai_emulator.server import EmulatorServer


@pytest.fixture(scope="session")
def vertex_server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig.from_dict(VERTEX_WORLD), time_scale=0) as server:
        yield server


@pytest.fixture
def vertex_admin(vertex_server: EmulatorServer) -> VertexAdmin:
    """The admin API of the emulator, just reset (no jobs, faults or logged requests)."""
    admin = VertexAdmin(vertex_server.rest_url)
    admin.call("POST", "reset")
    return admin


@pytest.fixture(params=["grpc", "rest"])
def vertex_transport(
    request: pytest.FixtureRequest,
    vertex_server: EmulatorServer,
    vertex_admin: VertexAdmin,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """Point ``shared.adapters.clients`` at the in-process emulator over one transport."""
    monkeypatch.delenv(clients.VERTEX_GRPC_EMULATOR_VARIABLE, raising=False)
    monkeypatch.delenv(clients.VERTEX_REST_EMULATOR_VARIABLE, raising=False)
    if request.param == "grpc":
        monkeypatch.setenv(clients.VERTEX_GRPC_EMULATOR_VARIABLE, vertex_server.grpc_target)
    else:
        monkeypatch.setenv(clients.VERTEX_REST_EMULATOR_VARIABLE, vertex_server.rest_host)
    return request.param


@pytest.fixture
def ledger(firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]) -> Ledger:
    """A ledger on the Firestore emulator, in a collection no other test uses."""
    return Ledger(clients.firestore_client(LOCAL_PROJECT), collection=fresh_name("runs"))


@pytest.fixture
def alerts_subscription(
    pubsub_emulator: PubSubEmulator, fresh_name: Callable[[str], str]
) -> Iterator[tuple[str, str]]:
    """A new (topic, subscription) pair on the Pub/Sub emulator, deleted afterwards."""
    from google.cloud import pubsub_v1

    topic = f"projects/{LOCAL_PROJECT}/topics/{fresh_name('alerts')}"
    subscription = f"projects/{LOCAL_PROJECT}/subscriptions/{fresh_name('alerts-sub')}"
    publisher = clients.publisher_client()
    subscriber = pubsub_v1.SubscriberClient()
    publisher.create_topic(name=topic)
    subscriber.create_subscription(name=subscription, topic=topic)
    yield topic, subscription
    subscriber.delete_subscription(subscription=subscription)
    publisher.delete_topic(topic=topic)
    subscriber.close()
