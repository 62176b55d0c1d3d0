"""The emulator's configuration: what the simulated world looks like when it starts (or resets).

Loaded from YAML or JSON by `load_config`; every key is optional. See example-config.yaml for a
file that uses them all. Invalid values raise ConfigError naming the key, e.g.
`capacity.us-central1.NVIDIA_H100_80GB: must be a non-negative integer, got -1`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from google.cloud import aiplatform_v1

from vertex_ai_emulator.durations import parse_duration
from vertex_ai_emulator.errors import ConfigError
from vertex_ai_emulator.joblogs import LogSettings, log_settings_from_dict
from vertex_ai_emulator.outcomes import Outcome, OutcomeRule
from vertex_ai_emulator.quota import QuotaKind
from vertex_ai_emulator.reservations import Reservation, reservation_from_dict

WHEN_FULL_CHOICES = ("queue", "reject")
QUOTA_WHEN_EXCEEDED_CHOICES = ("queue", "refuse")
SPOT_KEYS = frozenset({"preempt_after"})
DEFAULT_UNLISTED_CAPACITY = 64

TOP_LEVEL_KEYS = frozenset(
    {
        "project_numbers",
        "capacity",
        "unlisted_capacity",
        "capacity_timeline",
        "quota",
        "persistent_resources",
        "timings",
        "outcome_rules",
        "default_outcome",
        "persistent_resource_when_full",
        "time_scale",
        "faults",
        "job_logs",
        "spot",
        "reservations",
        "quota_when_exceeded",
        "offered_accelerators",
    }
)
TIMELINE_KEYS = frozenset({"at", "region", "accelerator", "set"})


@dataclass(frozen=True)
class Timings:
    """Simulated seconds that state changes take."""

    provisioning: float = 120.0  # PENDING -> RUNNING (or -> stockout) for new machines
    persistent_start: float = 5.0  # PENDING -> RUNNING on a persistent resource
    cancel: float = 5.0  # CANCELLING -> CANCELLED
    # FAILED -> its `error` set. The real service sets the error "about one minute after a job
    # ends" (Google's "Understand the custom training service" page); set 60s to see that. Off
    # by default (0: the error comes with the state), as the suites read failed jobs at the
    # instant of their end (docs/vertex-ai-emulator.md says which and why).
    error_delay: float = 0.0


@dataclass(frozen=True)
class SpotSettings:
    """How Spot (`scheduling.strategy: SPOT`) jobs are treated."""

    # Simulated seconds RUNNING after which a Spot job is preempted; None: never.
    preempt_after: float | None = None


@dataclass(frozen=True)
class CreateRefusals:
    """What CreateCustomJob refuses at once, beyond the request checks (checks.py)."""

    # `queue`: a job over its remaining GPU quota waits QUEUED (the documented behaviour);
    # `refuse`: the create is answered RESOURCE_EXHAUSTED (HTTP 429) with the quota metric.
    quota_when_exceeded: str = "queue"
    # {region: accelerator types offered there}; a region not listed offers every type.
    offered_accelerators: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class CapacityChange:
    """At `at_seconds` after start (or reset), the region's total of `accelerator` becomes
    `total`."""

    at_seconds: float
    region: str
    accelerator: str
    total: int


@dataclass(frozen=True)
class EmulatorConfig:
    """Everything the simulated world starts from; `Emulator.reset` returns to it."""

    project_numbers: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # GPUs per (region, accelerator) not listed in `capacity`: generous, so an unconfigured
    # emulator runs jobs; list a pair with 0 to simulate a stockout.
    unlisted_capacity: int = DEFAULT_UNLISTED_CAPACITY
    capacity_timeline: tuple[CapacityChange, ...] = ()
    # {kind: {region: {accelerator: limit}}} (quota.py); what is not listed has no limit.
    quota: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    # REST JSON of each resource; parsed on use so the config itself stays immutable.
    persistent_resources: tuple[str, ...] = ()
    timings: Timings = field(default_factory=Timings)
    outcome_rules: tuple[OutcomeRule, ...] = ()
    default_outcome: Outcome = field(default_factory=Outcome)
    persistent_resource_when_full: str = "queue"
    time_scale: float = 1.0
    faults: tuple[Mapping[str, Any], ...] = ()  # interpreted by the transports, not the core
    job_logs: LogSettings = field(default_factory=LogSettings)  # simulated ml_job log entries
    spot: SpotSettings = field(default_factory=SpotSettings)
    reservations: tuple[Reservation, ...] = ()  # Compute Engine reservations (reservations.py)
    refusals: CreateRefusals = field(default_factory=CreateRefusals)

    @classmethod
    def default(cls) -> EmulatorConfig:
        """No persistent resources, no rules, `unlisted_capacity` GPUs everywhere."""
        return cls()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EmulatorConfig:
        """Validate and convert a parsed YAML/JSON document."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"config: must be a mapping, got {type(raw).__name__}")
        unknown = sorted(set(raw) - TOP_LEVEL_KEYS)
        if unknown:
            raise ConfigError(
                f"config: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(TOP_LEVEL_KEYS))}"
            )
        return cls(
            project_numbers=_project_numbers(raw.get("project_numbers", {})),
            capacity=_capacity(raw.get("capacity", {})),
            unlisted_capacity=_count(
                raw.get("unlisted_capacity", DEFAULT_UNLISTED_CAPACITY), "unlisted_capacity"
            ),
            capacity_timeline=_timeline(raw.get("capacity_timeline", [])),
            quota=_quota(raw.get("quota", {})),
            persistent_resources=_persistent_resources(raw.get("persistent_resources", [])),
            timings=timings_from_dict(raw.get("timings", {})),
            outcome_rules=tuple(
                OutcomeRule.from_dict(rule, f"outcome_rules[{index}]")
                for index, rule in enumerate(_list(raw.get("outcome_rules", []), "outcome_rules"))
            ),
            default_outcome=Outcome.from_dict(
                _mapping(raw.get("default_outcome", {}), "default_outcome")
            ),
            persistent_resource_when_full=_when_full(
                raw.get("persistent_resource_when_full", "queue")
            ),
            time_scale=_time_scale(raw.get("time_scale", 1.0)),
            faults=tuple(_faults(raw.get("faults", []))),
            job_logs=log_settings_from_dict(raw.get("job_logs", {})),
            spot=spot_from_dict(raw.get("spot", {})),
            reservations=_reservations(raw.get("reservations", [])),
            refusals=refusals_from_dict(
                {
                    key: raw[key]
                    for key in ("quota_when_exceeded", "offered_accelerators")
                    if key in raw
                }
            ),
        )

    def parsed_persistent_resources(self) -> list[aiplatform_v1.PersistentResource]:
        """Fresh proto copies of the configured persistent resources."""
        return [
            aiplatform_v1.PersistentResource.from_json(text) for text in self.persistent_resources
        ]


def load_config(path: str | Path) -> EmulatorConfig:
    """Read a YAML or JSON config file (JSON is YAML, but a .json file gets JSON's errors)."""
    text = Path(path).read_text()
    try:
        raw = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: not valid YAML/JSON: {error}") from None
    return EmulatorConfig.from_dict(raw or {})


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
    return raw


def _list(raw: Any, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list, got {type(raw).__name__}")
    return raw


def _count(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ConfigError(f"{where}: must be a non-negative integer, got {raw!r}")
    return raw


def _seconds(raw: Any, where: str) -> float:
    try:
        return parse_duration(raw)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None


def _project_numbers(raw: Any) -> dict[str, str]:
    numbers = {}
    for project_id, number in _mapping(raw, "project_numbers").items():
        text = str(number)
        if not text.isdigit():
            raise ConfigError(f"project_numbers.{project_id}: must be digits, got {number!r}")
        numbers[str(project_id)] = text
    return numbers


def _accelerator(raw: Any, where: str) -> str:
    if raw not in aiplatform_v1.AcceleratorType.__members__:
        raise ConfigError(
            f"{where}: {raw!r} is not an AcceleratorType name (e.g. NVIDIA_H100_80GB)"
        )
    return raw


def _capacity(raw: Any, where_all: str = "capacity") -> dict[str, dict[str, int]]:
    capacity: dict[str, dict[str, int]] = {}
    for region, per_accelerator in _mapping(raw, where_all).items():
        where = f"{where_all}.{region}"
        capacity[region] = {
            _accelerator(accelerator, f"{where}.{accelerator}"): _count(
                count, f"{where}.{accelerator}"
            )
            for accelerator, count in _mapping(per_accelerator, where).items()
        }
    return capacity


def _quota(raw: Any) -> dict[str, dict[str, dict[str, int]]]:
    kinds = _mapping(raw, "quota")
    allowed = [kind.value for kind in QuotaKind]
    unknown = sorted(set(kinds) - set(allowed))
    if unknown:
        raise ConfigError(f"quota: unknown kind(s) {', '.join(unknown)}; allowed: {allowed}")
    return {kind: _capacity(limits, f"quota.{kind}") for kind, limits in kinds.items()}


def _timeline(raw: Any) -> tuple[CapacityChange, ...]:
    changes = []
    for index, entry in enumerate(_list(raw, "capacity_timeline")):
        where = f"capacity_timeline[{index}]"
        entry = _mapping(entry, where)
        missing = sorted(TIMELINE_KEYS - set(entry))
        unknown = sorted(set(entry) - TIMELINE_KEYS)
        if missing or unknown:
            raise ConfigError(
                f"{where}: needs exactly the keys {', '.join(sorted(TIMELINE_KEYS))} "
                f"(missing: {missing}, unknown: {unknown})"
            )
        changes.append(
            CapacityChange(
                at_seconds=_seconds(entry["at"], f"{where}.at"),
                region=str(entry["region"]),
                accelerator=_accelerator(entry["accelerator"], f"{where}.accelerator"),
                total=_count(entry["set"], f"{where}.set"),
            )
        )
    return tuple(sorted(changes, key=lambda change: change.at_seconds))


def _persistent_resources(raw: Any) -> tuple[str, ...]:
    texts = []
    for index, entry in enumerate(_list(raw, "persistent_resources")):
        where = f"persistent_resources[{index}]"
        entry = _mapping(entry, where)
        if not str(entry.get("name", "")).count("/persistentResources/"):
            raise ConfigError(
                f"{where}.name: must be projects/P/locations/L/persistentResources/ID, "
                f"got {entry.get('name')!r}"
            )
        text = json.dumps(entry)
        try:
            aiplatform_v1.PersistentResource.from_json(text)
        except Exception as error:  # json_format.ParseError and friends: report, don't crash
            raise ConfigError(f"{where}: not a PersistentResource: {error}") from None
        texts.append(text)
    return tuple(texts)


def timings_from_dict(raw: Any, base: Timings | None = None) -> Timings:
    """``base`` (the defaults when None) with the timings ``raw`` names changed."""
    entries = _mapping(raw, "timings")
    allowed = set(Timings.__dataclass_fields__)
    unknown = sorted(set(entries) - allowed)
    if unknown:
        raise ConfigError(
            f"timings: unknown key(s) {', '.join(unknown)}; allowed: {sorted(allowed)}"
        )
    changes = {key: _seconds(value, f"timings.{key}") for key, value in entries.items()}
    return replace(base or Timings(), **changes)


def _when_full(raw: Any) -> str:
    if raw not in WHEN_FULL_CHOICES:
        raise ConfigError(
            f"persistent_resource_when_full: {raw!r} is not one of {', '.join(WHEN_FULL_CHOICES)}"
        )
    return raw


def _time_scale(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
        raise ConfigError(f"time_scale: must be a non-negative number, got {raw!r}")
    return float(raw)


def _faults(raw: Any) -> list[Mapping[str, Any]]:
    faults = _list(raw, "faults")
    for index, fault in enumerate(faults):
        _mapping(fault, f"faults[{index}]")
    return faults


def spot_from_dict(raw: Any, base: SpotSettings | None = None) -> SpotSettings:
    """``base`` (the defaults when None) with the `spot` keys ``raw`` names changed;
    `preempt_after: null` means never."""
    entries = _mapping(raw, "spot")
    unknown = sorted(set(entries) - SPOT_KEYS)
    if unknown:
        raise ConfigError(
            f"spot: unknown key(s) {', '.join(unknown)}; allowed: {sorted(SPOT_KEYS)}"
        )
    settings = base or SpotSettings()
    if "preempt_after" in entries:
        value = entries["preempt_after"]
        seconds = None if value is None else _seconds(value, "spot.preempt_after")
        settings = replace(settings, preempt_after=seconds)
    return settings


def _reservations(raw: Any) -> tuple[Reservation, ...]:
    reservations: dict[str, Reservation] = {}
    for index, entry in enumerate(_list(raw, "reservations")):
        reservation = reservation_from_dict(entry, f"reservations[{index}]")
        if reservation.name in reservations:
            raise ConfigError(f"reservations[{index}].name: {reservation.name} is listed twice")
        reservations[reservation.name] = reservation
    return tuple(reservations.values())


def refusals_from_dict(raw: Any, base: CreateRefusals | None = None) -> CreateRefusals:
    """``base`` (the defaults when None) with `quota_when_exceeded` and/or
    `offered_accelerators` changed; in `offered_accelerators`, a region mapped to null offers
    every type again."""
    entries = _mapping(raw, "refusals")
    allowed = {"quota_when_exceeded", "offered_accelerators"}
    unknown = sorted(set(entries) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; allowed: {sorted(allowed)}")
    refusals = base or CreateRefusals()
    if "quota_when_exceeded" in entries:
        mode = entries["quota_when_exceeded"]
        if mode not in QUOTA_WHEN_EXCEEDED_CHOICES:
            raise ConfigError(
                f"quota_when_exceeded: {mode!r} is not one of "
                f"{', '.join(QUOTA_WHEN_EXCEEDED_CHOICES)}"
            )
        refusals = replace(refusals, quota_when_exceeded=mode)
    if "offered_accelerators" in entries:
        offered = dict(refusals.offered_accelerators)
        for region, accelerators in _mapping(
            entries["offered_accelerators"], "offered_accelerators"
        ).items():
            where = f"offered_accelerators.{region}"
            if accelerators is None:
                offered.pop(str(region), None)
                continue
            offered[str(region)] = frozenset(
                _accelerator(accelerator, f"{where}[{index}]")
                for index, accelerator in enumerate(_list(accelerators, where))
            )
        refusals = replace(refusals, offered_accelerators=offered)
    return refusals
