"""The emulator's one error type: a gRPC status code plus a message, and its HTTP twin.

Every failure the core reports (a bad request, a missing resource, a call in the wrong state) is an
`EmulatorError`; the transports turn it into a gRPC status or a Google-style JSON error body.
"""

from __future__ import annotations

import grpc

# Google's canonical mapping from gRPC status codes to HTTP status codes
# (google/rpc/code.proto); the REST transport answers with these.
HTTP_STATUS_BY_GRPC_CODE: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}


class EmulatorError(Exception):
    """A request the emulated service refuses, as the real service would refuse it."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        """The HTTP status the REST API answers with for this error."""
        return HTTP_STATUS_BY_GRPC_CODE.get(self.code, 500)

    @property
    def status_name(self) -> str:
        """The canonical status name (`INVALID_ARGUMENT`), used in REST error bodies."""
        return self.code.name

    def __repr__(self) -> str:
        return f"EmulatorError({self.code.name}, {self.message!r})"


def invalid_argument(message: str) -> EmulatorError:
    """A request whose content is wrong whatever the state of the system."""
    return EmulatorError(grpc.StatusCode.INVALID_ARGUMENT, message)


def failed_precondition(message: str) -> EmulatorError:
    """A well-formed request the current state of a resource does not allow."""
    return EmulatorError(grpc.StatusCode.FAILED_PRECONDITION, message)


def not_found(message: str) -> EmulatorError:
    """A request naming a resource that does not exist."""
    return EmulatorError(grpc.StatusCode.NOT_FOUND, message)


class ConfigError(ValueError):
    """An emulator configuration (file, or rule posted at runtime) that breaks its schema."""
