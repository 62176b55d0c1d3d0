"""The admin API under `/emulator/v1/` on the REST port: what tests use to steer the emulator.

Health, the request log, reset, the core's state, capacity, quota, persistent resources,
reservations, Spot preemption, create-time refusals, outcome rules, the simulated clock, timings,
fault rules and training progress per output directory; JSON in and out. Admin calls are never
recorded in the request log, which holds the Vertex AI calls only. Every endpoint is documented in
docs/vertex-ai-emulator.md.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from types import UnionType
from typing import Any

import grpc
from google.cloud import aiplatform_v1

from vertex_ai_emulator.dispatch import RPC_METHODS, Dispatcher
from vertex_ai_emulator.errors import ConfigError, EmulatorError, invalid_argument
from vertex_ai_emulator.faults import FaultRule, FaultRuleError
from vertex_ai_emulator.messages import from_rest_dict, rfc3339, to_rest_dict

ADMIN_PATH_PREFIX = "/emulator/v1/"

AdminAnswer = tuple[int, Any]
Query = dict[str, list[str]]
FieldKind = tuple[type | UnionType, str]  # (accepted JSON value type, its name in errors)

_STRING: FieldKind = (str, "a string")
_INTEGER: FieldKind = (int, "an integer")
_NUMBER: FieldKind = (int | float, "a number")


class AdminApi:
    """Admin endpoints, keyed by (HTTP method, path below `/emulator/v1/`)."""

    def __init__(self, dispatcher: Dispatcher, initial_faults: list[FaultRule]) -> None:
        self._dispatcher = dispatcher
        self._emulator = dispatcher.emulator
        self._initial_faults = list(initial_faults)
        self._endpoints: dict[tuple[str, str], Callable[[Query, Any], Any]] = {
            ("GET", "health"): self._health,
            ("GET", "requests"): self._list_requests,
            ("DELETE", "requests"): self._clear_requests,
            ("POST", "reset"): self._reset,
            ("GET", "state"): self._state,
            ("PUT", "capacity"): self._set_capacity,
            ("PUT", "quota"): self._set_quota,
            ("PUT", "persistentResources"): self._put_persistent_resource,
            ("GET", "reservations"): self._reservations,
            ("PUT", "reservations"): self._put_reservation,
            ("GET", "spot"): self._spot,
            ("PUT", "spot"): self._set_spot,
            ("GET", "createRefusals"): self._refusals,
            ("PUT", "createRefusals"): self._set_refusals,
            ("POST", "outcomes"): self._add_outcome_rule,
            ("DELETE", "outcomes"): self._clear_outcome_rules,
            ("GET", "clock"): self._clock,
            ("POST", "clock:advance"): self._advance_clock,
            ("GET", "timings"): self._timings,
            ("PUT", "timings"): self._set_timings,
            ("GET", "faults"): self._list_faults,
            ("POST", "faults"): self._add_fault,
            ("DELETE", "faults"): self._clear_faults,
            ("GET", "logEntries"): self._log_entries,
            ("PUT", "jobLogs"): self._set_job_logs,
            ("GET", "progress"): self._progress,
        }

    def handle(self, http_method: str, path: str, query: Query, body: Any) -> AdminAnswer:
        """Serve one admin call; raises `EmulatorError` for a refused one."""
        endpoint = self._endpoints.get((http_method, path.strip("/")))
        if endpoint is None:
            raise EmulatorError(
                grpc.StatusCode.NOT_FOUND,
                f"No admin endpoint {http_method} {ADMIN_PATH_PREFIX}{path}; see "
                "docs/vertex-ai-emulator.md for the list.",
            )
        try:
            return HTTPStatus.OK, endpoint(query, body)
        except (ConfigError, FaultRuleError) as error:
            raise invalid_argument(str(error)) from None

    def reset(self) -> None:
        """Back to the state the config describes: jobs, clock, outcome rules, faults, log."""
        self._emulator.reset()
        self._dispatcher.faults.replace_all(self._initial_faults)
        self._dispatcher.request_log.clear()

    def _health(self, query: Query, body: Any) -> dict[str, Any]:
        return {"status": "ok"}

    def _list_requests(self, query: Query, body: Any) -> dict[str, Any]:
        method = query.get("method", [None])[0]
        records = self._dispatcher.request_log.records(method)
        return {"requests": [record.to_json_dict() for record in records]}

    def _clear_requests(self, query: Query, body: Any) -> dict[str, Any]:
        self._dispatcher.request_log.clear()
        return {}

    def _reset(self, query: Query, body: Any) -> dict[str, Any]:
        self.reset()
        return {}

    def _state(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.state_snapshot()

    def _set_capacity(self, query: Query, body: Any) -> dict[str, Any]:
        fields = _require_fields(
            body, {"region": _STRING, "acceleratorType": _STRING, "count": _INTEGER}
        )
        self._emulator.set_capacity(fields["region"], fields["acceleratorType"], fields["count"])
        return fields

    def _set_quota(self, query: Query, body: Any) -> dict[str, Any]:
        fields = _require_object(body)
        count = fields.get("count", "missing")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise invalid_argument(
                f"field 'count' must be an integer, or null to lift the limit, got {count!r}"
            )
        others = {name: value for name, value in fields.items() if name != "count"}
        _require_fields(others, {"kind": _STRING, "region": _STRING, "acceleratorType": _STRING})
        self._emulator.set_quota(fields["kind"], fields["region"], fields["acceleratorType"], count)
        return fields

    def _put_persistent_resource(self, query: Query, body: Any) -> dict[str, Any]:
        resource = from_rest_dict(aiplatform_v1.PersistentResource, _require_object(body))
        return to_rest_dict(self._emulator.put_persistent_resource(resource))

    def _reservations(self, query: Query, body: Any) -> dict[str, Any]:
        return {"reservations": self._emulator.reservations()}

    def _put_reservation(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.put_reservation(_require_object(body))

    def _spot(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.spot()

    def _set_spot(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.set_spot(_require_object(body))

    def _refusals(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.refusals()

    def _set_refusals(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.set_refusals(_require_object(body))

    def _add_outcome_rule(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.add_outcome_rule(_require_object(body))

    def _clear_outcome_rules(self, query: Query, body: Any) -> dict[str, Any]:
        self._emulator.clear_outcome_rules()
        return {}

    def _clock(self, query: Query, body: Any) -> dict[str, Any]:
        clock = self._emulator.clock
        return {"now": rfc3339(clock.now()), "timeScale": clock.time_scale}

    def _advance_clock(self, query: Query, body: Any) -> dict[str, Any]:
        seconds = _require_fields(body, {"seconds": _NUMBER})["seconds"]
        if seconds < 0:
            raise invalid_argument(f"the clock only moves forward; got seconds={seconds}")
        self._emulator.advance_clock(seconds)
        return self._clock(query, body)

    def _timings(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.timings()

    def _set_timings(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.set_timings(_require_object(body))

    def _log_entries(self, query: Query, body: Any) -> dict[str, Any]:
        after = _query_integer(query, "after", 0)
        page_size = _query_integer(query, "pageSize", 1000)
        return self._emulator.log_entries(after, max(1, page_size))

    def _set_job_logs(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.set_log_settings(_require_object(body))

    def _progress(self, query: Query, body: Any) -> dict[str, Any]:
        return self._emulator.progress()

    def _list_faults(self, query: Query, body: Any) -> dict[str, Any]:
        return {"faults": [rule.to_dict() for rule in self._dispatcher.faults.rules()]}

    def _add_fault(self, query: Query, body: Any) -> dict[str, Any]:
        rule = FaultRule.from_dict(_require_object(body), known_methods=RPC_METHODS)
        self._dispatcher.faults.add(rule)
        return rule.to_dict()

    def _clear_faults(self, query: Query, body: Any) -> dict[str, Any]:
        self._dispatcher.faults.replace_all([])
        return {}


def _query_integer(query: Query, name: str, default: int) -> int:
    text = query.get(name, [str(default)])[0]
    if not text.isascii() or not text.isdigit():
        raise invalid_argument(
            f"query parameter {name!r} must be a non-negative integer, got {text!r}"
        )
    return int(text)


def _require_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid_argument(f"expected a JSON object body, got {body!r}")
    return body


def _require_fields(body: Any, expected: dict[str, FieldKind]) -> dict[str, Any]:
    fields = _require_object(body)
    for name, (kind, kind_name) in expected.items():
        value = fields.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise invalid_argument(f"field {name!r} must be {kind_name}, got {value!r}")
    unknown = sorted(set(fields) - set(expected))
    if unknown:
        raise invalid_argument(f"unknown field(s) {unknown}; expected {sorted(expected)}")
    return fields
