"""Rendering: a template, the trigger's parameters and one placement become a job to create.

The job that runs is always a ``CustomJob`` built here; a sweep template wraps it as the trial job
of a ``HyperparameterTuningJob``, a pipeline template as the training task of a
``TrainingPipeline`` (``shared.policy.job_wrappers``, imported only for those kinds).

The template's job spec (REST JSON) is parsed into ``aiplatform_v1.CustomJobSpec`` once per
template; each rendering works on a copy. Parameters fill ``{name}`` placeholders, matched by a
strict regex (never ``str.format``) in one pass, so a value is never scanned again and always lands
inside ONE string: one container argument, one environment value. Placeholders are filled only in
the fields a trigger may vary (``FILLED_FIELDS``); the image, command, machine, service account and
network stay as the template fixes them, whatever a request sends. Every rendering also provides
``run_id``, ``attempt``, ``template``, ``project``, ``region`` and ``previous_output``, which a
trigger cannot override.
A placeholder is ``{identifier}``; other braces (JSON in an argument) are left as they are.

The placement owns scheduling: ``FLEX_START`` with an explicit ``maxWaitDuration``, ``SPOT``,
``STANDARD`` (on demand), a reservation (every used pool's ``machineSpec.reservationAffinity``),
each with an optional machine override; or ``persistentResourceId`` with no strategy. A template's
``encryption_key`` becomes the job's ``encryptionSpec.kmsKeyName``. Labels carry the run id, the
attempt and the template, so a redelivered trigger can find its job (docs/dispatch-contract.md).

Resume (docs/architecture.md, "Resume"): a retry of a run whose earlier attempt's job ran is given
that attempt's output directory (``previous_output``, read from the run by the caller through
``policy.run_history.previous_output``): every program of every worker pool gets it as the env
``VERTEX_DISPATCH_PREVIOUS_OUTPUT`` and the ``{previous_output}`` placeholder is filled with it
(empty when there is none, and then no env is added). The rendering stays pure: it is passed in.

Importing this module imports the ``aiplatform_v1`` protos it uses (through ``shared.aiplatform``,
about 0.5 s instead of the whole package's 2 s): only code past a matched route may.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

from google.protobuf import json_format

from shared.aiplatform import (
    AcceleratorType,
    CustomJob,
    CustomJobSpec,
    EncryptionSpec,
    EnvVar,
    MachineSpec,
    ReservationAffinity,
    Scheduling,
    WorkerPoolSpec,
)
from shared.config.model import (
    DISPLAY_NAME_MAX,
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
    Template,
)
from shared.config.placeholders import (
    MODEL_ARTIFACT_URI_FIELD,
    MODEL_DISPLAY_NAME_FIELD,
    PREVIOUS_OUTPUT_ENV,
)
from shared.config.placements import RESERVATION_NAME_KEY
from shared.model.errors import InvalidJobSpec
from shared.model.job_kinds import JobKind

if TYPE_CHECKING:
    # Only a sweep's or a pipeline's rendering imports these protos (a CustomJob's cold start
    # must not pay for them: tests/unit/test_aiplatform_lazy.py).
    from shared.aiplatform import HyperparameterTuningJob, TrainingPipeline

PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Where placeholders are filled, as REST field paths (``[]`` = every worker pool / list item).
FILLED_FIELDS: Final[tuple[str, ...]] = (
    "displayName",
    "jobSpec.workerPoolSpecs[].containerSpec.args[]",
    "jobSpec.workerPoolSpecs[].containerSpec.env[].value",
    "jobSpec.workerPoolSpecs[].pythonPackageSpec.args[]",
    "jobSpec.workerPoolSpecs[].pythonPackageSpec.env[].value",
    "jobSpec.baseOutputDirectory.outputUriPrefix",
    "jobSpec.experiment",
    "jobSpec.experimentRun",
    MODEL_DISPLAY_NAME_FIELD,
    MODEL_ARTIFACT_URI_FIELD,
)

RUN_LABEL: Final = "vd-run"
ATTEMPT_LABEL: Final = "vd-attempt"
TEMPLATE_LABEL: Final = "vd-template"

LABEL_VALUE_MAX: Final = 63
_LABEL_UNSAFE: Final = re.compile(r"[^a-z0-9_-]")

# A worker pool runs either a container or a Python package: proto attribute -> REST key.
_PROGRAM_FIELDS: Final[Mapping[str, str]] = {
    "container_spec": "containerSpec",
    "python_package_spec": "pythonPackageSpec",
}


@dataclass(frozen=True)
class RenderedJob:
    """A job ready for its create call under ``parent``, of the template's kind.

    ``custom_job`` is always the job that actually runs, which every placement and guard rule
    checks: the CustomJob itself, or (``kind`` a sweep) one trial's job, its ``job_spec`` the
    ``trial_job_spec``, or (a pipeline) the training task, its ``job_spec`` the
    ``training_task_inputs``. ``tuning_job`` / ``training_pipeline`` is what is created for those
    kinds (``resource``).
    """

    parent: str  # projects/PROJECT/locations/REGION
    region: str
    custom_job: CustomJob
    kind: JobKind = JobKind.CUSTOM_JOB
    tuning_job: HyperparameterTuningJob | None = None
    training_pipeline: TrainingPipeline | None = None

    @property
    def resource(self) -> CustomJob | HyperparameterTuningJob | TrainingPipeline:
        """What the create call sends: ``CreateCustomJob``'s, ``CreateHyperparameterTuningJob``'s
        or ``CreateTrainingPipeline``'s message."""
        if self.kind is JobKind.HYPERPARAMETER_TUNING_JOB and self.tuning_job is not None:
            return self.tuning_job
        if self.kind is JobKind.TRAINING_PIPELINE and self.training_pipeline is not None:
            return self.training_pipeline
        return self.custom_job


# Template name -> (the template it was parsed from, its spec). Holding the template itself lets a
# reloaded config with a same-named template miss the cache instead of reusing a stale spec.
_PARSED: dict[str, tuple[Template, CustomJobSpec]] = {}


def parse_job_spec(template: Template) -> CustomJobSpec:
    """The template's job spec as a proto, parsed once per template; callers get their own copy."""
    cached = _PARSED.get(template.name)
    if cached is None or cached[0] is not template:
        cached = (template, _parse(template))
        _PARSED[template.name] = cached
    return CustomJobSpec(cached[1])


def _parse(template: Template) -> CustomJobSpec:
    try:
        payload = json.dumps(template.job_spec, default=_plain)
        # proto-plus types from_json as returning any Message; it returns the class's own.
        return cast(CustomJobSpec, CustomJobSpec.from_json(payload, ignore_unknown_fields=False))
    except (json_format.ParseError, TypeError, ValueError) as error:
        raise InvalidJobSpec(
            f"template {template.name!r}: its job spec is not a valid Vertex AI CustomJobSpec "
            f"(REST JSON, camelCase keys): {error}. Fix the field named above."
        ) from error


def _plain(value: object) -> object:
    """JSON fallback for the read-only mappings and other containers a loaded config holds."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON: use strings, numbers, lists and maps")


def placeholders(template: Template) -> frozenset[str]:
    """Every ``{name}`` the template uses in the fields rendering fills (for linting a config)."""
    spec = parse_job_spec(template)
    texts = [template.display_name, *_fillable_texts(spec)]
    pipeline = template.training_pipeline
    if pipeline is not None and pipeline.model is not None:
        texts.append(pipeline.model.display_name)
        if pipeline.model.artifact_uri is not None:
            texts.append(pipeline.model.artifact_uri)
    return frozenset(name for text in texts for name in PLACEHOLDER.findall(text))


def _fillable_texts(spec: CustomJobSpec) -> list[str]:
    texts = [
        spec.base_output_directory.output_uri_prefix,
        spec.experiment,
        spec.experiment_run,
    ]
    for pool in spec.worker_pool_specs:
        for attribute in _PROGRAM_FIELDS:
            program = getattr(pool, attribute)
            texts.extend(program.args)
            texts.extend(variable.value for variable in program.env)
    return texts


def fill(text: str, params: Mapping[str, str], *, template: str, field: str) -> str:
    """Replace each ``{name}`` in ``text`` by ``params[name]`` in one pass; values stay verbatim."""

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            known = ", ".join(sorted(params)) or "none"
            raise InvalidJobSpec(
                f"template {template!r}, {field}: placeholder {{{name}}} names no parameter "
                f"(known: {known}). Declare {name!r} in the template's params or the route's "
                f"params, or remove the placeholder."
            )
        return params[name]

    return PLACEHOLDER.sub(value_of, text)


def render_job(
    template: Template,
    params: Mapping[str, str],
    placement: Placement,
    *,
    project: str,
    default_region: str,
    run_id: str,
    attempt: int,
    previous_output: str | None = None,
) -> RenderedJob:
    """Build the job one attempt of a run would create on ``placement``: the CustomJob that
    runs, wrapped as a sweep or a pipeline when the template is of that kind (``kind``).
    ``previous_output``: the output directory this attempt resumes from (see the module
    docstring), None on a first attempt or when no earlier attempt's job ran.

    Raises InvalidJobSpec when the template does not parse, a placeholder names no parameter, or
    a machine override names an unknown accelerator. Rule checks are ``shared.validation``'s.
    """
    region = placement.region or default_region
    # Built-in parameters win over a trigger's: a request cannot forge its run id or attempt.
    values = {
        **params,
        "run_id": run_id,
        "attempt": str(attempt),
        "template": template.name,
        "project": project,
        "region": region,
        "previous_output": previous_output or "",
    }
    spec = parse_job_spec(template)
    _fill_spec(spec, values, template=template.name)
    if previous_output:
        _set_previous_output(spec, previous_output)
    if template.timeout is not None:
        spec.scheduling.timeout = template.timeout
    _apply_placement(spec, placement, template=template.name)
    display_name = fill(template.display_name, values, template=template.name, field="displayName")
    job = CustomJob(
        display_name=display_name[:DISPLAY_NAME_MAX],
        job_spec=spec,
        labels=job_labels(template, run_id=run_id, attempt=attempt),
    )
    if template.encryption_key is not None:
        # Only {region} can be in it (shared.config.encryption): the key of this job's region.
        key = fill(template.encryption_key, values, template=template.name, field="encryptionSpec")
        job.encryption_spec = EncryptionSpec(kms_key_name=key)
    parent = f"projects/{project}/locations/{region}"
    if template.kind is JobKind.CUSTOM_JOB:
        return RenderedJob(parent=parent, region=region, custom_job=job)
    return _wrapped(template, job, values, parent=parent, region=region)


def _wrapped(
    template: Template, job: CustomJob, values: Mapping[str, str], *, parent: str, region: str
) -> RenderedJob:
    """``job`` as the trial job of the template's sweep or the training task of its pipeline."""
    # Imported here: only a sweep's or a pipeline's rendering loads the tuning / pipeline protos.
    from shared.policy import job_wrappers

    if template.hyperparameter_tuning is not None:
        return RenderedJob(
            parent=parent,
            region=region,
            custom_job=job,
            kind=JobKind.HYPERPARAMETER_TUNING_JOB,
            tuning_job=job_wrappers.tuning_job(
                job, template.hyperparameter_tuning, template=template.name
            ),
        )
    assert template.training_pipeline is not None  # Template.kind said so

    def filled(text: str, field: str) -> str:
        return fill(text, values, template=template.name, field=field)

    return RenderedJob(
        parent=parent,
        region=region,
        custom_job=job,
        kind=JobKind.TRAINING_PIPELINE,
        training_pipeline=job_wrappers.training_pipeline(
            job, template.training_pipeline, fill=filled, template=template.name
        ),
    )


def _fill_spec(spec: CustomJobSpec, values: Mapping[str, str], *, template: str) -> None:
    def filled(text: str, field: str) -> str:
        return fill(text, values, template=template, field=field)

    # Only fields already present are touched: writing into an absent sub-message would create
    # it, and for a worker pool's program (a oneof) would switch python package to container.
    if "base_output_directory" in spec:
        output = spec.base_output_directory
        output.output_uri_prefix = filled(
            output.output_uri_prefix, "jobSpec.baseOutputDirectory.outputUriPrefix"
        )
    if "experiment" in spec:
        spec.experiment = filled(spec.experiment, "jobSpec.experiment")
    if "experiment_run" in spec:
        spec.experiment_run = filled(spec.experiment_run, "jobSpec.experimentRun")
    for index, pool in enumerate(spec.worker_pool_specs):
        for attribute, key in _PROGRAM_FIELDS.items():
            if attribute not in pool:
                continue
            program = getattr(pool, attribute)
            prefix = f"jobSpec.workerPoolSpecs[{index}].{key}"
            program.args = [
                filled(arg, f"{prefix}.args[{position}]")
                for position, arg in enumerate(program.args)
            ]
            for position, variable in enumerate(program.env):
                variable.value = filled(variable.value, f"{prefix}.env[{position}].value")


def _set_previous_output(spec: CustomJobSpec, previous_output: str) -> None:
    """``VERTEX_DISPATCH_PREVIOUS_OUTPUT`` on every program that runs, replacing a value the
    template wrote under that name (the run's history decides it, not a template or request)."""
    for pool in spec.worker_pool_specs:
        for attribute in _PROGRAM_FIELDS:
            if attribute not in pool:
                continue
            program = getattr(pool, attribute)
            kept = [variable for variable in program.env if variable.name != PREVIOUS_OUTPUT_ENV]
            program.env = [*kept, EnvVar(name=PREVIOUS_OUTPUT_ENV, value=previous_output)]


def _apply_placement(spec: CustomJobSpec, placement: Placement, *, template: str) -> None:
    """Set what ``placement`` owns on ``spec``, clearing what another kind would have set."""
    if isinstance(placement, PersistentResourcePlacement):
        spec.persistent_resource_id = placement.resource_id
        # A persistent resource runs the job on machines that are already up: no DWS wait.
        if "scheduling" in spec:
            spec.scheduling.strategy = Scheduling.Strategy.STRATEGY_UNSPECIFIED
            del spec.scheduling.max_wait_duration
        return
    spec.persistent_resource_id = ""
    if isinstance(placement, FlexStartPlacement):
        spec.scheduling.strategy = Scheduling.Strategy.FLEX_START
        spec.scheduling.max_wait_duration = placement.max_wait
    elif "scheduling" in spec or _STRATEGIES[type(placement)]:
        # maxWaitDuration is a FLEX_START setting: no other strategy waits in a queue for it.
        spec.scheduling.strategy = _STRATEGIES[type(placement)]
        del spec.scheduling.max_wait_duration
    if placement.machine is not None:
        machine = _machine_spec(placement.machine, template=template)
        for pool in spec.worker_pool_specs:
            if not is_skipped_pool(pool):
                pool.machine_spec = MachineSpec(machine)
    if isinstance(placement, ReservationPlacement):
        affinity = reservation_affinity(placement)
        for pool in spec.worker_pool_specs:
            if not is_skipped_pool(pool):
                pool.machine_spec.reservation_affinity = ReservationAffinity(affinity)


# A reservation's job keeps the strategy unset: Vertex AI's Scheduling.Strategy reference says
# STRATEGY_UNSPECIFIED "will default to STANDARD", and the Vertex AI pages that consume a
# reservation show a job with reservationAffinity and no scheduling.strategy. SPOT is never right
# there (Spot VMs are not what a reservation holds), nor FLEX_START (DWS provisions its own VMs).
_STRATEGIES: Final[Mapping[type, Scheduling.Strategy]] = {
    SpotPlacement: Scheduling.Strategy.SPOT,
    OnDemandPlacement: Scheduling.Strategy.STANDARD,
    ReservationPlacement: Scheduling.Strategy.STRATEGY_UNSPECIFIED,
}


def reservation_affinity(placement: ReservationPlacement) -> ReservationAffinity:
    """SPECIFIC_RESERVATION of the named reservation, or ANY_RESERVATION without a name."""
    if placement.name is None:
        return ReservationAffinity(
            reservation_affinity_type=ReservationAffinity.Type.ANY_RESERVATION
        )
    return ReservationAffinity(
        reservation_affinity_type=ReservationAffinity.Type.SPECIFIC_RESERVATION,
        key=RESERVATION_NAME_KEY,
        values=[placement.name],
    )


def is_skipped_pool(pool: WorkerPoolSpec) -> bool:
    """Vertex lets a job leave a later pool empty (``{}``) to skip it: it runs nothing."""
    return pool == WorkerPoolSpec()


def _machine_spec(override: MachineOverride, *, template: str) -> MachineSpec:
    if override.accelerator_type is None:
        return MachineSpec(machine_type=override.machine_type)
    try:
        accelerator = AcceleratorType[override.accelerator_type]
    except KeyError:
        raise InvalidJobSpec(
            f"template {template!r}: a placement's machine override names accelerator "
            f"{override.accelerator_type!r}, which Vertex AI does not know. Use one of the "
            f"AcceleratorType names, e.g. NVIDIA_H100_80GB."
        ) from None
    return MachineSpec(
        machine_type=override.machine_type,
        accelerator_type=accelerator,
        accelerator_count=override.accelerator_count,
    )


def job_labels(template: Template, *, run_id: str, attempt: int) -> dict[str, str]:
    """The template's labels plus the three that tie a job to its run (ours win a clash)."""
    return {
        **template.labels,
        RUN_LABEL: run_id,
        ATTEMPT_LABEL: str(attempt),
        TEMPLATE_LABEL: label_safe(template.name),
    }


def label_safe(text: str) -> str:
    """``text`` as a label value: lowercase, ``[a-z0-9_-]`` only, at most 63 characters."""
    return _LABEL_UNSAFE.sub("-", text.lower())[:LABEL_VALUE_MAX]


def job_to_json(job: CustomJob | HyperparameterTuningJob | TrainingPipeline) -> str:
    """A job of any kind as the REST API shows it: camelCase keys, enum names, no default
    fields (a pipeline's ``trainingTaskInputs`` as the JSON object it is)."""
    return type(job).to_json(
        job,
        use_integers_for_enums=False,
        always_print_fields_with_no_presence=False,
        indent=2,
    )
