"""Which processes of a process group are still alive (Linux ``/proc``, POSIX fallback).

An emulator's wrapper script may exit while the Java server it started keeps running in the same
group, so "the process we started has exited" is not "the emulator is gone". Zombies do not count
as alive: in a container whose PID 1 never reaps orphans they would otherwise linger forever.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")
_DEAD_STATES = frozenset({"Z", "X", "x"})


def live_members(process_group_id: int) -> list[int]:
    """Pids of the processes in the group that are running (not zombies), sorted."""
    if not _PROC.is_dir():
        return [process_group_id] if _group_signalable(process_group_id) else []
    members = []
    for stat_file in _PROC.glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:  # the process ended between the glob and the read
            continue
        # The command name, in parentheses, may itself hold spaces and parentheses.
        state, _parent, group = stat[stat.rindex(")") + 2 :].split(maxsplit=3)[:3]
        if int(group) == process_group_id and state not in _DEAD_STATES:
            members.append(int(stat_file.parent.name))
    return sorted(members)


def is_alive(pid: int) -> bool:
    """Whether ``pid`` names a running process (a zombie is not running)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return _pid_signalable(pid)
    return stat[stat.rindex(")") + 2] not in _DEAD_STATES


def _group_signalable(process_group_id: int) -> bool:
    try:
        os.killpg(process_group_id, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
