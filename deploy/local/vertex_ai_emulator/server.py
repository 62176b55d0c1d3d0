"""One running emulator: a core `Emulator` served over REST (with the admin API) and gRPC.

Usable in-process (tests) or from the CLI::

    with EmulatorServer(config) as server:
        server.rest_url      # "http://127.0.0.1:PORT"  (the REST API and /emulator/v1/)
        server.grpc_target   # "127.0.0.1:PORT"

Port 0 picks a free port; the actual ports are known once the server has started.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

from vertex_ai_emulator.admin import AdminApi
from vertex_ai_emulator.clock import SimulatedClock
from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.dispatch import RPC_METHODS, Dispatcher
from vertex_ai_emulator.faults import FaultInjector, parse_rules
from vertex_ai_emulator.grpc_service import build_grpc_server
from vertex_ai_emulator.requestlog import RequestLog
from vertex_ai_emulator.rest import VertexRestServer

if TYPE_CHECKING:
    from vertex_ai_emulator.config import EmulatorConfig

DEFAULT_HOST = "127.0.0.1"
_GRPC_STOP_GRACE_SECONDS = 0.5


class EmulatorServer:
    """Serves one emulator on a REST port and a gRPC port, in background threads."""

    def __init__(
        self,
        config: EmulatorConfig | None = None,
        *,
        host: str = DEFAULT_HOST,
        rest_port: int = 0,
        grpc_port: int = 0,
        time_scale: float | None = None,
    ) -> None:
        """`time_scale`, when given, overrides the speed of simulated time the config sets."""
        clock = SimulatedClock(time_scale=time_scale) if time_scale is not None else None
        emulator = Emulator(config, clock=clock)
        initial_faults = parse_rules(_configured_faults(config), known_methods=RPC_METHODS)
        self.dispatcher = Dispatcher(emulator, FaultInjector(initial_faults), RequestLog())
        self.admin = AdminApi(self.dispatcher, initial_faults)
        self.host = host
        self._requested_ports = (rest_port, grpc_port)
        self._rest_server: VertexRestServer | None = None
        self._rest_thread: threading.Thread | None = None
        self._grpc_server: Any = None
        self.rest_port = 0
        self.grpc_port = 0

    @property
    def emulator(self) -> Emulator:
        return self.dispatcher.emulator

    @property
    def rest_url(self) -> str:
        """Base URL of the REST API; the `api_endpoint` for the REST client."""
        return f"http://{_url_host(self.host)}:{self.rest_port}"

    @property
    def rest_host(self) -> str:
        """host:port of the REST API: the value for `VERTEX_AI_EMULATOR_HOST`."""
        return f"{_url_host(self.host)}:{self.rest_port}"

    @property
    def grpc_target(self) -> str:
        """host:port for `grpc.insecure_channel`: the value for `VERTEX_AI_EMULATOR_GRPC_HOST`."""
        return f"{_url_host(self.host)}:{self.grpc_port}"

    def start(self) -> EmulatorServer:
        """Bind both ports and start serving; returns self."""
        rest_port, grpc_port = self._requested_ports
        self._rest_server = VertexRestServer((self.host, rest_port), self.dispatcher, self.admin)
        self.rest_port = self._rest_server.port
        try:
            self._grpc_server, self.grpc_port = build_grpc_server(
                self.dispatcher, self.host, grpc_port
            )
        except BaseException:
            self._rest_server.server_close()
            raise
        self._grpc_server.start()
        self._rest_thread = threading.Thread(
            target=self._rest_server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="vertex-ai-emulator-rest",
            daemon=True,
        )
        self._rest_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release both ports; safe to call twice."""
        if self._grpc_server is not None:
            self._grpc_server.stop(_GRPC_STOP_GRACE_SECONDS).wait()
            self._grpc_server = None
        if self._rest_server is not None:
            self._rest_server.shutdown()
            self._rest_server.server_close()
            self._rest_server = None
        if self._rest_thread is not None:
            self._rest_thread.join()
            self._rest_thread = None

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _configured_faults(config: EmulatorConfig | None) -> list[Any]:
    return list(getattr(config, "faults", None) or [])


def _url_host(host: str) -> str:
    # An IPv6 literal needs brackets in a URL or a host:port target.
    return f"[{host}]" if ":" in host else host
