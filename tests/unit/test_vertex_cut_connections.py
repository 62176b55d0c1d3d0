"""A create whose connection broke: unknown outcome if the request may have been read.

Real sockets on loopback: one server reads the request and closes without answering (the
request may have been acted on), and a port where nothing listens (it was never sent).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import requests

from shared.adapters import vertex
from shared.model.errors import BackendUnavailable

PARENT = "projects/p/locations/us-central1"


@pytest.fixture
def hangs_up_after_reading() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)  # the whole request, then no answer at all

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1/projects/p/locations/us-central1/customJobs"
    thread.join(timeout=5)
    server.close()


def _closed_port() -> str:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/projects/p/locations/us-central1/customJobs"


def test_a_connection_cut_after_the_request_was_sent_is_an_unknown_outcome(
    hangs_up_after_reading: str,
) -> None:
    with (
        pytest.raises(vertex.OutcomeUnknown, match="cut before the answer"),
        vertex._translated_errors("CreateCustomJob", PARENT),
    ):
        requests.post(hangs_up_after_reading, json={"displayName": "x"}, timeout=5)


def test_a_connection_that_never_opened_is_plainly_unavailable() -> None:
    with (
        pytest.raises(BackendUnavailable) as raised,
        vertex._translated_errors("CreateCustomJob", PARENT),
    ):
        requests.post(_closed_port(), json={"displayName": "x"}, timeout=5)
    assert not isinstance(raised.value, vertex.OutcomeUnknown)
