"""Start several emulators at once and treat them as one: merged environment, one stop.

The emulators are started concurrently (each takes 0.2 to 3 s, mostly JVM and import start-up),
and if any fails to start, the ones that did are stopped before the error is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from emulator_stack.errors import EmulatorStackError
from emulator_stack.firestore import start_firestore_emulator
from emulator_stack.handle import EmulatorHandle
from emulator_stack.pubsub import start_pubsub_emulator
from emulator_stack.storage import start_storage_emulator
from emulator_stack.vertex_ai import start_vertex_ai_emulator

Launcher = Callable[[Path], EmulatorHandle]
Emulator = TypeVar("Emulator", bound=EmulatorHandle)

LAUNCHERS: Mapping[str, Launcher] = {
    "pubsub": start_pubsub_emulator,
    "firestore": start_firestore_emulator,
    "storage": start_storage_emulator,
    "vertex-ai": start_vertex_ai_emulator,
}
"""Every emulator the stack knows, by the name used on the command line and in logs."""


@dataclass(frozen=True)
class EmulatorStack:
    """Running emulators by name. Use it as a context manager, or call ``stop``."""

    emulators: Mapping[str, EmulatorHandle]

    @property
    def env(self) -> dict[str, str]:
        """The environment variables of every emulator in the stack."""
        merged: dict[str, str] = {}
        for emulator in self.emulators.values():
            merged.update(emulator.env)
        return merged

    def get(self, name: str, kind: type[Emulator]) -> Emulator:
        """The emulator called ``name``, checked to be a ``kind``; ``KeyError`` if not started."""
        emulator = self.emulators[name]
        if not isinstance(emulator, kind):
            raise TypeError(f"emulator {name} is a {type(emulator).__name__}, not {kind.__name__}")
        return emulator

    def stop(self) -> None:
        """Stop every emulator, concurrently since each may wait out a grace period (idempotent)."""
        if not self.emulators:
            return
        with ThreadPoolExecutor(len(self.emulators), thread_name_prefix="stop") as pool:
            for stopped in [pool.submit(emulator.stop) for emulator in self.emulators.values()]:
                stopped.result()

    def __enter__(self) -> EmulatorStack:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_emulators(
    names: Iterable[str], log_dir: Path, launchers: Mapping[str, Launcher] | None = None
) -> EmulatorStack:
    """Start the named emulators concurrently; all of them are ready when this returns.

    ``launchers`` replaces some of the default ``LAUNCHERS`` (e.g. a Vertex AI emulator started
    with a config and a time scale: ``functools.partial(start_vertex_ai_emulator, config=...)``).
    If any fails, the others are stopped and its error is raised (one ``EmulatorStackError``
    naming each failure when several fail).
    """
    chosen = {**LAUNCHERS, **(launchers or {})}
    wanted = list(dict.fromkeys(names))
    unknown = [name for name in wanted if name not in chosen]
    if unknown:
        raise ValueError(f"unknown emulators {unknown}; known: {sorted(chosen)}")
    if not wanted:
        return EmulatorStack({})
    with ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="emulator") as pool:
        futures = {name: pool.submit(chosen[name], log_dir) for name in wanted}
    started = {name: f.result() for name, f in futures.items() if f.exception() is None}
    failures = {name: f.exception() for name, f in futures.items() if f.exception() is not None}
    if failures:
        EmulatorStack(started).stop()
        if len(failures) == 1:
            raise next(iter(failures.values()))  # keeps its type, e.g. PrerequisiteMissing
        details = "\n\n".join(f"[{name}] {error}" for name, error in failures.items())
        raise EmulatorStackError(f"{len(failures)} emulator(s) failed to start:\n{details}")
    return EmulatorStack(started)
