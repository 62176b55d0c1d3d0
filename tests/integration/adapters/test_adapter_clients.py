"""shared.adapters.clients: nothing imported up front, endpoints from the environment, one client
per key."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from emulator_stack import LOCAL_PROJECT, StorageEmulator
from shared.adapters import clients

GRPC = clients.VERTEX_GRPC_EMULATOR_VARIABLE
REST = clients.VERTEX_REST_EMULATOR_VARIABLE


def test_importing_clients_imports_no_google_library() -> None:
    # The google and google.cloud namespace packages are preloaded by .pth files: count the rest.
    probe = (
        "import sys; before = set(sys.modules); import shared.adapters.clients;"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith(('google', 'grpc'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, (clients.VertexTransport.GOOGLE, "europe-west4-aiplatform.googleapis.com")),
        ({GRPC: "127.0.0.1:9091"}, (clients.VertexTransport.EMULATOR_GRPC, "127.0.0.1:9091")),
        (
            {REST: "127.0.0.1:9090"},
            (clients.VertexTransport.EMULATOR_REST, "http://127.0.0.1:9090"),
        ),
        (
            {REST: "http://localhost:9090"},
            (clients.VertexTransport.EMULATOR_REST, "http://localhost:9090"),
        ),
        (
            {GRPC: "127.0.0.1:9091", REST: "127.0.0.1:9090"},
            (clients.VertexTransport.EMULATOR_GRPC, "127.0.0.1:9091"),
        ),
    ],
)
def test_the_vertex_endpoint_follows_the_emulator_variables(
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    expected: tuple[clients.VertexTransport, str],
) -> None:
    monkeypatch.delenv(GRPC, raising=False)
    monkeypatch.delenv(REST, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    endpoint = clients.vertex_endpoint("europe-west4")

    assert (endpoint.transport, endpoint.address) == expected


def test_one_client_per_region_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REST, raising=False)
    monkeypatch.setenv(GRPC, "127.0.0.1:9091")
    first = clients.job_service_client("us-central1")

    assert clients.job_service_client("us-central1") is first
    assert clients.job_service_client("us-east4") is not first
    monkeypatch.setenv(GRPC, "127.0.0.1:9092")
    assert clients.job_service_client("us-central1") is not first


def test_the_storage_client_works_against_the_emulator(
    storage_emulator: StorageEmulator, fresh_name: Callable[[str], str]
) -> None:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("datasets"))
    bucket.blob("imagenet/2026-12-01/_SUCCESS").upload_from_string(b"")

    names = [blob.name for blob in bucket.list_blobs(prefix="imagenet/")]

    assert names == ["imagenet/2026-12-01/_SUCCESS"]
