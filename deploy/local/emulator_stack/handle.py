"""``EmulatorHandle``: a running emulator's address, the environment it implies, and its stop.

Each launcher module returns a subclass that adds what is special about its emulator (a reset, a
second port).
"""

from __future__ import annotations

import abc
import urllib.request
from dataclasses import dataclass
from types import TracebackType

from emulator_stack.process import ManagedProcess

_ADMIN_CALL_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class EmulatorHandle(abc.ABC):
    """A started, ready emulator. Use it as a context manager, or call ``stop``."""

    name: str
    host: str
    port: int
    process: ManagedProcess
    startup_seconds: float

    @property
    def address(self) -> str:
        """``host:port``, the form the ``*_EMULATOR_HOST`` variables take."""
        return f"{self.host}:{self.port}"

    @property
    @abc.abstractmethod
    def env(self) -> dict[str, str]:
        """The environment variables that point client libraries at this emulator."""

    def stop(self) -> None:
        """Stop the emulator's whole process group (idempotent)."""
        self.process.stop()

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _admin_call(self, method: str, path: str) -> bytes:
        """Call an emulator-specific admin endpoint on this emulator's port; raise on non-2xx."""
        request = urllib.request.Request(f"http://{self.address}{path}", method=method)
        with urllib.request.urlopen(request, timeout=_ADMIN_CALL_TIMEOUT_SECONDS) as response:
            return response.read()
