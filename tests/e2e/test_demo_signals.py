"""`vertex-dispatch demo` stopped by a signal leaves no emulator or function process behind.

The demo runs as a real process (as `./dev demo` runs it); its emulators and functions run in
process groups of their own, which a signal to the demo never reaches. Each test records those
groups and the ports they serve while the demo runs, sends the signal, and checks that the demo
exited on its own (not killed by the signal's default action), with every group ended and every
port closed. About 45 s for --keep-running (the scenarios play first), 15 s mid-story.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator_stack.process_group import live_members

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
READY_SECONDS = 180.0  # the scenarios take about 70 s on 2 idle cores (chapter 9 waits a quiet
# minute); others may be running
STOP_SECONDS = 45.0  # each group gets SIGTERM, then SIGKILL after 5 s
ADDRESS = re.compile(r"(?:_HOST=|https?://)(127\.0\.0\.1):(\d+)")


def descendant_groups(root: int) -> set[int]:
    """The process groups of every descendant of ``root`` (from /proc), ``root``'s own excluded."""
    parent_of: dict[int, int] = {}
    group_of: dict[int, int] = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:
            continue
        _state, parent, group = stat[stat.rindex(")") + 2 :].split(maxsplit=3)[:3]
        pid = int(stat_file.parent.name)
        parent_of[pid], group_of[pid] = int(parent), int(group)
    found: set[int] = set()
    for pid in parent_of:
        ancestor = parent_of[pid]
        while ancestor > 1 and ancestor != root:
            ancestor = parent_of.get(ancestor, 0)
        if ancestor == root:
            found.add(group_of[pid])
    return found - {group_of.get(root, root)}


def wait_for_line(output: Path, text: str, demo: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        printed = output.read_text(errors="replace")
        if text in printed:
            return printed
        if demo.poll() is not None:
            pytest.fail(f"the demo exited ({demo.returncode}) before {text!r}:\n{printed}")
        time.sleep(0.2)
    pytest.fail(f"no {text!r} within {READY_SECONDS:g} s:\n{output.read_text(errors='replace')}")


def is_listening(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


@pytest.fixture
def groups_left() -> Iterator[set[int]]:
    """Groups a test saw; whatever of them outlives the test is killed, so none leaks on failure."""
    groups: set[int] = set()
    yield groups
    for group in groups:
        if live_members(group):
            os.killpg(group, signal.SIGKILL)


@pytest.mark.parametrize(
    ("arguments", "signalled_after", "stop_signal", "exit_codes"),
    [
        pytest.param(
            ["--keep-running"], "press Ctrl-C", signal.SIGTERM, {0, 1}, id="keep-running-sigterm"
        ),
        pytest.param(
            [], "== 1. a dataset lands", signal.SIGHUP, {128 + signal.SIGHUP}, id="mid-story-sighup"
        ),
    ],
)
def test_a_signal_stops_the_demo_and_every_process_it_started(
    tmp_path: Path,
    groups_left: set[int],
    arguments: list[str],
    signalled_after: str,
    stop_signal: signal.Signals,
    exit_codes: set[int],
) -> None:
    output = tmp_path / "demo.out"
    with output.open("wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "tooling", "demo", *arguments],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        printed = wait_for_line(output, signalled_after, demo)
        groups_left.update(descendant_groups(demo.pid))
        addresses = {(host, int(port)) for host, port in ADDRESS.findall(printed)}
        if "--keep-running" in arguments:  # it printed every emulator's and function's address
            assert len(addresses) >= 8, printed
        assert len(groups_left) >= 8, f"emulators and functions: {groups_left}"

        started = time.monotonic()
        demo.send_signal(stop_signal)
        exit_code = demo.wait(timeout=STOP_SECONDS)
        stop_seconds = time.monotonic() - started
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()

    printed = output.read_text(errors="replace")
    left = {group: live_members(group) for group in groups_left if live_members(group)}
    listening = sorted(address for address in addresses if is_listening(*address))
    print(
        f"FIGURES demo {stop_signal.name} after {signalled_after!r}: exit {exit_code}, "
        f"{len(groups_left)} groups, left {len(left)}, ports still open {len(listening)}, "
        f"stopped in {stop_seconds:.1f} s"
    )
    assert exit_code in exit_codes, printed  # -15 or -1: killed by the signal, nothing stopped
    assert "stack stopped, no process left" in printed
    assert "Traceback" not in printed
    assert left == {}
    assert listening == []
