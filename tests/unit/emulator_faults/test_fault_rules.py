"""Fault rules: parsing and validation, and which call each rule hits."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from vertex_ai_emulator.faults import (
    Fault,
    FaultInjector,
    FaultRule,
    FaultRuleError,
    FaultTiming,
    parse_rules,
)

SERVED = {"CreateCustomJob", "GetCustomJob", "ListCustomJobs"}


def _rule(**fields: object) -> FaultRule:
    return FaultRule.from_dict(fields, known_methods=SERVED)


def _random_sequence(*values: float) -> Iterator[float]:
    return iter(values)


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"code": "UNAVAILABLE"},
            FaultRule(method="*", code=grpc.StatusCode.UNAVAILABLE),
        ),
        (
            {"method": "CreateCustomJob", "code": "deadline_exceeded", "count": 2},
            FaultRule("CreateCustomJob", grpc.StatusCode.DEADLINE_EXCEEDED, count=2),
        ),
        (
            {"latency_ms": 250, "fraction": 0.5},
            FaultRule(latency_ms=250, fraction=0.5),
        ),
        (
            {"code": "INTERNAL", "when": "after", "message": "lost"},
            FaultRule(code=grpc.StatusCode.INTERNAL, when=FaultTiming.AFTER, message="lost"),
        ),
    ],
)
def test_valid_rules_parse(raw, expected):
    assert _rule(**raw) == expected


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        ({}, "needs a `code`, a `latency_ms`"),
        ({"code": "OK"}, "not a gRPC status name"),
        ({"code": "NOPE"}, "not a gRPC status name"),
        ({"code": "UNAVAILABLE", "method": "DeleteEverything"}, "not a served method"),
        ({"code": "UNAVAILABLE", "count": 0}, "`count` must be a positive integer"),
        ({"code": "UNAVAILABLE", "count": True}, "`count` must be a positive integer"),
        ({"code": "UNAVAILABLE", "fraction": 1.5}, "`fraction` must be a number in (0, 1]"),
        ({"code": "UNAVAILABLE", "fraction": 0}, "`fraction` must be a number in (0, 1]"),
        ({"latency_ms": -1}, "`latency_ms` must be a non-negative integer"),
        ({"code": "UNAVAILABLE", "when": "during"}, "`when` must be one of"),
        ({"code": "UNAVAILABLE", "times": 3}, "unknown fault rule field(s) ['times']"),
    ],
)
def test_invalid_rules_are_refused_with_a_reason(raw, complaint):
    with pytest.raises(FaultRuleError) as refused:
        _rule(**raw)
    assert complaint in str(refused.value)


def test_parse_rules_names_the_bad_rule():
    with pytest.raises(FaultRuleError, match=r"^fault rule #2: "):
        parse_rules([{"code": "UNAVAILABLE"}, {"code": "NOPE"}], known_methods=SERVED)


def test_to_dict_round_trips():
    rule = _rule(method="GetCustomJob", code="ABORTED", count=3, latency_ms=10, when="after")
    assert FaultRule.from_dict(rule.to_dict(), known_methods=SERVED) == rule


# --- deciding -----------------------------------------------------------------------------------


def test_no_rules_no_fault():
    assert FaultInjector().fault_for("CreateCustomJob") is None


def test_a_counted_rule_fires_that_many_times_then_retires():
    injector = FaultInjector([_rule(method="CreateCustomJob", code="UNAVAILABLE", count=2)])
    fates = [injector.fault_for("CreateCustomJob") for _ in range(3)]
    assert [fate.code if fate else None for fate in fates] == [
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.UNAVAILABLE,
        None,
    ]
    assert injector.rules() == []


def test_a_rule_ignores_other_methods_and_keeps_its_count():
    injector = FaultInjector([_rule(method="CreateCustomJob", code="UNAVAILABLE", count=1)])
    assert injector.fault_for("GetCustomJob") is None
    assert injector.rules()[0].count == 1


def test_wildcard_matches_every_method():
    injector = FaultInjector([_rule(code="INTERNAL")])
    assert all(injector.fault_for(method) for method in SERVED)


@pytest.mark.parametrize(
    ("draws", "expected_firings"),
    [
        ((0.1, 0.9, 0.29, 0.3), [True, False, True, False]),
        ((0.99, 0.0), [False, True]),
    ],
)
def test_fraction_fires_when_the_draw_is_below_it(draws, expected_firings):
    random_source = _random_sequence(*draws)
    injector = FaultInjector(
        [_rule(code="UNAVAILABLE", fraction=0.3)], random_fraction=lambda: next(random_source)
    )
    assert [injector.fault_for("GetCustomJob") is not None for _ in draws] == expected_firings


def test_a_counted_fraction_rule_consumes_only_when_it_fires():
    random_source = _random_sequence(0.9, 0.1, 0.1)
    injector = FaultInjector(
        [_rule(code="UNAVAILABLE", fraction=0.5, count=1)],
        random_fraction=lambda: next(random_source),
    )
    assert [injector.fault_for("GetCustomJob") is not None for _ in range(3)] == [
        False,
        True,
        False,
    ]


def test_the_first_rule_that_fires_decides():
    injector = FaultInjector(
        [
            _rule(method="GetCustomJob", code="NOT_FOUND", count=1),
            _rule(code="UNAVAILABLE"),
        ]
    )
    assert injector.fault_for("GetCustomJob").code is grpc.StatusCode.NOT_FOUND
    assert injector.fault_for("GetCustomJob").code is grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"code": "UNAVAILABLE", "latency_ms": 1500},
            Fault(1.5, grpc.StatusCode.UNAVAILABLE, "Injected fault UNAVAILABLE for *", "before"),
        ),
        (
            {"latency_ms": 20, "method": "ListCustomJobs"},
            Fault(0.02, None, "Injected fault latency for ListCustomJobs", "before"),
        ),
        (
            {"code": "ABORTED", "message": "try again", "when": "after"},
            Fault(0.0, grpc.StatusCode.ABORTED, "try again", "after"),
        ),
    ],
)
def test_the_fault_carries_latency_code_message_and_timing(raw, expected):
    assert FaultInjector([_rule(**raw)]).fault_for("ListCustomJobs") == expected
