"""Linting a whole config for ``vertex-dispatch validate``: ``check_templates``.

Every template is rendered for every placement of its chain with sample parameters and checked
with ``validate_spec``; nothing live is read. Each problem is a ``TemplateProblem`` named at the
key the user wrote (``shared.config.origins.user_path``): ``worker_pools[0].accelerator.type``
for the friendly form, ``gcloud_config(FILE).workerPoolSpecs[0]...`` for a file. A problem that
holds on several placements of the chain is reported once, listing them.

A sweep's or a pipeline's template is rendered as that kind and checked with its block
(``tuning`` / ``pipeline``); a guard broken by the sweep's trials or the model upload is named at
the block's key where the user wrote it (``shared.config.origins.kind_path``:
``templates.resnet-sweep.hyperparameter_tuning.parallel_trials``, or the file's
``parallelTrialCount`` / ``modelToUpload...`` key). The sweep's own rules broke the load already.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from shared.config.model import Config, Template
from shared.config.origins import kind_path, origin_of, user_path
from shared.config.problems import child, item
from shared.model.errors import InvalidJobSpec
from shared.policy.jobspec import placeholders, render_job
from shared.validation.compose import validate_spec
from shared.validation.violations import Rule, Violation

LINT_RUN_ID: Final = "r-000000000000000000000000"

# REST fields of a HyperparameterTuningJob / TrainingPipeline (as violations name them) -> the
# key inside the template's block (``kind_path``).
_KIND_KEYS: Final[tuple[tuple[str, str], ...]] = (
    ("parallelTrialCount", "parallel_trials"),
    ("modelToUpload.containerSpec.imageUri", "model.serving_image"),
    ("modelToUpload.displayName", "model.display_name"),
    ("modelToUpload.artifactUri", "model.artifact_uri"),
    ("modelToUpload", "model"),
)


@dataclass(frozen=True)
class TemplateProblem:
    """A violation found while linting: where the user wrote it, and on which placements."""

    path: str  # the user's key, e.g. templates.resnet-a100.worker_pools[0].accelerator.type
    violation: Violation  # its field is the rendered job's REST path
    placements: tuple[int, ...] = ()  # the chain's placements it holds on; () for the template
    every_placement: bool = True  # holds on every placement: a property of the template

    @property
    def rule(self) -> str:
        return str(self.violation.rule)

    @property
    def message(self) -> str:
        """The violation's message, and the placements it holds on when that is not plain."""
        return self.violation.message + self.placement_note

    @property
    def placement_note(self) -> str:
        """`` (on placement[1], placement[2])`` when only some placements break the rule.

        Left out when the path already names the placement, or every placement breaks it.
        """
        if self.every_placement or not self.placements:
            return ""
        entries = [f"placement[{index}]" for index in self.placements]
        if len(entries) == 1 and f".{entries[0]}" in self.path:
            return ""
        return f" (on {', '.join(entries)})"

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}: {self.message}"


def check_templates(config: Config) -> list[TemplateProblem]:
    """Render every template for every placement with sample parameters and validate it.

    Live checks (the persistent resource's state, pools and capacity) are skipped: linting reads
    nothing from Google Cloud. A template that does not parse or render is one problem.
    """
    return [
        problem
        for template in config.templates.values()
        for problem in _check_template(config, template)
    ]


def _check_template(config: Config, template: Template) -> list[TemplateProblem]:
    try:
        samples = {name: f"sample-{name}" for name in placeholders(template)}
    except InvalidJobSpec as error:
        where = user_path(template, "jobSpec")
        return [TemplateProblem(where, Violation("jobSpec", Rule.JOB_SPEC, str(error)))]
    if not template.placements:
        where = child(origin_of(template).path, "placement")
        message = "the template has no placement; add one, e.g. flex_start, spot or on_demand"
        return [TemplateProblem(where, Violation("placement", Rule.PLACEMENT, message))]
    found: list[tuple[int, str, Violation]] = []
    for index, placement in enumerate(template.placements):
        try:
            rendered = render_job(
                template,
                samples,
                placement,
                project=config.project,
                default_region=config.region,
                run_id=LINT_RUN_ID,
                attempt=1,
            )
        except InvalidJobSpec as error:
            where = item(child(origin_of(template).path, "placement"), index)
            found.append((index, where, Violation("jobSpec", Rule.JOB_SPEC, str(error))))
            continue
        violations = validate_spec(
            rendered.custom_job,
            placement,
            config.guards,
            region=rendered.region,
            tuning=template.hyperparameter_tuning,
            pipeline=template.training_pipeline,
        )
        found += [(index, _user_path(template, v.field, index), v) for v in violations]
    return _merge(found, len(template.placements))


def _user_path(template: Template, field: str, placement: int) -> str:
    """Where the user wrote ``field``: a key of the sweep's / pipeline's block, or the job's."""
    for prefix, key in _KIND_KEYS:
        if field == prefix or field.startswith((f"{prefix}.", f"{prefix}[")):
            return kind_path(template, key)
    return user_path(template, field, placement)


def _merge(found: Iterable[tuple[int, str, Violation]], chain: int) -> list[TemplateProblem]:
    """One problem per path and violation, with the placements it holds on, in first-seen order."""
    placements: dict[tuple[str, Violation], list[int]] = {}
    for index, path, violation in found:
        placements.setdefault((path, violation), []).append(index)
    return [
        TemplateProblem(path, violation, tuple(indices), every_placement=len(indices) == chain)
        for (path, violation), indices in placements.items()
    ]
