"""``ManagedProcess``: one server command in its own process group, logged, awaited and stopped.

The command starts in a new session, so it and everything it spawns share a process group that
``stop`` ends as a whole: SIGTERM, then SIGKILL after a grace period. Output goes to a log file
whose tail is put into every start error. Every started process is also stopped at interpreter
exit, so a test run that forgets one (or fails half-way) leaves nothing behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from emulator_stack.errors import EmulatorStartError
from emulator_stack.process_group import live_members
from emulator_stack.readiness import ReadinessProbe

DEFAULT_STOP_GRACE_SECONDS = 5.0
_KILL_WAIT_SECONDS = 5.0
_POLL_SECONDS = 0.05
_LOG_TAIL_LINES = 40


class ManagedProcess:
    """A command run in its own process group with its output in ``log_path``."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        log_path: Path,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self._extra_env = dict(extra_env or {})
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The pid of the command, which is also its process group id."""
        return self._started().pid

    @property
    def process_group_id(self) -> int:
        # start_new_session makes the child a session and group leader: its pgid is its pid.
        return self.pid

    def start(self) -> None:
        """Start the command; its stdout and stderr go to ``log_path``."""
        if self._popen is not None:
            raise RuntimeError(f"{self.name} was already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._popen = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self._extra_env},
                start_new_session=True,
            )
        _running.add(self)

    def wait_until_ready(self, probe: ReadinessProbe, timeout_seconds: float) -> None:
        """Return once ``probe`` passes; raise ``EmulatorStartError`` on early exit or timeout.

        The process is stopped before the error is raised, so a failed start leaves nothing.
        """
        popen = self._started()
        deadline = time.monotonic() + timeout_seconds
        while True:
            exit_code = popen.poll()
            if exit_code is not None:
                self.stop()
                raise EmulatorStartError(
                    self._failure(f"exited with code {exit_code} before it was ready")
                )
            if probe():
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise EmulatorStartError(
                    self._failure(f"was not ready after {timeout_seconds:g} s")
                )
            time.sleep(_POLL_SECONDS)

    def stop(self, grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after ``grace_seconds``.

        Idempotent; returns once no process of the group is running.
        """
        if self._popen is None:
            return
        group = self.process_group_id
        try:
            _signal_group(group, signal.SIGTERM)
            if not self._wait_for_group_exit(grace_seconds):
                _signal_group(group, signal.SIGKILL)
                if not self._wait_for_group_exit(_KILL_WAIT_SECONDS):
                    raise RuntimeError(
                        f"{self.name}: processes {live_members(group)} of group {group} "
                        "survived SIGKILL"
                    )
        finally:
            _running.discard(self)

    def kill(self) -> None:
        """SIGKILL the whole process group at once, as a crash: no handler runs; then reap it."""
        if self._popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process_group_id, signal.SIGKILL)
        self.stop(grace_seconds=0.0)  # reaps the group, already dead

    def is_running(self) -> bool:
        """Whether any process of the group is still running."""
        if self._popen is None:
            return False
        self._popen.poll()  # reap the leader so that it does not count as a live zombie
        return bool(live_members(self.process_group_id))

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the log (empty if there is no log yet)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _started(self) -> subprocess.Popen[bytes]:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._popen

    def _wait_for_group_exit(self, timeout_seconds: float) -> bool:
        deadline = time.monotonic() + timeout_seconds
        while self.is_running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)
        return True

    def _failure(self, what_happened: str) -> str:
        return (
            f"{self.name} {what_happened}.\n"
            f"command: {' '.join(self.command)}\n"
            f"log ({self.log_path}), last lines:\n{self.log_tail()}"
        )


def _signal_group(process_group_id: int, signal_number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
        os.killpg(process_group_id, signal_number)


class _RunningProcesses:
    """Processes started and not yet stopped, stopped at interpreter exit."""

    def __init__(self) -> None:
        self._processes: set[ManagedProcess] = set()
        self._lock = threading.Lock()

    def add(self, process: ManagedProcess) -> None:
        with self._lock:
            self._processes.add(process)

    def discard(self, process: ManagedProcess) -> None:
        with self._lock:
            self._processes.discard(process)

    def stop_all(self) -> None:
        with self._lock:
            leftovers = list(self._processes)
        for process in leftovers:
            process.stop(grace_seconds=1.0)


_running = _RunningProcesses()
atexit.register(_running.stop_all)
