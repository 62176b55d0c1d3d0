"""Fixtures for the fault tests: the dispatch functions served for real, and killable.

The events, deliveries and Vertex AI admin helpers are the dispatch tests' (their support module is
put on ``sys.path`` here rather than copied). The functions run with the dispatch tests' config;
the servers shared by the folder are never killed: a test that kills one starts its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from faults_test_support import DISPATCH_TESTS, FunctionServer  # isort: skip

sys.path.insert(0, str(DISPATCH_TESTS))

from dispatch_test_support import (
    FunctionUrls,
    VertexAdmin,
    ensure_alerts_topic,
    ensure_datasets_buckets,
)

from emulator_stack import (
    LOCAL_PROJECT,
    FirestoreEmulator,
    PubSubEmulator,
    StorageEmulator,
    VertexAIEmulator,
)
from shared.adapters import clients
from shared.adapters.ledger import Ledger


@pytest.fixture(scope="session")
def alerts_topic(pubsub_emulator: PubSubEmulator) -> str:
    return ensure_alerts_topic()


@pytest.fixture(scope="session")
def datasets_buckets(storage_emulator: StorageEmulator) -> tuple[str, str]:
    return ensure_datasets_buckets()


@pytest.fixture(scope="session")
def dispatch_ready(
    alerts_topic: str,
    datasets_buckets: tuple[str, str],
    firestore_emulator: FirestoreEmulator,
    vertex_ai_emulator: VertexAIEmulator,
) -> None:
    """Everything the functions talk to exists (the emulators' variables are in os.environ)."""


@pytest.fixture(scope="session")
def functions(
    dispatch_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FunctionUrls]:
    """on_object_finalized and on_request, shared by the folder's tests that kill nothing."""
    log_dir = tmp_path_factory.mktemp("faults-functions")
    servers = [FunctionServer(t, log_dir) for t in ("on_object_finalized", "on_request")]
    try:
        for server in servers:
            server.start()
        yield FunctionUrls(object_finalized=servers[0].url, request=servers[1].url)
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def vertex(clean_vertex_ai: VertexAIEmulator) -> VertexAdmin:
    """The Vertex AI emulator, reset: no jobs, faults or logged requests."""
    return VertexAdmin(clean_vertex_ai.address)


@pytest.fixture(scope="session")
def ledger(firestore_emulator: FirestoreEmulator) -> Ledger:
    return Ledger(clients.firestore_client(LOCAL_PROJECT))
