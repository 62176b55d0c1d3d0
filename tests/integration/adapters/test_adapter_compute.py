"""shared.adapters.compute through the real google-cloud-compute client, against a real HTTP
server in this process that answers as Compute Engine's REST API does.

The server serves exactly the contract the Vertex AI emulator serves for Compute Engine
(``GET /compute/v1/projects/{p}/zones/{z}/reservations/{r}``: the ``Reservation`` JSON, or
Compute's error JSON), so these tests pin the client side of it: paths, JSON fields, anonymous
credentials through ``COMPUTE_EMULATOR_HOST``, and each answer's translation into the error tree.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shared.adapters import clients, compute
from shared.model.errors import BackendUnavailable, PermanentError, PermissionMissing
from shared.model.reservations import Reservation, ReservedGpu

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
PROJECT = "acme-ml"
ZONE = "us-central1-a"
NAME = f"projects/{PROJECT}/zones/{ZONE}/reservations/a100-block"
PATH = f"/compute/v1/{NAME}"
ZONE_URL = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}"

A100_BLOCK = {
    "kind": "compute#reservation",
    "id": "4470215125931634688",
    "name": "a100-block",
    "zone": ZONE_URL,
    "selfLink": f"{ZONE_URL}/reservations/a100-block",
    "status": "READY",
    "specificReservationRequired": True,
    "specificReservation": {
        "count": "4",  # int64 fields are JSON strings
        "inUseCount": "1",
        "instanceProperties": {
            "machineType": "a2-highgpu-1g",
            "guestAccelerators": [{"acceleratorType": "nvidia-tesla-a100", "acceleratorCount": 1}],
        },
    },
}


def compute_error(code: int, message: str, reason: str) -> dict[str, Any]:
    """Compute Engine's error JSON."""
    return {
        "error": {
            "code": code,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
        }
    }


@dataclass
class FakeCompute:
    """What the server answers per path (a queue of (status, body), the last one repeats) and
    the requests it saw (path, Authorization header)."""

    answers: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        queue = self.answers.get(path)
        if not queue:
            return 404, compute_error(404, f"The resource '{path}' was not found", "notFound")
        return queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ThreadingHTTPServer, FakeCompute]]:
    state = FakeCompute()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append((self.path.split("?")[0], self.headers.get("Authorization")))
            status, body = state.answer(self.path.split("?")[0])
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def fake(
    server: tuple[ThreadingHTTPServer, FakeCompute], monkeypatch: pytest.MonkeyPatch
) -> FakeCompute:
    httpd, state = server
    state.answers.clear()
    state.requests.clear()
    monkeypatch.setenv(clients.COMPUTE_EMULATOR_VARIABLE, f"127.0.0.1:{httpd.server_address[1]}")
    return state


def test_a_reservation_is_read_as_plain_data(fake: FakeCompute) -> None:
    fake.answers[PATH] = [(200, A100_BLOCK)]

    assert compute.get_reservation(NAME) == Reservation(
        name=NAME,
        zone=ZONE,
        status="READY",
        machine_type="a2-highgpu-1g",
        gpus=(ReservedGpu("nvidia-tesla-a100", 1),),
        count=4,
        in_use_count=1,
    )
    assert fake.requests == [(PATH, None)]  # that path, anonymous


def test_numbers_compute_leaves_out_stay_unknown(fake: FakeCompute) -> None:
    specific = {"count": "2", "instanceProperties": {"machineType": "g2-standard-8"}}
    fake.answers[PATH] = [(200, {**A100_BLOCK, "specificReservation": specific})]

    found = compute.get_reservation(NAME)

    assert found is not None
    assert (found.machine_type, found.gpus, found.count, found.in_use_count) == (
        "g2-standard-8",
        (),
        2,
        None,
    )
    assert found.free_vms is None


def test_a_reservation_without_a_specific_shape_reads_empty(fake: FakeCompute) -> None:
    body = {key: value for key, value in A100_BLOCK.items() if key != "specificReservation"}
    fake.answers[PATH] = [(200, {**body, "status": "CREATING"})]

    found = compute.get_reservation(NAME)

    assert found is not None
    assert (found.status, found.machine_type, found.count) == ("CREATING", "", None)


def test_a_missing_reservation_is_none(fake: FakeCompute) -> None:
    assert compute.get_reservation(NAME) is None
    assert fake.requests == [(PATH, None)]


def test_permission_denied_names_the_permission_the_role_and_the_project(
    fake: FakeCompute,
) -> None:
    fake.answers[PATH] = [
        (403, compute_error(403, "Required 'compute.reservations.get' permission", "forbidden"))
    ]

    with pytest.raises(compute.ComputePermissionDenied) as raised:
        compute.get_reservation(NAME)

    message = str(raised.value)
    assert "compute.reservations.get" in message
    assert "roles/compute.viewer" in message
    assert f"project {PROJECT}" in message
    assert isinstance(raised.value, PermissionMissing)  # the run fails and alerts a permission
    assert isinstance(raised.value, PermanentError)


def test_a_transient_answer_is_retried_and_the_read_succeeds(fake: FakeCompute) -> None:
    fake.answers[PATH] = [
        (503, compute_error(503, "Backend unavailable", "backendError")),
        (200, A100_BLOCK),
    ]

    found = compute.get_reservation(NAME)

    assert found is not None and found.count == 4
    assert len(fake.requests) == 2


def test_a_request_quota_is_transient_and_not_retried_here(fake: FakeCompute) -> None:
    fake.answers[PATH] = [(429, compute_error(429, "Rate Limit Exceeded", "rateLimitExceeded"))]

    with pytest.raises(BackendUnavailable, match="request quota"):
        compute.get_reservation(NAME)
    assert len(fake.requests) == 1


def test_a_refused_read_is_permanent(fake: FakeCompute) -> None:
    fake.answers[PATH] = [(400, compute_error(400, "Invalid value for field", "invalid"))]

    with pytest.raises(compute.ReservationUnreadable, match="Invalid value for field"):
        compute.get_reservation(NAME)


@pytest.mark.parametrize(
    "name",
    [
        "a100-block",
        f"projects/{PROJECT}/zones/us-central1/reservations/a100-block",  # a region, not a zone
        f"projects/p/zones/{ZONE}/reservations/a100-block",  # the loader refuses it too
        f"{NAME}/reservationBlocks/b1",
    ],
)
def test_a_malformed_name_is_refused_before_any_request(fake: FakeCompute, name: str) -> None:
    with pytest.raises(compute.ReservationUnreadable, match=r"projects/.*/zones/"):
        compute.get_reservation(name)
    assert fake.requests == []


def test_an_unreachable_service_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    # A port nothing listens on: the connection is refused, retried briefly, then given up.
    monkeypatch.setattr(compute, "_READ_RETRY", compute._READ_RETRY.with_timeout(1.0))
    monkeypatch.setenv(clients.COMPUTE_EMULATOR_VARIABLE, "127.0.0.1:9")

    with pytest.raises(BackendUnavailable):
        compute.get_reservation(NAME)


def test_no_credentials_is_a_permission_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Google's endpoint, and nowhere to find Application Default Credentials: no key file, an
    # empty gcloud config, a metadata server that is not there.
    monkeypatch.delenv(clients.COMPUTE_EMULATOR_VARIABLE, raising=False)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")

    with pytest.raises(compute.ComputePermissionDenied, match="no usable credentials"):
        compute.get_reservation(NAME)


def test_the_client_is_built_once_per_address(fake: FakeCompute) -> None:
    first = clients.reservations_client()
    assert clients.reservations_client() is first


_IMPORTS = """
import json, sys
import shared.adapters.compute, shared.handlers.submission
print(json.dumps("google.cloud.compute_v1" in sys.modules))
"""


def test_importing_the_adapter_loads_no_compute_library() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", _IMPORTS], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert json.loads(loaded) is False
