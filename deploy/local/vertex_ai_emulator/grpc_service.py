"""The gRPC face of the emulator: JobService, PipelineService, PersistentResourceService and
Operations.

One generic handler per service, built from the method table in `dispatch`, with the proto-plus
types' own `serialize`/`deserialize`. Methods the emulator does not serve are answered
UNIMPLEMENTED by gRPC itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

from vertex_ai_emulator.dispatch import RPC_METHODS, Dispatcher, RpcMethod
from vertex_ai_emulator.errors import EmulatorError
from vertex_ai_emulator.messages import wire_codec

DEFAULT_WORKER_THREADS = 16


def build_service_handlers(dispatcher: Dispatcher) -> list[grpc.GenericRpcHandler]:
    """A generic handler per gRPC service, serving every method of `RPC_METHODS`."""
    methods_by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = defaultdict(dict)
    for method_name, method in RPC_METHODS.items():
        if method.rest_only:
            continue
        methods_by_service[method.service][method_name] = _unary_handler(
            dispatcher, method_name, method
        )
    return [
        grpc.method_handlers_generic_handler(service, handlers)
        for service, handlers in methods_by_service.items()
    ]


def build_grpc_server(
    dispatcher: Dispatcher, host: str, port: int, worker_threads: int = DEFAULT_WORKER_THREADS
) -> tuple[grpc.Server, int]:
    """An unstarted insecure gRPC server on host:port (0 = a free port), and the bound port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=worker_threads))
    server.add_generic_rpc_handlers(build_service_handlers(dispatcher))
    try:
        bound_port = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # what recent grpcio raises, where older ones returned port 0
        bound_port = 0
    if bound_port == 0:
        raise OSError(f"cannot bind the gRPC server to {host}:{port} (port in use?)")
    return server, bound_port


def _unary_handler(
    dispatcher: Dispatcher, method_name: str, method: RpcMethod
) -> grpc.RpcMethodHandler:
    _, deserialize_request = wire_codec(method.request_type)
    serialize_response, _ = wire_codec(method.response_type)
    return grpc.unary_unary_rpc_method_handler(
        _answering(dispatcher, method_name),
        request_deserializer=deserialize_request,
        response_serializer=serialize_response,
    )


def _answering(
    dispatcher: Dispatcher, method_name: str
) -> Callable[[Any, grpc.ServicerContext], Any]:
    def answer(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return dispatcher.call(method_name, request, transport="grpc")
        except EmulatorError as error:
            context.abort(error.code, error.message)

    return answer
