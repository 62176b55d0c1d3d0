"""Readiness probes: cheap checks that say whether a server answers yet.

A probe is a callable returning ``True`` once the server is ready; it must never raise for
"not yet" (connection refused, timeout, early HTTP error).
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Callable

ReadinessProbe = Callable[[], bool]

_PROBE_TIMEOUT_SECONDS = 1.0


def http_ok(url: str) -> ReadinessProbe:
    """Ready when ``GET url`` answers with a 2xx status."""

    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT_SECONDS) as response:
                return 200 <= response.status < 300
        except (OSError, urllib.error.URLError):
            return False

    return probe


def tcp_open(host: str, port: int) -> ReadinessProbe:
    """Ready when a TCP connection to ``host:port`` succeeds."""

    def probe() -> bool:
        try:
            with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_SECONDS):
                return True
        except OSError:
            return False

    return probe


def all_of(*probes: ReadinessProbe) -> ReadinessProbe:
    """Ready when every probe is ready (checked in order, stopping at the first that is not)."""

    def probe() -> bool:
        return all(each() for each in probes)

    return probe
