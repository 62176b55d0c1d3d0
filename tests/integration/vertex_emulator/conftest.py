"""One in-process Vertex AI emulator for this folder, reset before each test, and real clients.

The emulator's clock is frozen (`time_scale=0`): simulated time moves only when a test advances it
through the admin API, so no test sleeps. `transport` runs a test once per client transport.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from emulator_test_support import (
    TEST_CONFIG,
    TRANSPORTS,
    AdminApi,
    build_clients,
    build_pipeline_client,
)
from google.cloud import aiplatform_v1

from vertex_ai_emulator.config import EmulatorConfig
from vertex_ai_emulator.server import EmulatorServer


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[EmulatorServer]:
    config = EmulatorConfig.from_dict(TEST_CONFIG)
    with EmulatorServer(config, time_scale=0) as server:
        yield server


@pytest.fixture(scope="session")
def _admin_api(emulator_server: EmulatorServer) -> AdminApi:
    return AdminApi(emulator_server.rest_url)


@pytest.fixture
def admin(_admin_api: AdminApi) -> AdminApi:
    """The admin API of an emulator just reset to `TEST_CONFIG`."""
    _admin_api.call("POST", "reset")
    return _admin_api


@pytest.fixture(scope="session")
def _clients(emulator_server: EmulatorServer) -> dict[str, tuple[Any, Any]]:
    return {
        transport: build_clients(transport, emulator_server.rest_url, emulator_server.grpc_target)
        for transport in TRANSPORTS
    }


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def job_client(
    transport: str, _clients: dict[str, tuple[Any, Any]], admin: AdminApi
) -> aiplatform_v1.JobServiceClient:
    """A real JobServiceClient (REST or gRPC) talking to a freshly reset emulator."""
    return _clients[transport][0]


@pytest.fixture
def resource_client(
    transport: str, _clients: dict[str, tuple[Any, Any]], admin: AdminApi
) -> aiplatform_v1.PersistentResourceServiceClient:
    return _clients[transport][1]


@pytest.fixture(scope="session")
def _pipeline_clients(emulator_server: EmulatorServer) -> dict[str, Any]:
    return {
        transport: build_pipeline_client(
            transport, emulator_server.rest_url, emulator_server.grpc_target
        )
        for transport in TRANSPORTS
    }


@pytest.fixture
def pipeline_client(
    transport: str, _pipeline_clients: dict[str, Any], admin: AdminApi
) -> aiplatform_v1.PipelineServiceClient:
    """A real PipelineServiceClient (REST or gRPC) talking to a freshly reset emulator."""
    return _pipeline_clients[transport]
