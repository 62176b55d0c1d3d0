"""The `filter` of ListCustomJobs, ListHyperparameterTuningJobs and ListTrainingPipelines: the
AIP-160 subset Vertex AI documents, parsed into a predicate.

Fields: `display_name` (=, !=, and `:` which is a substring match, or a glob when the value holds
`*`), `state` (=, != with a JobState name such as JOB_STATE_RUNNING; a PipelineState name such as
PIPELINE_STATE_RUNNING for training pipelines), `create_time` and
`update_time` (=, !=, <, <=, >, >= with an RFC 3339 timestamp), `labels.KEY` (=, != a value;
`labels.KEY:*` has the key; `labels.KEY:VALUE` equals; `labels:KEY` has the key). Values may be
quoted ("..." or '...') or bare. Terms combine with AND (or plain juxtaposition), OR, NOT or a
leading `-`, and parentheses. As in AIP-160, OR binds tighter than AND: `a AND b OR c` is
`a AND (b OR c)`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import proto
from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import EmulatorError, invalid_argument

EQUALITY_OPERATORS = frozenset({"=", "!="})
ORDERING_OPERATORS = frozenset({"=", "!=", "<", "<=", ">", ">="})
HAS_OPERATOR = ":"
SUPPORTED_FIELDS = "display_name, state, create_time, update_time, labels.KEY"
TIMESTAMP_FIELDS = frozenset({"create_time", "update_time"})
KEYWORDS = frozenset({"AND", "OR", "NOT"})
# What the three List methods list; the fields a filter reads have the same names on each.
ListedJob = (
    aiplatform_v1.CustomJob | aiplatform_v1.HyperparameterTuningJob | aiplatform_v1.TrainingPipeline
)

_COMPARISONS: dict[str, Callable[[object, object], bool]] = {
    "=": lambda left, right: left == right,
    "!=": lambda left, right: left != right,
    "<": lambda left, right: left < right,
    "<=": lambda left, right: left <= right,
    ">": lambda left, right: left > right,
    ">=": lambda left, right: left >= right,
}

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_OPERATOR = re.compile(r"<=|>=|!=|=|<|>|:")
_BARE_VALUE = re.compile(r"[^\s()\"']+")
_QUOTED_VALUE = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'")


class JobPredicate(Protocol):
    """A parsed filter: tells whether a job is selected."""

    def matches(self, job: ListedJob) -> bool: ...


@dataclass(frozen=True)
class MatchAll:
    """The empty filter."""

    def matches(self, job: ListedJob) -> bool:
        return True


@dataclass(frozen=True)
class AllOf:
    terms: tuple[JobPredicate, ...]

    def matches(self, job: ListedJob) -> bool:
        return all(term.matches(job) for term in self.terms)


@dataclass(frozen=True)
class AnyOf:
    terms: tuple[JobPredicate, ...]

    def matches(self, job: ListedJob) -> bool:
        return any(term.matches(job) for term in self.terms)


@dataclass(frozen=True)
class Negation:
    term: JobPredicate

    def matches(self, job: ListedJob) -> bool:
        return not self.term.matches(job)


@dataclass(frozen=True)
class FieldTest:
    """One comparison, `field operator value`, with the value already converted."""

    field: str
    operator: str
    value: object
    read: Callable[[ListedJob], object]
    test: Callable[[object, object], bool]

    def matches(self, job: ListedJob) -> bool:
        actual = self.read(job)
        if actual is None:
            # A missing timestamp or label compares unequal to everything.
            return self.operator == "!="
        return self.test(actual, self.value)


def parse_filter(text: str, states: type[proto.Enum] = aiplatform_v1.JobState) -> JobPredicate:
    """Parse a list filter whose `state` values are names of `states` (JobState; PipelineState
    for training pipelines); raises EmulatorError(INVALID_ARGUMENT) saying what is wrong."""
    if not text.strip():
        return MatchAll()
    parser = _Parser(text, states)
    predicate = parser.parse()
    return predicate


class _Parser:
    """Recursive descent over the filter text (no separate token list: values need context)."""

    def __init__(self, text: str, states: type[proto.Enum]) -> None:
        self.text = text
        self.position = 0
        self.states = states

    def parse(self) -> JobPredicate:
        predicate = self._conjunction()
        self._skip_spaces()
        if self.position < len(self.text):
            raise self._error(f"unexpected {self.text[self.position :]!r}")
        return predicate

    def _conjunction(self) -> JobPredicate:
        terms = [self._disjunction()]
        while True:
            self._skip_spaces()
            if self._at_end() or self._peek(")"):
                break
            self._take_keyword("AND")  # optional: juxtaposition also means AND
            terms.append(self._disjunction())
        return terms[0] if len(terms) == 1 else AllOf(tuple(terms))

    def _disjunction(self) -> JobPredicate:
        terms = [self._unary()]
        while self._take_keyword("OR"):
            terms.append(self._unary())
        return terms[0] if len(terms) == 1 else AnyOf(tuple(terms))

    def _unary(self) -> JobPredicate:
        self._skip_spaces()
        if self._take_keyword("NOT"):
            return Negation(self._unary())
        if self._peek("-"):
            self.position += 1
            return Negation(self._unary())
        if self._peek("("):
            self.position += 1
            inner = self._conjunction()
            self._skip_spaces()
            if not self._peek(")"):
                raise self._error("missing ')'")
            self.position += 1
            return inner
        return self._comparison()

    def _comparison(self) -> JobPredicate:
        self._skip_spaces()
        field_match = _WORD.match(self.text, self.position)
        if not field_match or field_match.group() in KEYWORDS:
            found = self.text[self.position :] or "the end of the filter"
            raise self._error(f"expected a field name at {found!r}")
        field = field_match.group()
        self.position = field_match.end()
        self._skip_spaces()
        operator_match = _OPERATOR.match(self.text, self.position)
        if not operator_match:
            raise self._error(f"expected an operator (=, !=, <, <=, >, >=, :) after {field!r}")
        operator = operator_match.group()
        self.position = operator_match.end()
        self._skip_spaces()
        value = self._value(field)
        return _field_test(field, operator, value, self.states)

    def _value(self, field: str) -> str:
        quoted = _QUOTED_VALUE.match(self.text, self.position)
        if quoted:
            self.position = quoted.end()
            raw = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
            return re.sub(r"\\(.)", r"\1", raw)
        bare = _BARE_VALUE.match(self.text, self.position)
        if not bare:
            raise self._error(f"expected a value for {field!r}")
        self.position = bare.end()
        return bare.group()

    def _take_keyword(self, keyword: str) -> bool:
        self._skip_spaces()
        end = self.position + len(keyword)
        if self.text[self.position : end] != keyword:
            return False
        if end < len(self.text) and not (self.text[end].isspace() or self.text[end] == "("):
            return False  # a field that merely starts with the keyword, e.g. "ORDER"
        self.position = end
        return True

    def _peek(self, character: str) -> bool:
        return self.text.startswith(character, self.position)

    def _at_end(self) -> bool:
        return self.position >= len(self.text)

    def _skip_spaces(self) -> None:
        while self.position < len(self.text) and self.text[self.position].isspace():
            self.position += 1

    def _error(self, problem: str) -> EmulatorError:
        return invalid_argument(f'Invalid filter "{self.text}": {problem}.')


def _field_test(field: str, operator: str, value: str, states: type[proto.Enum]) -> FieldTest:
    if field == "display_name":
        return _display_name_test(operator, value)
    if field == "state":
        return _state_test(operator, value, states)
    if field in TIMESTAMP_FIELDS:
        return _timestamp_test(field, operator, value)
    if field == "labels":
        _require_operator(field, operator, frozenset({HAS_OPERATOR}))
        return FieldTest(field, "=", True, lambda job: value in job.labels, _COMPARISONS["="])
    if field.startswith("labels.") and len(field) > len("labels."):
        return _label_test(field.removeprefix("labels."), operator, value)
    raise invalid_argument(
        f'Invalid filter: unsupported field "{field}"; supported fields: {SUPPORTED_FIELDS}.'
    )


def _require_operator(field: str, operator: str, allowed: frozenset[str]) -> None:
    if operator not in allowed:
        raise invalid_argument(
            f'Invalid filter: operator "{operator}" is not supported for field "{field}" '
            f"(use {', '.join(sorted(allowed))})."
        )


def _display_name_test(operator: str, value: str) -> FieldTest:
    if operator == HAS_OPERATOR:
        pattern = value if "*" in value else f"*{value}*"
        return FieldTest(
            "display_name",
            operator,
            pattern,
            lambda job: job.display_name,
            lambda actual, wanted: fnmatch.fnmatchcase(str(actual), str(wanted)),
        )
    _require_operator("display_name", operator, EQUALITY_OPERATORS)
    return FieldTest(
        "display_name", operator, value, lambda job: job.display_name, _COMPARISONS[operator]
    )


def _state_test(operator: str, value: str, states: type[proto.Enum]) -> FieldTest:
    _require_operator("state", operator, EQUALITY_OPERATORS)
    if value not in states.__members__:
        if states is aiplatform_v1.PipelineState:
            what, example = "pipeline state", "PIPELINE_STATE_RUNNING"
        else:
            what, example = "job state", "JOB_STATE_RUNNING"
        raise invalid_argument(
            f'Invalid filter: "{value}" is not a {what} (use a name such as {example}).'
        )
    wanted = states[value]
    return FieldTest(
        "state", operator, wanted, lambda job: states(job.state), _COMPARISONS[operator]
    )


def _timestamp_test(field: str, operator: str, value: str) -> FieldTest:
    _require_operator(field, operator, ORDERING_OPERATORS)
    try:
        wanted = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise invalid_argument(
            f'Invalid filter: "{value}" is not an RFC 3339 timestamp for field "{field}" '
            '(e.g. "2024-05-01T00:00:00Z").'
        ) from None
    if wanted.tzinfo is None:
        raise invalid_argument(
            f'Invalid filter: timestamp "{value}" for field "{field}" needs a time zone (e.g. "Z").'
        )

    def read(job: ListedJob) -> object:
        return getattr(job, field) or None

    return FieldTest(field, operator, wanted, read, _COMPARISONS[operator])


def _label_test(key: str, operator: str, value: str) -> FieldTest:
    field = f"labels.{key}"
    if operator == HAS_OPERATOR and value == "*":
        return FieldTest(field, "=", True, lambda job: key in job.labels, _COMPARISONS["="])
    if operator == HAS_OPERATOR:
        operator = "="
    _require_operator(field, operator, EQUALITY_OPERATORS)
    return FieldTest(
        field, operator, value, lambda job: job.labels.get(key), _COMPARISONS[operator]
    )
