"""Fixtures for the job-state scenarios: the config's topics, per-test subscriptions, services.

Dispatch and the job-state function run in this process (``dispatch_event``,
``handle_job_event``) against the emulators; runs are kept apart by idempotency key. The Vertex AI
emulator is reset for each test, and its simulated clock only moves when a test advances it.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jobstate_test_support import Subscription, VertexAdmin

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator, PubSubEmulator, VertexAIEmulator
from shared.adapters import clients
from shared.adapters.config_source import load_config
from shared.config.model import Config
from shared.handlers.services import Services

CONFIG = Path(__file__).parent / "configs" / "jobstate.yaml"


@pytest.fixture(scope="session")
def config() -> Config:
    return load_config(str(CONFIG))


@pytest.fixture(scope="session")
def topics(config: Config, pubsub_emulator: PubSubEmulator) -> Config:
    """The config's alerts, requests and completions topics, created on the Pub/Sub emulator."""
    from google.api_core.exceptions import AlreadyExists

    for topic in (config.alerts_topic, config.requests_topic, config.completions_topic):
        with contextlib.suppress(AlreadyExists):
            clients.publisher_client().create_topic(name=topic)
    return config


@pytest.fixture
def subscribe(
    topics: Config, fresh_name: Callable[[str], str]
) -> Iterator[Callable[[str], Subscription]]:
    """Make a subscription to a topic for this test; deleted afterwards."""
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    made: list[str] = []

    def make(topic: str) -> Subscription:
        name = f"projects/{LOCAL_PROJECT}/subscriptions/{fresh_name('jobstate-it')}"
        subscriber.create_subscription(name=name, topic=topic)
        made.append(name)
        return Subscription(subscriber, name)

    yield make
    for name in made:
        subscriber.delete_subscription(subscription=name)
    subscriber.close()


@pytest.fixture
def services(topics: Config, firestore_emulator: FirestoreEmulator) -> Services:
    return Services(topics)


@pytest.fixture
def vertex(clean_vertex_ai: VertexAIEmulator) -> VertexAdmin:
    return VertexAdmin(clean_vertex_ai.address)


@pytest.fixture
def rng() -> random.Random:
    return random.Random(4)
