"""Free TCP ports on the loopback interface.

The OS picks an unused port (bind to port 0); the port is then closed and handed to an emulator,
so there is a short window in which another program could take it. Ports handed out by this
process are remembered so that emulators started concurrently never get the same one.
"""

from __future__ import annotations

import socket
import threading

LOOPBACK = "127.0.0.1"

_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that nothing listens on and this process has not handed out."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port: int = probe.getsockname()[1]
        with _handed_out_lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port
