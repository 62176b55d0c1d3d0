"""Linting a whole config for ``vertex-dispatch validate``: ``check_templates``.

Every template is rendered for every placement of its chain with sample parameters and checked
with ``validate_spec``; nothing live is read. Each problem is a ``TemplateProblem`` that names the
template and placement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from shared.config.model import Config, Template
from shared.errors import InvalidJobSpec
from shared.jobspec import placeholders, render_job
from shared.validation.compose import validate_spec
from shared.validation.violations import Rule, Violation

LINT_RUN_ID: Final = "r-000000000000000000000000"


@dataclass(frozen=True)
class TemplateProblem:
    """A violation found while linting: which template and which placement of its chain."""

    where: str  # e.g. templates.resnet-a100.placement[1]
    violation: Violation

    def __str__(self) -> str:
        return f"{self.where}: {self.violation}"


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
    where = f"templates.{template.name}"
    try:
        samples = {name: f"sample-{name}" for name in placeholders(template)}
    except InvalidJobSpec as error:
        return [TemplateProblem(where, Violation("jobSpec", Rule.JOB_SPEC, str(error)))]
    if not template.placements:
        return [
            TemplateProblem(
                where,
                Violation(
                    "placement",
                    Rule.PLACEMENT,
                    "the template has no placement; add persistent_resource or flex_start",
                ),
            )
        ]
    problems = []
    for index, placement in enumerate(template.placements):
        place = f"{where}.placement[{index}]"
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
            problems.append(TemplateProblem(place, Violation("jobSpec", Rule.JOB_SPEC, str(error))))
            continue
        violations = validate_spec(
            rendered.custom_job, placement, config.guards, region=rendered.region
        )
        problems.extend(TemplateProblem(place, violation) for violation in violations)
    return problems
