"""Validation: every rule a job must pass before anything is created, as plain data.

The job checked is always the CustomJob that runs (a sweep's trial job, a pipeline's training
task: ``RenderedJob.custom_job``); the guards read a sweep's ``tuning`` block to count its
trials. A sweep's own rules (study, trial counts) are the config loader's
(``shared.config.tuning``): a loaded config cannot break them.

Each rule is one small function from the job (and its placement, guards and region) to the
``Violation``s it finds; ``validate_job`` composes them. A violation names the REST field path,
the rule, and what to change, and says whose move it is:

- ``invalid``: the template, the request or the guards are wrong; a human must change them;
- ``unavailable``: this placement cannot take the job (its persistent resource is missing, not
  RUNNING, full or mismatched; its named reservation is missing, not READY, of another machine or
  full); the placement chain moves on to the next placement.

The rules come from docs/architecture.md, "The Vertex AI rules" (FLEX_START, persistent resources,
machine types, labels) and from the config's guards. ``check_templates`` lints a whole config for
``vertex-dispatch validate`` without reading anything live.

One concept per module; this package re-exports their public names:

- ``violations``: ``Violation``, ``ViolationKind``, ``Rule``, ``verdict`` and ``describe``;
- ``subject``: what every rule looks at (``_Subject``), Vertex AI's defaults, the pool helpers;
- ``job_rules``: worker pools, replicas, program, machine/GPUs, hyperdisk, name, labels, placement;
- ``flex_start``: the FLEX_START rules;
- ``spot``: the Spot rules;
- ``guards``: the rules from the config's guards (a sweep's trials counted);
- ``persistent``: ``check_resource``, the persistent-resource rules read live;
- ``reservation``: ``check_reservation``, a named reservation's rules read live;
- ``compose``: ``validate_spec`` and ``validate_job``, which rules run for which placement;
- ``lint``: ``check_templates`` and ``TemplateProblem``.
"""

from shared.policy.jobspec import DEFAULT_TIMEOUT
from shared.validation.compose import (
    FLEX_START_RULES,
    SPOT_RULES,
    STATIC_RULES,
    validate_job,
    validate_spec,
)
from shared.validation.flex_start import (
    FLEX_START_MAX_TIMEOUT,
    check_flex_start_gpu,
    check_flex_start_max_wait,
    check_flex_start_same_machine,
    check_flex_start_timeout,
)
from shared.validation.guards import (
    check_guard_gpu_hours,
    check_guard_gpus,
    check_guard_image,
    check_guard_region,
    check_guard_service_account,
)
from shared.validation.job_rules import (
    LABEL_KEY,
    LABEL_VALUE,
    MAX_LABELS,
    check_display_name,
    check_encryption_key,
    check_hyperdisk,
    check_labels,
    check_machine_accelerator,
    check_placement,
    check_program,
    check_replicas,
    check_worker_pools,
)
from shared.validation.lint import LINT_RUN_ID, TemplateProblem, check_templates
from shared.validation.persistent import check_resource
from shared.validation.reservation import check_reservation
from shared.validation.spot import check_spot_gpu
from shared.validation.subject import (
    DEFAULT_BOOT_DISK_SIZE_GB,
    DEFAULT_BOOT_DISK_TYPE,
    NO_ACCELERATOR,
    StaticRule,
)
from shared.validation.violations import Rule, Violation, ViolationKind, describe, verdict

__all__ = [
    "DEFAULT_BOOT_DISK_SIZE_GB",
    "DEFAULT_BOOT_DISK_TYPE",
    "DEFAULT_TIMEOUT",
    "FLEX_START_MAX_TIMEOUT",
    "FLEX_START_RULES",
    "LABEL_KEY",
    "LABEL_VALUE",
    "LINT_RUN_ID",
    "MAX_LABELS",
    "NO_ACCELERATOR",
    "SPOT_RULES",
    "STATIC_RULES",
    "Rule",
    "StaticRule",
    "TemplateProblem",
    "Violation",
    "ViolationKind",
    "check_display_name",
    "check_encryption_key",
    "check_flex_start_gpu",
    "check_flex_start_max_wait",
    "check_flex_start_same_machine",
    "check_flex_start_timeout",
    "check_guard_gpu_hours",
    "check_guard_gpus",
    "check_guard_image",
    "check_guard_region",
    "check_guard_service_account",
    "check_hyperdisk",
    "check_labels",
    "check_machine_accelerator",
    "check_placement",
    "check_program",
    "check_replicas",
    "check_reservation",
    "check_resource",
    "check_spot_gpu",
    "check_templates",
    "check_worker_pools",
    "describe",
    "validate_job",
    "validate_spec",
    "verdict",
]
