"""Shared fixtures: real emulators, started on first use and stopped at the end of the session.

The emulator fixtures are session-scoped and lazy: when the first test that uses one runs, every
emulator that the selected tests use is started, concurrently; so ``pytest tests/unit`` starts
nothing and ``-k pubsub`` starts only Pub/Sub. While they run, their ``*_EMULATOR_HOST`` variables
and ``GOOGLE_CLOUD_PROJECT=local-project`` are set in ``os.environ`` (restored afterwards), so
client libraries built in a test find them. Tests that use an emulator are marked ``integration``
automatically. The logic lives in ``emulator_stack``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from emulator_stack import (
    LOCAL_PROJECT,
    EmulatorHandle,
    EmulatorStack,
    FirestoreEmulator,
    PubSubEmulator,
    StorageEmulator,
    VertexAIEmulator,
    scoped_environ,
    start_emulators,
)

EMULATOR_OF_FIXTURE = {
    "pubsub_emulator": "pubsub",
    "firestore_emulator": "firestore",
    "storage_emulator": "storage",
    "vertex_ai_emulator": "vertex-ai",
}
_EMULATORS_IN_USE = pytest.StashKey[frozenset[str]]()
Emulator = TypeVar("Emulator", bound=EmulatorHandle)


def _emulator_fixtures_of(item: pytest.Item) -> set[str]:
    # fixturenames is the whole closure, so fixtures built on an emulator count too.
    return EMULATOR_OF_FIXTURE.keys() & set(getattr(item, "fixturenames", ()))


# tryfirst: the marker must be there before `-m` deselects by it.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _emulator_fixtures_of(item):
            item.add_marker(pytest.mark.integration)
    # Tests marked slow (minutes: the 2,000-trigger soak, a fresh-venv install) run only when
    # asked for with `-m slow` (or any -m expression naming it), never in the default run.
    if "slow" not in config.getoption("markexpr"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_collection_finish(session: pytest.Session) -> None:
    # After `-k` and `-m` deselection: only the emulators of the tests that will run start.
    session.config.stash[_EMULATORS_IN_USE] = frozenset(
        EMULATOR_OF_FIXTURE[fixture]
        for item in session.items
        for fixture in _emulator_fixtures_of(item)
    )


@pytest.fixture(scope="session")
def local_project() -> Iterator[str]:
    """The project id of every emulator, exported as GOOGLE_CLOUD_PROJECT."""
    with scoped_environ({"GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT}):
        yield LOCAL_PROJECT


@pytest.fixture(scope="session")
def emulator_stack(
    request: pytest.FixtureRequest, local_project: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmulatorStack]:
    """Every emulator the selected tests use, started together when the first one is needed.

    Starting them concurrently takes about as long as the slowest (3 to 4 s) instead of the sum.
    """
    in_use = request.config.stash.get(_EMULATORS_IN_USE, frozenset())
    log_dir = tmp_path_factory.mktemp("emulator-logs")
    with start_emulators(sorted(in_use), log_dir) as stack, scoped_environ(stack.env):
        yield stack


def _started(stack: EmulatorStack, fixture_name: str, kind: type[Emulator]) -> Emulator:
    try:
        return stack.get(EMULATOR_OF_FIXTURE[fixture_name], kind)
    except KeyError:
        raise pytest.UsageError(
            f"{fixture_name} was not started: request it as a test argument (or through a "
            "fixture), not with request.getfixturevalue, so that collection sees it"
        ) from None


@pytest.fixture(scope="session")
def pubsub_emulator(emulator_stack: EmulatorStack) -> PubSubEmulator:
    return _started(emulator_stack, "pubsub_emulator", PubSubEmulator)


@pytest.fixture(scope="session")
def firestore_emulator(emulator_stack: EmulatorStack) -> FirestoreEmulator:
    return _started(emulator_stack, "firestore_emulator", FirestoreEmulator)


@pytest.fixture(scope="session")
def storage_emulator(emulator_stack: EmulatorStack) -> StorageEmulator:
    return _started(emulator_stack, "storage_emulator", StorageEmulator)


@pytest.fixture(scope="session")
def vertex_ai_emulator(emulator_stack: EmulatorStack) -> VertexAIEmulator:
    return _started(emulator_stack, "vertex_ai_emulator", VertexAIEmulator)


@pytest.fixture
def clean_firestore(firestore_emulator: FirestoreEmulator, local_project: str) -> FirestoreEmulator:
    """The Firestore emulator with no documents in the local project."""
    firestore_emulator.reset(local_project)
    return firestore_emulator


@pytest.fixture
def clean_storage(storage_emulator: StorageEmulator) -> StorageEmulator:
    """The Cloud Storage emulator with no buckets."""
    storage_emulator.wipe()
    return storage_emulator


@pytest.fixture
def clean_vertex_ai(vertex_ai_emulator: VertexAIEmulator) -> VertexAIEmulator:
    """The Vertex AI emulator as its config describes it: no jobs, no faults, empty request log."""
    vertex_ai_emulator.reset()
    return vertex_ai_emulator


@pytest.fixture
def fresh_name() -> Callable[[str], str]:
    """Make names no other test uses, valid as topic, subscription, bucket or document ids."""

    def make(prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    return make
