"""The REST (v1, JSON over HTTP/1.1) face of the emulator, and the admin API beside it.

Paths are those of the aiplatform_v1 REST transport (its `rest_base.py`). A path, its query
parameters and its JSON body are merged into the RPC's request message, as the real API's HTTP
rule binding does, so unknown fields and query parameters are refused the same way. Errors use
Google's JSON error shape, from which the GAPIC client raises the matching
`google.api_core.exceptions` class. Paths under `/emulator/v1/` go to the admin API.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import grpc

from vertex_ai_emulator.admin import ADMIN_PATH_PREFIX, AdminApi
from vertex_ai_emulator.dispatch import RPC_METHODS, Dispatcher, reservation_request
from vertex_ai_emulator.errors import EmulatorError, invalid_argument
from vertex_ai_emulator.messages import MessageClass, as_protobuf, from_rest_dict, to_rest_dict

_LOCATION = r"projects/[^/:]+/locations/[^/:]+"
_CUSTOM_JOB = rf"{_LOCATION}/customJobs/[^/:]+"
_TUNING_JOB = rf"{_LOCATION}/hyperparameterTuningJobs/[^/:]+"
_PIPELINE = rf"{_LOCATION}/trainingPipelines/[^/:]+"
_PERSISTENT_RESOURCE = rf"{_LOCATION}/persistentResources/[^/:]+"
# Operations are named under their resource (delete answers `.../customJobs/ID/operations/N`) or
# under the location; GetOperation accepts both.
_OPERATION = rf"{_LOCATION}(?:/[^/:]+/[^/:]+)?/operations/[^/:]+"
# Compute Engine's reservations.get (compute_v1.ReservationsClient.get over REST).
COMPUTE_RESERVATION_PATH = re.compile(
    r"/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)"
    r"/reservations/(?P<reservation>[^/]+)"
)
# Compute Engine's error `reason` for an HTTP status (its v1 error shape has `errors[]`).
_COMPUTE_REASONS = {
    400: "invalid",
    401: "required",
    403: "forbidden",
    404: "notFound",
    409: "conflict",
    429: "rateLimitExceeded",
    503: "backendError",
}

# Query parameters every Google REST API accepts, which are not fields of the request message.
_SYSTEM_QUERY_PARAMETERS = frozenset({"$alt", "alt", "$.xgafv", "__xgafv", "prettyPrint", "key"})
_JSON_CONTENT_TYPE = "application/json; charset=UTF-8"
_MAX_IDLE_SECONDS = 60  # closes keep-alive connections a client forgot

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestRoute:
    """One HTTP rule: verb and path template -> RPC, and where the body goes in the request."""

    http_method: str
    path: re.Pattern[str]
    rpc_method: str
    path_field: str  # the request field the path's resource name binds to
    body_field: str | None  # "*" (whole request), a field name, or None (no body)


def _route(
    http_method: str,
    bound: tuple[str, str],
    suffix: str,
    rpc_method: str,
    body_field: str | None = None,
    versions: str = "v1",
) -> RestRoute:
    field, template = bound
    path = re.compile(rf"/(?:{versions})/(?P<{field}>{template}){re.escape(suffix)}")
    return RestRoute(http_method, path, rpc_method, field, body_field)


# (request field, pattern of the resource name bound to it)
_PARENT = ("parent", _LOCATION)
_JOB_NAME = ("name", _CUSTOM_JOB)
_TUNING_JOB_NAME = ("name", _TUNING_JOB)
_PIPELINE_NAME = ("name", _PIPELINE)
_RESOURCE_NAME = ("name", _PERSISTENT_RESOURCE)
_OPERATION_NAME = ("name", _OPERATION)

ROUTES: tuple[RestRoute, ...] = (
    _route("POST", _PARENT, "/customJobs", "CreateCustomJob", body_field="custom_job"),
    _route("GET", _PARENT, "/customJobs", "ListCustomJobs"),
    _route("GET", _JOB_NAME, "", "GetCustomJob"),
    _route("DELETE", _JOB_NAME, "", "DeleteCustomJob"),
    _route("POST", _JOB_NAME, ":cancel", "CancelCustomJob", body_field="*"),
    _route(
        "POST",
        _PARENT,
        "/hyperparameterTuningJobs",
        "CreateHyperparameterTuningJob",
        body_field="hyperparameter_tuning_job",
    ),
    _route("GET", _PARENT, "/hyperparameterTuningJobs", "ListHyperparameterTuningJobs"),
    _route("GET", _TUNING_JOB_NAME, "", "GetHyperparameterTuningJob"),
    _route("DELETE", _TUNING_JOB_NAME, "", "DeleteHyperparameterTuningJob"),
    _route("POST", _TUNING_JOB_NAME, ":cancel", "CancelHyperparameterTuningJob", body_field="*"),
    _route(
        "POST",
        _PARENT,
        "/trainingPipelines",
        "CreateTrainingPipeline",
        body_field="training_pipeline",
    ),
    _route("GET", _PARENT, "/trainingPipelines", "ListTrainingPipelines"),
    _route("GET", _PIPELINE_NAME, "", "GetTrainingPipeline"),
    _route("DELETE", _PIPELINE_NAME, "", "DeleteTrainingPipeline"),
    _route("POST", _PIPELINE_NAME, ":cancel", "CancelTrainingPipeline", body_field="*"),
    _route("GET", _PARENT, "/persistentResources", "ListPersistentResources"),
    _route("GET", _RESOURCE_NAME, "", "GetPersistentResource"),
    # The clients' operation mixins try the `/ui/` binding first; the real service serves both.
    _route("GET", _OPERATION_NAME, "", "GetOperation", versions="v1|ui"),
)


def find_route(http_method: str, path: str) -> tuple[RestRoute, str] | None:
    """The route serving `http_method path`, and the resource name the path binds."""
    for route in ROUTES:
        if route.http_method == http_method and (match := route.path.fullmatch(path)):
            return route, unquote(match[route.path_field])
    return None


def build_request(route: RestRoute, resource: str, query: dict[str, list[str]], body: Any) -> Any:
    """Bind path, query parameters and body into the RPC's request message."""
    request_type = RPC_METHODS[route.rpc_method].request_type
    fields: dict[str, Any] = {}
    if route.body_field == "*":
        fields.update(_require_object(body))
    elif route.body_field is not None:
        fields[route.body_field] = _require_object(body)
    fields.update(_query_fields(request_type, query))
    fields[route.path_field] = resource
    return from_rest_dict(request_type, fields)


def error_body(error: EmulatorError) -> dict[str, Any]:
    """Google's JSON error shape, which `google.api_core.exceptions.from_http_response` reads."""
    return {
        "error": {"code": error.http_status, "message": error.message, "status": error.status_name}
    }


def compute_error_body(error: EmulatorError) -> dict[str, Any]:
    """Compute Engine's JSON error shape (`errors[]` with domain and reason; no `status`),
    which `google.api_core.exceptions.from_http_response` reads too."""
    reason = _COMPUTE_REASONS.get(error.http_status, "backendError")
    return {
        "error": {
            "code": error.http_status,
            "message": error.message,
            "errors": [{"message": error.message, "domain": "global", "reason": reason}],
        }
    }


def _require_object(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise invalid_argument(
            f"Invalid JSON payload received. Expected an object, got {type(body).__name__}."
        )
    return body


def _query_fields(request_type: MessageClass, query: dict[str, list[str]]) -> dict[str, Any]:
    descriptor = as_protobuf(request_type()).DESCRIPTOR
    known_names = {field.name for field in descriptor.fields} | {
        field.json_name for field in descriptor.fields
    }
    fields: dict[str, Any] = {}
    for name, values in query.items():
        if name in _SYSTEM_QUERY_PARAMETERS:
            continue
        top_level = name.split(".", 1)[0]
        if top_level not in known_names:
            raise invalid_argument(
                f'Invalid JSON payload received. Unknown name "{name}": Cannot bind query '
                f"parameter. Field '{top_level}' could not be found in request message."
            )
        _set_nested(fields, name.split("."), values[0] if len(values) == 1 else values)
    return fields


def _set_nested(fields: dict[str, Any], path: list[str], value: Any) -> None:
    for name in path[:-1]:
        fields = fields.setdefault(name, {})
    fields[path[-1]] = value


def _wants_integer_enums(query: dict[str, list[str]]) -> bool:
    # The GAPIC REST client asks for `$alt=json;enum-encoding=int`; the real API then prints
    # enums as numbers. Without it (curl, browsers) enums are printed by name.
    return any("enum-encoding=int" in value for value in query.get("$alt", []))


class VertexRestHandler(BaseHTTPRequestHandler):
    """Serves one HTTP connection (keep-alive) for the Vertex AI REST API and the admin API."""

    protocol_version = "HTTP/1.1"
    timeout = _MAX_IDLE_SECONDS
    # Headers and body leave in two writes; with Nagle's algorithm the second one waits for the
    # client's delayed ACK (~40 ms per call on keep-alive connections).
    disable_nagle_algorithm = True
    server: VertexRestServer

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: the dispatcher logs each API call (at debug level) instead."""

    def _serve(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            body = self._read_json_body()
            if url.path.startswith(ADMIN_PATH_PREFIX):
                subpath = url.path.removeprefix(ADMIN_PATH_PREFIX)
                status, answer = self.server.admin.handle(self.command, subpath, query, body)
            elif compute := COMPUTE_RESERVATION_PATH.fullmatch(url.path):
                status, answer = self._call_compute(compute)
            else:
                status, answer = HTTPStatus.OK, self._call_api(url.path, query, body)
        except EmulatorError as error:
            status, answer = error.http_status, error_body(error)
        except Exception as error:
            # A bug must still produce an answer; a dropped connection would hang the client.
            _LOG.exception("%s %s failed unexpectedly", self.command, url.path)
            internal = EmulatorError(
                grpc.StatusCode.INTERNAL, f"Emulator internal error: {error!r}"
            )
            status, answer = internal.http_status, error_body(internal)
        self._send_json(status, answer)

    def _call_api(self, path: str, query: dict[str, list[str]], body: Any) -> dict[str, Any]:
        found = find_route(self.command, path)
        if found is None:
            raise EmulatorError(
                grpc.StatusCode.NOT_FOUND, f"The requested URL {path} was not found on this server."
            )
        route, resource = found
        request = build_request(route, resource, query, body)
        response = self.server.dispatcher.call(route.rpc_method, request, transport="rest")
        return to_rest_dict(response, integer_enums=_wants_integer_enums(query))

    def _call_compute(self, path: re.Match[str]) -> tuple[int, Any]:
        # Only GET is served; errors come in Compute Engine's shape, not Vertex AI's.
        try:
            if self.command != "GET":
                raise EmulatorError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"The emulator serves only GET on {path.group(0)}.",
                )
            request = reservation_request(
                unquote(path["project"]), unquote(path["zone"]), unquote(path["reservation"])
            )
            answer = self.server.dispatcher.call("GetReservation", request, transport="rest")
            return HTTPStatus.OK, answer
        except EmulatorError as error:
            return error.http_status, compute_error_body(error)

    def _read_json_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise invalid_argument(f"Invalid JSON payload received. {error}.") from None

    def _send_json(self, status: int, answer: Any) -> None:
        payload = json.dumps(answer, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", _JSON_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class VertexRestServer(ThreadingHTTPServer):
    """A threaded HTTP server that knows the dispatcher and the admin API its handlers use."""

    daemon_threads = True  # idle keep-alive connections must not hold up shutdown

    def __init__(self, address: tuple[str, int], dispatcher: Dispatcher, admin: AdminApi) -> None:
        super().__init__(address, VertexRestHandler)
        self.dispatcher = dispatcher
        self.admin = admin

    @property
    def port(self) -> int:
        return self.server_address[1]
