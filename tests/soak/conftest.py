"""The soak's fixture: a whole local stack (emulators, the four functions, Pub/Sub push with
retries and dead-lettering, the reconcile ticks) with the soak's configs and a fast clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator_stack import scoped_environ
from emulator_stack.local_stack import LocalStack, StackSettings, start_local_stack

CONFIGS = Path(__file__).parent / "configs"
TIME_SCALE = 600.0  # ten simulated minutes per second: a job's whole life takes about a second


@pytest.fixture(scope="session")
def soak_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    settings = StackSettings(
        CONFIGS / "soak-dispatch.yaml",
        CONFIGS / "soak-vertex.yaml",
        TIME_SCALE,
        reconcile_every_seconds=1.0,
    )
    with (
        start_local_stack(settings, tmp_path_factory.mktemp("soak-stack")) as stack,
        scoped_environ(stack.env),
    ):
        yield stack
