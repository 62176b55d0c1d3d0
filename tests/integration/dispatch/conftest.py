"""Fixtures for the end-to-end dispatch tests: both Cloud Functions, served for real.

``functions`` runs ``on_object_finalized`` and ``on_request`` under functions-framework (gunicorn,
threaded, as Cloud Run serves them) as subprocesses pointed at every emulator and at
configs/dispatch.yaml. They are started once for the whole folder: each start costs a second or
two plus the first import of aiplatform_v1, and tests stay apart by their run keys (a dataset
directory, a message ID, an idempotency key, a tick time) instead of by restarts. What each test
shares with the others is reset or made fresh for it: the Vertex AI emulator is reset, and the
alerts are read through a subscription created for the test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from dispatch_test_support import (
    CONFIG,
    AlertsReader,
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
from emulator_stack.launch import start_and_wait
from emulator_stack.ports import LOOPBACK, free_port
from emulator_stack.process import ManagedProcess
from emulator_stack.readiness import tcp_open
from shared.adapters import clients
from shared.adapters.ledger import Ledger

FUNCTIONS_SOURCE = Path(__file__).parents[3] / "functions" / "main.py"
TARGETS = ("on_object_finalized", "on_request")


@pytest.fixture(scope="session")
def alerts_topic(pubsub_emulator: PubSubEmulator) -> str:
    """The config's alerts topic, created on the Pub/Sub emulator."""
    return ensure_alerts_topic()


@pytest.fixture(scope="session")
def datasets_buckets(storage_emulator: StorageEmulator) -> tuple[str, str]:
    """The buckets the storage routes watch, on the Cloud Storage emulator."""
    return ensure_datasets_buckets()


@pytest.fixture(scope="session")
def functions(
    alerts_topic: str,
    datasets_buckets: tuple[str, str],
    firestore_emulator: FirestoreEmulator,
    vertex_ai_emulator: VertexAIEmulator,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[FunctionUrls]:
    """Both functions under functions-framework, with the emulators' environment (os.environ)."""
    log_dir = tmp_path_factory.mktemp("functions-logs")
    with ThreadPoolExecutor(len(TARGETS)) as pool:
        started = list(pool.map(lambda target: _serve(target, log_dir), TARGETS))
    try:
        urls = [f"http://{LOOPBACK}:{port}" for _, port in started]
        yield FunctionUrls(object_finalized=urls[0], request=urls[1])
    finally:
        for process, _ in started:
            process.stop()


def _serve(target: str, log_dir: Path) -> tuple[ManagedProcess, int]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "functions_framework",
        f"--source={FUNCTIONS_SOURCE}",
        f"--target={target}",
        f"--host={LOOPBACK}",
        f"--port={port}",
    ]
    started = start_and_wait(
        target,
        command,
        tcp_open(LOOPBACK, port),
        log_dir,
        extra_env={"VERTEX_DISPATCH_CONFIG": str(CONFIG), "GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT},
    )
    return started.process, port


@pytest.fixture
def vertex(clean_vertex_ai: VertexAIEmulator) -> VertexAdmin:
    """The Vertex AI emulator, reset: no jobs, faults, persistent resources or logged requests."""
    return VertexAdmin(clean_vertex_ai.address)


@pytest.fixture(scope="session")
def ledger(firestore_emulator: FirestoreEmulator) -> Ledger:
    """The runs collection the functions write, read from the test process."""
    return Ledger(clients.firestore_client(LOCAL_PROJECT))


@pytest.fixture
def alerts(alerts_topic: str, fresh_name: Callable[[str], str]) -> Iterator[AlertsReader]:
    """The alerts published during this test, through a subscription made for it."""
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    subscription = f"projects/{LOCAL_PROJECT}/subscriptions/{fresh_name('dispatch-alerts')}"
    subscriber.create_subscription(name=subscription, topic=alerts_topic)
    try:
        yield AlertsReader(subscriber, subscription)
    finally:
        subscriber.delete_subscription(subscription=subscription)
        subscriber.close()
