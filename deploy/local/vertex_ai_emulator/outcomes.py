"""How jobs end: outcome rules that say how long a job runs and whether it succeeds.

A job's outcome is chosen once, when the job is created: the first rule that matches it wins, and
a rule with `times: N` is spent after N jobs. So a test can say "the first attempt fails, the
next one succeeds" by adding `{result: user_error, times: 1}` before both are created.

Rule shape (snake_case keys; a list under `outcome_rules:` in config, or one dict posted to
`Emulator.add_outcome_rule`). Every key is optional:

    labels: {team: vision}      # the job's labels include all of these
    display_name: "^resnet-"    # regular expression searched in the job's display_name
    placement: flex_start       # flex_start | persistent_resource | spot | reservation | on_demand
    job_kind: hyperparameter_tuning_job  # the kind the client created: custom_job |
                                # hyperparameter_tuning_job (its trials) | training_pipeline
                                # (its training task)
    trials: [3, 7, 12]          # only these trials (numbered from 1) of a tuning job
    result: user_error          # succeeded (default) | user_error | internal_error | stockout
    duration: 30m               # time RUNNING before it ends ("90s", "30m", "2h", or seconds)
    exit_code: 137              # the exit status a user_error reports (default 1)
    work: 6h                    # running time the training needs in all: a succeeding job runs
                                # for the work left (progress.py), not `duration`
    checkpoint_every: 30m       # with `work`: a checkpoint each time progress reaches a multiple
    times: 1                    # applies to the next N matching jobs only (default: forever)

Outcomes apply to the jobs that RUN: a CustomJob, each trial of a HyperparameterTuningJob (a trial
job carries the tuning job's labels and display name), the training task of a TrainingPipeline
(the pipeline's labels and display name). So `{trials: [3, 7, 12], result: user_error}` makes 3 of
a sweep's trials fail, and `{labels: {vd-run: r1}, result: user_error, times: 3}` its first 3.

`default_outcome` in config has the shape of a rule without the matching keys
(default: succeeded after 10 minutes). A `stockout` job never runs: it fails with code 8 at the
end of its provisioning, and holds its capacity until then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from google.cloud import aiplatform_v1

from vertex_ai_emulator.durations import parse_duration
from vertex_ai_emulator.errors import ConfigError
from vertex_ai_emulator.placement import Placement

DEFAULT_DURATION_SECONDS = 600.0
DEFAULT_EXIT_CODE = 1

MATCH_KEYS = frozenset({"labels", "display_name", "placement", "job_kind", "trials"})
JOB_KINDS = frozenset({"custom_job", "hyperparameter_tuning_job", "training_pipeline"})
OUTCOME_KEYS = frozenset({"result", "duration", "exit_code", "work", "checkpoint_every"})
RULE_KEYS = MATCH_KEYS | OUTCOME_KEYS | {"times"}


class Result(StrEnum):
    """How a job ends."""

    SUCCEEDED = "succeeded"  # JOB_STATE_SUCCEEDED
    USER_ERROR = "user_error"  # FAILED, code 3: the training code exited non-zero
    INTERNAL_ERROR = "internal_error"  # FAILED, code 13: the service failed
    STOCKOUT = "stockout"  # FAILED, code 8, while PENDING: machines could not be provisioned


@dataclass(frozen=True)
class Outcome:
    """What happens to one job once it runs."""

    result: Result = Result.SUCCEEDED
    duration_seconds: float = DEFAULT_DURATION_SECONDS
    exit_code: int = DEFAULT_EXIT_CODE
    # The training's total running time across resubmissions, and its checkpoint interval
    # (progress.py); None: no progress modelled, the job runs for `duration`.
    work_seconds: float | None = None
    checkpoint_every_seconds: float | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str = "default_outcome") -> Outcome:
        """Parse the outcome keys of a rule; raises ConfigError naming the bad key."""
        _reject_unknown_keys(raw, OUTCOME_KEYS, where)
        try:
            result = Result(raw.get("result", Result.SUCCEEDED))
        except ValueError:
            choices = ", ".join(member.value for member in Result)
            raise ConfigError(
                f"{where}.result: {raw.get('result')!r} is not one of {choices}"
            ) from None
        try:
            duration = parse_duration(raw.get("duration", DEFAULT_DURATION_SECONDS))
        except ValueError as error:
            raise ConfigError(f"{where}.duration: {error}") from None
        exit_code = raw.get("exit_code", DEFAULT_EXIT_CODE)
        if isinstance(exit_code, bool) or not isinstance(exit_code, int) or exit_code == 0:
            raise ConfigError(f"{where}.exit_code: must be a non-zero integer, got {exit_code!r}")
        work = _positive_duration(raw.get("work"), f"{where}.work")
        every = _positive_duration(raw.get("checkpoint_every"), f"{where}.checkpoint_every")
        if every is not None and work is None:
            raise ConfigError(
                f"{where}.checkpoint_every: needs work (the running time the training needs in "
                "all, e.g. work: 6h): checkpoints mark progress through that work"
            )
        return cls(
            result=result,
            duration_seconds=duration,
            exit_code=exit_code,
            work_seconds=work,
            checkpoint_every_seconds=every,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-friendly form, as accepted by `from_dict`."""
        described: dict[str, Any] = {
            "result": self.result.value,
            "duration": self.duration_seconds,
            "exit_code": self.exit_code,
        }
        if self.work_seconds is not None:
            described["work"] = self.work_seconds
        if self.checkpoint_every_seconds is not None:
            described["checkpoint_every"] = self.checkpoint_every_seconds
        return described


@dataclass(frozen=True)
class OutcomeRule:
    """Which jobs a rule applies to, what happens to them, and for how many jobs."""

    outcome: Outcome
    labels: Mapping[str, str] = field(default_factory=dict)
    display_name: re.Pattern[str] | None = None
    placement: Placement | None = None
    times: int | None = None
    job_kind: str | None = None  # one of JOB_KINDS
    trials: frozenset[int] | None = None  # trial numbers of a tuning job

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str = "outcome_rule") -> OutcomeRule:
        """Parse one rule (shape in the module docstring); raises ConfigError naming the key."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
        _reject_unknown_keys(raw, RULE_KEYS, where)
        outcome = Outcome.from_dict({k: v for k, v in raw.items() if k in OUTCOME_KEYS}, where)
        return cls(
            outcome=outcome,
            labels=_parse_labels(raw.get("labels", {}), where),
            display_name=_parse_pattern(raw.get("display_name"), where),
            placement=_parse_placement(raw.get("placement"), where),
            times=_parse_times(raw.get("times"), where),
            job_kind=_parse_job_kind(raw.get("job_kind"), where),
            trials=_parse_trials(raw.get("trials"), where),
        )

    def matches(
        self,
        job: aiplatform_v1.CustomJob,
        placement: Placement,
        job_kind: str = "custom_job",
        trial: int | None = None,
    ) -> bool:
        """Whether every condition the rule sets holds for `job`, which runs for a resource of
        `job_kind` (as trial number `trial` of a tuning job)."""
        return (
            all(job.labels.get(key) == value for key, value in self.labels.items())
            and (self.display_name is None or bool(self.display_name.search(job.display_name)))
            and (self.placement is None or self.placement == placement)
            and (self.job_kind is None or self.job_kind == job_kind)
            and (self.trials is None or (trial is not None and trial in self.trials))
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-friendly form, as accepted by `from_dict`."""
        described: dict[str, Any] = self.outcome.to_dict()
        if self.labels:
            described["labels"] = dict(self.labels)
        if self.display_name is not None:
            described["display_name"] = self.display_name.pattern
        if self.placement is not None:
            described["placement"] = self.placement.value
        if self.times is not None:
            described["times"] = self.times
        if self.job_kind is not None:
            described["job_kind"] = self.job_kind
        if self.trials is not None:
            described["trials"] = sorted(self.trials)
        return described


class OutcomeRules:
    """The ordered rules in force, with what is left of each rule's `times`."""

    def __init__(self, rules: Iterable[OutcomeRule], default: Outcome) -> None:
        self._rules = list(rules)
        self.default = default

    def add(self, rule: OutcomeRule) -> None:
        """Append `rule`: earlier rules keep precedence."""
        self._rules.append(rule)

    def clear(self) -> None:
        """Drop every rule; jobs then get the default outcome."""
        self._rules.clear()

    def choose(
        self,
        job: aiplatform_v1.CustomJob,
        placement: Placement,
        job_kind: str = "custom_job",
        trial: int | None = None,
    ) -> Outcome:
        """The outcome of the first matching rule (spending one of its `times`), else the
        default."""
        for index, rule in enumerate(self._rules):
            if rule.matches(job, placement, job_kind, trial):
                if rule.times is not None:
                    self._spend(index, rule)
                return rule.outcome
        return self.default

    def describe(self) -> list[dict[str, Any]]:
        """The rules in force, JSON-friendly, `times` being what is left."""
        return [rule.to_dict() for rule in self._rules]

    def _spend(self, index: int, rule: OutcomeRule) -> None:
        assert rule.times is not None
        if rule.times <= 1:
            del self._rules[index]
        else:
            self._rules[index] = replace(rule, times=rule.times - 1)


def _reject_unknown_keys(raw: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _positive_duration(raw: Any, where: str) -> float | None:
    if raw is None:
        return None
    try:
        seconds = parse_duration(raw)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    if seconds <= 0:
        raise ConfigError(f"{where}: must be longer than 0s, e.g. 30m, got {raw!r}")
    return seconds


def _parse_labels(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in raw.items()
    ):
        raise ConfigError(f"{where}.labels: must map label keys to string values, got {raw!r}")
    return dict(raw)


def _parse_pattern(raw: Any, where: str) -> re.Pattern[str] | None:
    if raw is None:
        return None
    try:
        return re.compile(str(raw))
    except re.error as error:
        raise ConfigError(f"{where}.display_name: invalid regular expression: {error}") from None


def _parse_placement(raw: Any, where: str) -> Placement | None:
    if raw is None:
        return None
    try:
        return Placement(raw)
    except ValueError:
        choices = ", ".join(member.value for member in Placement)
        raise ConfigError(f"{where}.placement: {raw!r} is not one of {choices}") from None


def _parse_times(raw: Any, where: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise ConfigError(f"{where}.times: must be a positive integer, got {raw!r}")
    return raw


def _parse_job_kind(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    if raw not in JOB_KINDS:
        raise ConfigError(f"{where}.job_kind: {raw!r} is not one of {', '.join(sorted(JOB_KINDS))}")
    return str(raw)


def _parse_trials(raw: Any, where: str) -> frozenset[int] | None:
    if raw is None:
        return None
    numbers = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if (
        not isinstance(numbers, list)
        or not numbers
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in numbers)
    ):
        raise ConfigError(
            f"{where}.trials: must be a trial number (1, 2, ...) or a non-empty list of them, "
            f"got {raw!r}"
        )
    return frozenset(numbers)
