"""The end-to-end fixture: the same local stack the demo runs (``emulator_stack.local_stack``).

Started once for the folder with the demo's configs and a fast clock, and stopped at the end.
Tests stay apart by their own triggers (dataset directories, message ids), and assert on the
ledger, the alerts topic and the Vertex AI emulator's request log, never on log text.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator_stack import scoped_environ
from emulator_stack.local_stack import LocalStack, StackSettings, start_local_stack
from emulator_stack.observe import TopicReader, VertexAdmin
from shared.adapters.ledger import Ledger, default_ledger
from tooling.demo_story import DISPATCH_CONFIG, EMULATOR_CONFIG

TIME_SCALE = 600.0  # ten simulated minutes per second, as the demo's default


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    settings = StackSettings(DISPATCH_CONFIG, EMULATOR_CONFIG, TIME_SCALE)
    with (
        start_local_stack(settings, tmp_path_factory.mktemp("local-stack")) as stack,
        scoped_environ(stack.env),
    ):
        yield stack


@pytest.fixture(scope="session")
def ledger(local_stack: LocalStack) -> Ledger:
    return default_ledger(local_stack.config.project)


@pytest.fixture(scope="session")
def vertex(local_stack: LocalStack) -> VertexAdmin:
    return VertexAdmin(local_stack.vertex_ai.address)


@pytest.fixture(scope="session")
def alerts(local_stack: LocalStack) -> TopicReader:
    return TopicReader(
        local_stack.pubsub, local_stack.config.project, local_stack.config.alerts_topic
    )


@pytest.fixture(scope="session")
def completions(local_stack: LocalStack) -> TopicReader:
    return TopicReader(
        local_stack.pubsub, local_stack.config.project, local_stack.config.completions_topic or ""
    )
