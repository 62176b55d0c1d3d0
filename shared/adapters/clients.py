"""The Google Cloud clients, built lazily and once per process (one Cloud Functions instance).

Nothing here imports a client library at module import time: the libraries cost 0.7 to 2.4 s each
(docs/architecture.md, "Costs") and an event that matches no route must not pay for them. Each
getter imports its library on first call and caches the client under the settings that shaped it
(project, region, emulator address), so a test that points the process at another emulator gets a
new client while production builds each client exactly once.

Emulators:

- Firestore, Pub/Sub and Cloud Storage honour ``FIRESTORE_EMULATOR_HOST``, ``PUBSUB_EMULATOR_HOST``
  and ``STORAGE_EMULATOR_HOST`` by themselves, with anonymous credentials; Firestore takes its
  project from ``GOOGLE_CLOUD_PROJECT`` when none is given.
- Vertex AI has no official emulator variable; ours are ``VERTEX_AI_EMULATOR_GRPC_HOST``
  (``host:port``, gRPC on an insecure channel) and ``VERTEX_AI_EMULATOR_HOST`` (``host:port``,
  REST at ``http://host:port`` with anonymous credentials). When both are set gRPC wins: it is
  the transport the clients use in production, so the emulator then exercises the same path.
- Otherwise Vertex AI clients talk to the regional endpoint ``{region}-aiplatform.googleapis.com``
  with Application Default Credentials.
- Compute Engine (read only: a named reservation) has no official emulator variable either; ours
  is ``COMPUTE_EMULATOR_HOST`` (``host:port``, REST at ``http://host:port`` with anonymous
  credentials), which the local stack sets to the Vertex AI emulator's REST address (it serves
  ``GET /compute/v1/projects/{p}/zones/{z}/reservations/{r}``). ``compute_v1`` is the heaviest
  library here (about 2 s on the project's machines: one 5.7 MB module of types), so it is loaded
  through ``shared.aiplatform.lazy_package`` (the other ~100 Compute services stay unloaded), and
  only when a named reservation is first read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1, compute_v1, firestore, pubsub_v1, storage

VERTEX_GRPC_EMULATOR_VARIABLE = "VERTEX_AI_EMULATOR_GRPC_HOST"
VERTEX_REST_EMULATOR_VARIABLE = "VERTEX_AI_EMULATOR_HOST"
FIRESTORE_EMULATOR_VARIABLE = "FIRESTORE_EMULATOR_HOST"
PUBSUB_EMULATOR_VARIABLE = "PUBSUB_EMULATOR_HOST"
STORAGE_EMULATOR_VARIABLE = "STORAGE_EMULATOR_HOST"
COMPUTE_EMULATOR_VARIABLE = "COMPUTE_EMULATOR_HOST"
COMPUTE_PACKAGE = "google.cloud.compute_v1"

Client = TypeVar("Client")

_lock = threading.Lock()
_clients: dict[Hashable, Any] = {}


class VertexTransport(StrEnum):
    """How a Vertex AI client reaches the service."""

    GOOGLE = "google"  # the regional endpoint, gRPC, Application Default Credentials
    EMULATOR_GRPC = "emulator-grpc"  # our emulator over gRPC, insecure channel
    EMULATOR_REST = "emulator-rest"  # our emulator over REST (plain HTTP), anonymous credentials


@dataclass(frozen=True)
class VertexEndpoint:
    """Where the Vertex AI clients of one region connect, as the environment says now."""

    transport: VertexTransport
    address: str  # host:port for gRPC, an http:// URL for REST


def vertex_endpoint(region: str) -> VertexEndpoint:
    """The endpoint for ``region``, from the emulator variables (gRPC first) or the real one."""
    grpc_host = os.environ.get(VERTEX_GRPC_EMULATOR_VARIABLE)
    if grpc_host:
        return VertexEndpoint(VertexTransport.EMULATOR_GRPC, grpc_host)
    rest_host = os.environ.get(VERTEX_REST_EMULATOR_VARIABLE)
    if rest_host:
        return VertexEndpoint(VertexTransport.EMULATOR_REST, _http_url(rest_host))
    return VertexEndpoint(VertexTransport.GOOGLE, f"{region}-aiplatform.googleapis.com")


def job_service_client(region: str) -> aiplatform_v1.JobServiceClient:
    """The Vertex AI JobService client (CustomJobs, HyperparameterTuningJobs) of ``region``."""
    endpoint = vertex_endpoint(region)

    def build() -> aiplatform_v1.JobServiceClient:
        from shared.aiplatform import JobServiceClient

        grpc_transport = JobServiceClient.get_transport_class("grpc")
        return _build_vertex_client(JobServiceClient, grpc_transport, endpoint)

    return _cached(("vertex-jobs", region, endpoint), build)


def pipeline_service_client(region: str) -> aiplatform_v1.PipelineServiceClient:
    """The Vertex AI PipelineService client (TrainingPipelines) of ``region``; built only when a
    pipeline is first created or read, so a process of CustomJobs never loads the service."""
    endpoint = vertex_endpoint(region)

    def build() -> aiplatform_v1.PipelineServiceClient:
        from shared.aiplatform import PipelineServiceClient

        grpc_transport = PipelineServiceClient.get_transport_class("grpc")
        return _build_vertex_client(PipelineServiceClient, grpc_transport, endpoint)

    return _cached(("vertex-pipelines", region, endpoint), build)


def persistent_resource_client(region: str) -> aiplatform_v1.PersistentResourceServiceClient:
    """The Vertex AI PersistentResourceService client of ``region``."""
    endpoint = vertex_endpoint(region)

    def build() -> aiplatform_v1.PersistentResourceServiceClient:
        from shared.aiplatform import PersistentResourceServiceClient

        grpc_transport = PersistentResourceServiceClient.get_transport_class("grpc")
        return _build_vertex_client(PersistentResourceServiceClient, grpc_transport, endpoint)

    return _cached(("vertex-persistent-resources", region, endpoint), build)


def firestore_client(project: str | None = None) -> firestore.Client:
    """The Firestore client of ``project`` (None: the environment's project)."""

    def build() -> firestore.Client:
        from google.cloud import firestore

        return firestore.Client(project=project)

    emulator = os.environ.get(FIRESTORE_EMULATOR_VARIABLE)
    return _cached(("firestore", project, emulator), build)


def publisher_client() -> pubsub_v1.PublisherClient:
    """The Pub/Sub publisher; topics are named in full, so it is not tied to a project."""

    def build() -> pubsub_v1.PublisherClient:
        from google.cloud import pubsub_v1

        return pubsub_v1.PublisherClient()

    emulator = os.environ.get(PUBSUB_EMULATOR_VARIABLE)
    return _cached(("pubsub-publisher", emulator), build)


def storage_client(project: str | None = None) -> storage.Client:
    """The Cloud Storage client of ``project`` (None: the environment's project)."""

    def build() -> storage.Client:
        from google.cloud import storage

        return storage.Client(project=project)

    emulator = os.environ.get(STORAGE_EMULATOR_VARIABLE)
    return _cached(("storage", project, emulator), build)


def reservations_client() -> compute_v1.ReservationsClient:
    """The Compute Engine Reservations client (REST: the only transport ``compute_v1`` has)."""
    emulator = os.environ.get(COMPUTE_EMULATOR_VARIABLE)

    def build() -> compute_v1.ReservationsClient:
        from shared.aiplatform import lazy_package

        compute = lazy_package(COMPUTE_PACKAGE)
        if emulator:
            from google.auth.credentials import AnonymousCredentials

            return compute.ReservationsClient(
                transport="rest",
                credentials=AnonymousCredentials(),
                client_options={"api_endpoint": _http_url(emulator)},
            )
        return compute.ReservationsClient()

    return _cached(("compute-reservations", emulator), build)


def forget_clients() -> None:
    """Drop every cached client (tests that restart an emulator on the same address)."""
    with _lock:
        _clients.clear()


def _cached(key: Hashable, build: Callable[[], Client]) -> Client:
    # One lock for all: building is rare (once per key per process) and two threads racing to
    # build the same client would each pay the import and open a channel for nothing.
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = build()
        return client


def _build_vertex_client(
    client_class: Callable[..., Client], grpc_transport_class: type, endpoint: VertexEndpoint
) -> Client:
    if endpoint.transport is VertexTransport.EMULATOR_GRPC:
        import grpc

        channel = grpc.insecure_channel(endpoint.address)
        return client_class(transport=grpc_transport_class(channel=channel))
    if endpoint.transport is VertexTransport.EMULATOR_REST:
        from google.auth.credentials import AnonymousCredentials

        return client_class(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": endpoint.address},
        )
    return client_class(client_options={"api_endpoint": endpoint.address})


def _http_url(host: str) -> str:
    # The REST transport needs the scheme, or it would speak HTTPS to a plain-HTTP emulator.
    return host if host.startswith(("http://", "https://")) else f"http://{host}"
