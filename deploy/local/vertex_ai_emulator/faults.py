"""Fault injection: rules that make chosen calls fail, or answer late, on purpose.

A rule, as JSON (admin API) or YAML (the config's `faults:` list)::

    {"method": "CreateCustomJob",   # an RPC name, or "*" for every method
     "code": "UNAVAILABLE",         # any gRPC status name; omit for latency only
     "message": "...",              # optional; a default names the rule
     "count": 2,                    # fire on the next 2 matching calls, then retire
     "fraction": 0.3,               # or fire on each matching call with this probability
     "latency_ms": 1500,            # delay the answer
     "when": "before"}              # "before": fail without doing the work (default);
                                    # "after": do the work (really create the job), then fail

The first rule (in the order they were added) that matches a call and fires decides its fate. This
module only decides; the transports apply the decision. It is pure apart from the lock, and takes
its random source as an argument so that tests can make `fraction` deterministic.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import grpc

ANY_METHOD = "*"

_STATUS_BY_NAME: dict[str, grpc.StatusCode] = {
    code.name: code for code in grpc.StatusCode if code is not grpc.StatusCode.OK
}
_RULE_KEYS = frozenset({"method", "code", "message", "count", "fraction", "latency_ms", "when"})


class FaultTiming(StrEnum):
    """When an injected error replaces the answer, relative to the real work."""

    BEFORE = "before"  # the call has no effect: as if it never reached the service
    AFTER = "after"  # the call takes effect but its answer is lost


class FaultRuleError(ValueError):
    """A fault rule that cannot be understood; the message says which field and why."""


@dataclass(frozen=True)
class Fault:
    """What to do to one call."""

    latency_seconds: float
    code: grpc.StatusCode | None  # None: delay only, answer normally
    message: str
    when: FaultTiming


@dataclass(frozen=True)
class FaultRule:
    """One rule; `count` is the number of firings left (None: unlimited)."""

    method: str = ANY_METHOD
    code: grpc.StatusCode | None = None
    message: str | None = None
    count: int | None = None
    fraction: float | None = None
    latency_ms: int = 0
    when: FaultTiming = FaultTiming.BEFORE

    @classmethod
    def from_dict(
        cls, raw: Mapping[str, Any], known_methods: Collection[str] | None = None
    ) -> FaultRule:
        """Parse and validate a rule; raises `FaultRuleError` on the first problem found."""
        if not isinstance(raw, Mapping):
            raise FaultRuleError(f"a fault rule must be an object, got {raw!r}")
        unknown = sorted(set(raw) - _RULE_KEYS)
        if unknown:
            raise FaultRuleError(
                f"unknown fault rule field(s) {unknown}; expected some of {sorted(_RULE_KEYS)}"
            )
        rule = cls(
            method=_parse_method(raw.get("method", ANY_METHOD), known_methods),
            code=_parse_code(raw.get("code")),
            message=_parse_optional_str("message", raw.get("message")),
            count=_parse_count(raw.get("count")),
            fraction=_parse_fraction(raw.get("fraction")),
            latency_ms=_parse_latency(raw.get("latency_ms", 0)),
            when=_parse_when(raw.get("when", FaultTiming.BEFORE.value)),
        )
        if rule.code is None and rule.latency_ms == 0:
            raise FaultRuleError("a fault rule needs a `code`, a `latency_ms`, or both")
        return rule

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON, with only the fields that are set."""
        fields: dict[str, Any] = {"method": self.method, "when": self.when.value}
        if self.code is not None:
            fields["code"] = self.code.name
        optional = {
            "message": self.message,
            "count": self.count,
            "fraction": self.fraction,
            "latency_ms": self.latency_ms or None,
        }
        fields.update({key: value for key, value in optional.items() if value is not None})
        return fields

    def matches(self, method: str) -> bool:
        return self.method in (ANY_METHOD, method)

    def as_fault(self) -> Fault:
        code_name = self.code.name if self.code else "latency"
        return Fault(
            latency_seconds=self.latency_ms / 1000,
            code=self.code,
            message=self.message or f"Injected fault {code_name} for {self.method}",
            when=self.when,
        )


class FaultInjector:
    """The active fault rules, and the decision of which fault (if any) hits a call."""

    def __init__(
        self,
        rules: Iterable[FaultRule] = (),
        random_fraction: Callable[[], float] = random.random,
    ) -> None:
        self._lock = threading.Lock()
        self._random_fraction = random_fraction
        self._rules: list[FaultRule] = list(rules)

    def add(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules.append(rule)

    def replace_all(self, rules: Iterable[FaultRule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def fault_for(self, method: str) -> Fault | None:
        """Decide the fate of one call of `method`, consuming one firing of a counted rule."""
        with self._lock:
            for index, rule in enumerate(self._rules):
                if not rule.matches(method) or not self._fires(rule):
                    continue
                if rule.count is not None:
                    self._consume(index, rule)
                return rule.as_fault()
        return None

    def _fires(self, rule: FaultRule) -> bool:
        return rule.fraction is None or self._random_fraction() < rule.fraction

    def _consume(self, index: int, rule: FaultRule) -> None:
        assert rule.count is not None
        if rule.count <= 1:
            del self._rules[index]
        else:
            self._rules[index] = replace(rule, count=rule.count - 1)


def parse_rules(
    raw_rules: Iterable[Mapping[str, Any]], known_methods: Collection[str] | None = None
) -> list[FaultRule]:
    """Parse a list of rules (e.g. the config's `faults:`), naming the bad one on error."""
    rules = []
    for position, raw in enumerate(raw_rules):
        try:
            rules.append(FaultRule.from_dict(raw, known_methods))
        except FaultRuleError as error:
            raise FaultRuleError(f"fault rule #{position + 1}: {error}") from None
    return rules


def _parse_method(value: Any, known_methods: Collection[str] | None) -> str:
    if not isinstance(value, str) or not value:
        raise FaultRuleError(f"`method` must be an RPC name or {ANY_METHOD!r}, got {value!r}")
    if value != ANY_METHOD and known_methods is not None and value not in known_methods:
        raise FaultRuleError(
            f"`method` {value!r} is not a served method; expected one of {sorted(known_methods)}"
            f" or {ANY_METHOD!r}"
        )
    return value


def _parse_code(value: Any) -> grpc.StatusCode | None:
    if value is None:
        return None
    code = _STATUS_BY_NAME.get(str(value).upper())
    if code is None:
        raise FaultRuleError(
            f"`code` {value!r} is not a gRPC status name; expected one of {sorted(_STATUS_BY_NAME)}"
        )
    return code


def _parse_optional_str(field: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise FaultRuleError(f"`{field}` must be a string, got {value!r}")
    return value


def _parse_count(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FaultRuleError(f"`count` must be a positive integer, got {value!r}")
    return value


def _parse_fraction(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise FaultRuleError(f"`fraction` must be a number in (0, 1], got {value!r}")
    return float(value)


def _parse_latency(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FaultRuleError(f"`latency_ms` must be a non-negative integer, got {value!r}")
    return value


def _parse_when(value: Any) -> FaultTiming:
    try:
        return FaultTiming(value)
    except ValueError:
        expected = [timing.value for timing in FaultTiming]
        raise FaultRuleError(f"`when` must be one of {expected}, got {value!r}") from None
