"""The configuration's data model: frozen, plain dataclasses, no I/O and no cloud imports.

A template's job spec stays in the REST JSON shape of ``aiplatform_v1.CustomJobSpec`` (camelCase
keys, as ``CustomJobSpec.to_json`` prints it). It becomes a proto only when a route has matched
(``shared.policy.jobspec``), because importing ``aiplatform_v1`` costs about 2 s and 110 MiB: an
event that matches nothing must not pay that. ``vertex-dispatch validate`` parses every template
eagerly.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from shared.model.job_kinds import JobKind
from shared.model.reservation_names import reservation_region


class Completion(enum.Enum):
    """When a Cloud Storage route considers a dataset complete and starts a run."""

    MARKER = "marker"  # the matched object is a marker (e.g. */_SUCCESS): its arrival completes
    MANIFEST = "manifest"  # the matched object lists the dataset's files; all must exist
    EVERY_OBJECT = "every_object"  # each matched object is a dataset of its own
    QUIET = "quiet"  # the dataset's directory has had no new object for ``quiet_for``


class AfterStart(enum.Enum):
    """What objects written under a quiet dataset after its run started do."""

    IGNORE = "ignore"  # nothing: the run has its data
    NEW_RUN = "new_run"  # they are a new version of the dataset: its own quiet period and run


DEFAULT_QUIET_FOR = timedelta(minutes=10)
MIN_QUIET_FOR = timedelta(minutes=1)
"""The shortest quiet period a route may set: an upload pausing for less (a retried shard, a
slow client) must not complete a dataset early. Databricks' file-arrival triggers have the
same floor (``waitAfterLastChangeSeconds`` >= 60)."""


QUIET_KEYS = ("dataset", "quiet_for", "min_objects", "after_start")
"""The keys of a ``gcs`` route that only ``completion: quiet`` takes (read by ``config.quiet``)."""


@dataclass(frozen=True)
class QuietRule:
    """How a ``completion: quiet`` route tells that a dataset without a marker is complete.

    ``dataset`` names the directory an object belongs to: literal text and ``{name}``
    placeholders (each one path segment's worth, no ``/``), ending in ``/``; e.g. with
    ``exports/{date}/`` the object ``exports/2026-12-01/part-00042.parquet`` belongs to the
    dataset ``exports/2026-12-01/`` and ``{date}`` is ``2026-12-01`` (``shared.decode.datasets``).
    """

    dataset: str
    quiet_for: timedelta = DEFAULT_QUIET_FOR
    min_objects: int = 1
    after_start: AfterStart = AfterStart.IGNORE


class FailureClass(enum.Enum):
    """Why a job ended without success; the retry policy decides per class."""

    CAPACITY = "capacity"  # FLEX_START wait expired, stockout, persistent resource full
    QUOTA = "quota"  # a quota ceiling: a human must raise it
    INFRASTRUCTURE = "infrastructure"  # internal error, worker restarts exhausted
    USER_CODE = "user_code"  # the training code exited non-zero
    INVALID_SPEC = "invalid_spec"  # the service rejected the job spec
    CANCELLED = "cancelled"  # someone cancelled it: never retried
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Guards:
    """Limits no request may widen. An empty tuple means "no restriction" for that guard."""

    image_prefixes: tuple[str, ...] = ()
    service_accounts: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    max_gpus_per_job: int | None = None
    max_gpu_hours_per_job: float | None = None


@dataclass(frozen=True)
class GcsRoute:
    """A dataset landing in a bucket: ``match`` is a glob on the object name."""

    name: str
    bucket: str
    match: str
    template: str
    completion: Completion = Completion.MARKER
    params: Mapping[str, str] = field(default_factory=dict)
    quiet: QuietRule | None = None  # set exactly when completion is QUIET


@dataclass(frozen=True)
class PubSubRoute:
    """A job request on the requests topic, matched on attributes and/or one body field.

    ``template`` fixed here wins; when it is None the request body names the template.
    """

    name: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    body_field: str | None = None  # dotted path into the JSON body, e.g. "kind"
    body_value: str | None = None
    template: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduleRoute:
    """A Cloud Scheduler tick naming ``schedule`` in its body or attributes."""

    name: str
    schedule: str
    template: str
    cron: str | None = None  # informational here; deploy/ and the local stack fire it
    params: Mapping[str, str] = field(default_factory=dict)


Route = GcsRoute | PubSubRoute | ScheduleRoute


@dataclass(frozen=True)
class MachineOverride:
    """Another machine for every worker pool, for a fallback onto another GPU type."""

    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0


@dataclass(frozen=True)
class PersistentResourcePlacement:
    """Run on an existing persistent resource (``jobSpec.persistentResourceId``)."""

    resource_id: str
    region: str | None = None  # None: the config's region


@dataclass(frozen=True)
class FlexStartPlacement:
    """Run under Dynamic Workload Scheduler (``scheduling.strategy = FLEX_START``)."""

    # 0 waits forever; always set explicitly (docs/architecture.md, "The Vertex AI rules")
    max_wait: timedelta
    region: str | None = None
    machine: MachineOverride | None = None


@dataclass(frozen=True)
class SpotPlacement:
    """Run on Spot VMs (``scheduling.strategy = SPOT``): cheap, and the service may preempt them."""

    region: str | None = None
    machine: MachineOverride | None = None


@dataclass(frozen=True)
class OnDemandPlacement:
    """Run on demand (``scheduling.strategy = STANDARD``): GPUs now, or a stockout."""

    region: str | None = None
    machine: MachineOverride | None = None


@dataclass(frozen=True)
class ReservationPlacement:
    """Consume a Compute Engine reservation (``machineSpec.reservationAffinity``).

    ``name`` (``projects/P/zones/Z/reservations/NAME``) asks for that reservation
    (SPECIFIC_RESERVATION); None takes any matching reservation (ANY_RESERVATION).
    """

    name: str | None = None
    region: str | None = None  # None: the reservation's zone's region, else the config's
    machine: MachineOverride | None = None

    def __post_init__(self) -> None:
        # A job consumes a reservation only in the reservation's own region: fill it in from the
        # zone (projects/P/zones/us-central1-a/... -> us-central1), so that every reader of
        # ``placement.region`` (rendering, guards, records) sees where the job will be created.
        # The loader has already refused a region that disagrees (shared.config.placements), and
        # a name that is not a reservation's full name (the region then stays the config's).
        if self.region is None and self.name is not None:
            object.__setattr__(self, "region", reservation_region(self.name))


Placement = (
    PersistentResourcePlacement
    | FlexStartPlacement
    | SpotPlacement
    | OnDemandPlacement
    | ReservationPlacement
)


@dataclass(frozen=True)
class RetryPolicy:
    """How the job-state function reacts when a job ends without success.

    ``attempts`` bounds every attempt of a run (capacity fallbacks included); ``user_failures``
    is the separate budget for retries of user-code failures.
    """

    attempts: int = 3
    backoff_base: timedelta = timedelta(seconds=60)
    backoff_cap: timedelta = timedelta(minutes=30)
    user_failures: int = 0
    retry_on: frozenset[FailureClass] = frozenset(
        {FailureClass.CAPACITY, FailureClass.INFRASTRUCTURE}
    )


class PlacementOrder(enum.Enum):
    """How a template's runs walk its placement chain (``placement_order``)."""

    AS_WRITTEN = "as_written"  # the chain in the order written
    LEARNED = "learned"  # ordered per run from the placements' history (policy.placement_order)


class TemplateForm(enum.Enum):
    """How a template's job was written, which decides how a job field is named to its user."""

    WORKER_POOLS = "worker_pools"  # the friendly form: worker_pools[i].image, ...
    GCLOUD_CONFIG = "gcloud_config"  # a gcloud --config file: gcloud_config(FILE).workerPoolSpecs
    REST_BODY = "rest_body"  # a REST body file: rest_body(FILE).jobSpec.workerPoolSpecs
    JOB_SPEC = "job_spec"  # a raw job spec (a Template built in code): job_spec.workerPoolSpecs


@dataclass(frozen=True)
class TemplateOrigin:
    """Where the user wrote a template's job, so that a problem names the key they wrote.

    ``shared.config.origins.user_path`` reads it; the loader fills it in.
    """

    path: str  # the template's own key path, e.g. templates.resnet-a100
    form: TemplateForm = TemplateForm.JOB_SPEC
    spec_path: str = ""  # key path of the job spec: ...gcloud_config(FILE), ...rest_body(F).jobSpec
    body_path: str = ""  # key path of a REST body file (displayName, labels): ...rest_body(FILE)
    written: frozenset[str] = frozenset()  # the template keys the user wrote (timeout, ...)
    # REST fields the file sets itself, as CustomJob paths: jobSpec.serviceAccount, displayName...
    file_fields: frozenset[str] = frozenset()
    # where each value of the hyperparameter_tuning / training_pipeline block was written (the
    # template's key or the file's field), by its key inside the block: max_trials,
    # model.serving_image, ... (shared.config.origins.kind_path)
    # (a tuple of (key, path) pairs, so that an origin stays hashable like its other fields)
    kind_fields: tuple[tuple[str, str], ...] = ()


class MetricGoal(enum.Enum):
    """Whether a tuning metric is to be made as large or as small as it can be."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


class ParameterType(enum.Enum):
    """How a tuning parameter's values are given (``StudySpec.ParameterSpec``'s value specs)."""

    DOUBLE = "double"  # a range [min, max] of reals
    INTEGER = "integer"  # a range [min, max] of integers
    DISCRETE = "discrete"  # a list of numbers
    CATEGORICAL = "categorical"  # a list of strings


class ParameterScale(enum.Enum):
    """How a range parameter is sampled (``ParameterSpec.ScaleType``); None in a model: unset."""

    LINEAR = "linear"
    LOG = "log"


class TuningAlgorithm(enum.Enum):
    """``StudySpec.Algorithm``; a template that sets none gets Vertex AI's default (Bayesian)."""

    GRID = "grid"  # GRID_SEARCH
    RANDOM = "random"  # RANDOM_SEARCH


@dataclass(frozen=True)
class TuningParameter:
    """One parameter a sweep varies; each trial's job gets it as ``--{parameter_id}=VALUE``."""

    parameter_id: str
    type: ParameterType
    min: float | None = None  # DOUBLE and INTEGER
    max: float | None = None
    values: tuple[float | str, ...] = ()  # DISCRETE (numbers) and CATEGORICAL (strings)
    scale: ParameterScale | None = None  # DOUBLE, INTEGER and DISCRETE


@dataclass(frozen=True)
class HyperparameterTuning:
    """A template's ``hyperparameter_tuning`` block: the template becomes a
    ``HyperparameterTuningJob`` whose trial job is the template's job spec."""

    metrics: tuple[tuple[str, MetricGoal], ...]  # (metric id, goal), in the order written
    parameters: tuple[TuningParameter, ...]
    max_trials: int
    parallel_trials: int = 1
    max_failed_trials: int = 0  # 0: Vertex AI decides how many failed trials fail the job
    algorithm: TuningAlgorithm | None = None  # None: Vertex AI's default (Bayesian optimization)


def jobs_at_once(tuning: HyperparameterTuning | None) -> int:
    """How many copies of the job that runs (a sweep's trial job) run at the same time: a sweep's
    ``parallel_trials``, else 1 (a CustomJob, a pipeline's training task).

    THE multiplier of the GPU guard: GPUs at once = GPUs per job x this (``shared.config.guards``
    at load, ``shared.validation.guards`` on the rendered job).
    """
    return 1 if tuning is None else tuning.parallel_trials


def jobs_in_all(tuning: HyperparameterTuning | None) -> int:
    """How many copies of the job that runs may run in all, each up to its timeout: a sweep's
    ``max_trials``, else 1.

    THE multiplier of the GPU-hours guard: GPU-hours = GPUs per job x timeout x this (both guards
    modules, like ``jobs_at_once``).
    """
    return 1 if tuning is None else tuning.max_trials


@dataclass(frozen=True)
class ModelUpload:
    """The model a training pipeline uploads to the Model Registry when its training succeeds.

    ``display_name`` and ``artifact_uri`` may hold ``{placeholders}`` (filled like the job's);
    ``artifact_uri`` None: the pipeline's ``model/`` directory under the job's output directory.
    """

    display_name: str
    serving_image: str  # the serving container's image URI
    artifact_uri: str | None = None


CUSTOM_TASK_DEFINITION = (
    "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
)
"""The schema of a TrainingPipeline whose training task is a CustomJobSpec, Vertex AI's "custom
training" definition: the only kind of training task a template makes (``job_wrappers`` sets it,
``kind_files`` / ``importers`` require it of a file)."""


@dataclass(frozen=True)
class TrainingPipelineSpec:
    """A template's ``training_pipeline`` block: the template becomes a ``TrainingPipeline``
    whose training task (custom_task) is the template's job spec."""

    model: ModelUpload | None = None


DISPLAY_NAME_MAX = 128
"""Vertex AI's limit on a display name, of a job of any kind and of a model: a template's literal
name over it is refused at load; a name that placeholders make longer is cut to it when
rendered (the job's and the uploaded model's alike)."""


@dataclass(frozen=True)
class Template:
    """A job to build: a job spec in REST JSON shape, with ``{param}`` placeholders; a CustomJob,
    or the trial job of a sweep, or the training task of a pipeline (``kind``)."""

    name: str
    display_name: str
    job_spec: Mapping[str, Any]  # aiplatform_v1.CustomJobSpec as REST JSON, no scheduling strategy
    placements: tuple[Placement, ...]
    params: tuple[str, ...] = ()  # all a request may fill
    labels: Mapping[str, str] = field(default_factory=dict)
    timeout: timedelta | None = None
    retry: RetryPolicy = RetryPolicy()
    # How long a job of this template may stay QUEUED or PENDING, on any placement, before the
    # reconciler cancels it as capacity; None: the placement's default (policy.watchdogs).
    max_queue: timedelta | None = None
    # The config's no_placement_alert / no_placement_give_up for this template; None: the config's.
    no_placement_alert: timedelta | None = None
    no_placement_give_up: timedelta | None = None
    # Customer-managed encryption: projects/P/locations/L/keyRings/R/cryptoKeys/K, set as the
    # job's encryptionSpec.kmsKeyName; None: Google-managed keys.
    encryption_key: str | None = None
    # How long a placement that just failed for capacity is skipped by new attempts; None: the
    # config's. timedelta(0) turns the cooldown off.
    cooldown: timedelta | None = None
    # How its runs order the chain: as written, or learned from the placements' measured
    # time-to-start (each run chooses once, at its first walk: Run.placement_order).
    placement_order: PlacementOrder = PlacementOrder.AS_WRITTEN
    # The run must have a job RUNNING this long after its trigger (docs/architecture.md,
    # "Deadlines"): the chain's waits are cut to it, and a run that cannot start by then ends
    # with a deadline_missed alert. A job request may shorten it. None: no deadline.
    start_by: timedelta | None = None
    # A sweep or a pipeline instead of a CustomJob (at most one is set); the job spec is then
    # the trial job / the training task (shared.model.job_kinds).
    hyperparameter_tuning: HyperparameterTuning | None = None
    training_pipeline: TrainingPipelineSpec | None = None
    # where the user wrote it, for messages; None for a template built in code (a raw job spec)
    origin: TemplateOrigin | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # The loader refuses both blocks naming the key; a Template built in code must not
        # silently become a sweep (``kind`` would pick the tuning block and drop the pipeline).
        if self.hyperparameter_tuning is not None and self.training_pipeline is not None:
            raise ValueError(
                f"template {self.name!r} sets both hyperparameter_tuning and training_pipeline: "
                "a job is of one kind; keep one of them"
            )

    @property
    def kind(self) -> JobKind:
        """The kind of Vertex AI job the template creates."""
        if self.hyperparameter_tuning is not None:
            return JobKind.HYPERPARAMETER_TUNING_JOB
        if self.training_pipeline is not None:
            return JobKind.TRAINING_PIPELINE
        return JobKind.CUSTOM_JOB


DEFAULT_JOB_EVENTS_TOPIC_ID = "vertex-dispatch-job-events"
DEFAULT_WATCHDOG_GRACE = timedelta(minutes=30)
DEFAULT_RECONCILE_MAX_RUNS = 2000
DEFAULT_WEBHOOK_TIMEOUT = timedelta(seconds=5)
DEFAULT_MAX_QUEUE = timedelta(hours=24)
"""How long a job may stay queued when the template sets no max_queue and its placement has no
max wait of its own (a persistent resource, or FLEX_START with max_wait 0)."""
DEFAULT_NO_PLACEMENT_ALERT = timedelta(hours=6)
DEFAULT_NO_PLACEMENT_GIVE_UP = timedelta(days=7)
DEFAULT_COOLDOWN = timedelta(minutes=30)
"""How long a placement (kind, region, machine) whose job just stocked out, ran out of its wait
or was refused for capacity is skipped by new attempts, unless it is the last one left."""
DEFAULT_DATA_TIMEOUT = timedelta(hours=24)
"""How long a run waits for its data (a manifest's missing files, a quiet dataset's
``min_objects``) before it ends with a ``data_timeout`` alert."""


class WebhookFormat(enum.Enum):
    """The JSON shape an alert webhook expects."""

    SLACK = "slack"  # Slack incoming webhook: {"text": ...}
    CHAT = "chat"  # Google Chat incoming webhook: {"text": ...}, Chat's markup


@dataclass(frozen=True)
class AlertWebhook:
    """An optional extra alert channel; its URL is a secret, so only an environment variable
    names it, never the config file."""

    url_env: str  # the environment variable holding the webhook URL
    format: WebhookFormat = WebhookFormat.SLACK
    timeout: timedelta = DEFAULT_WEBHOOK_TIMEOUT


@dataclass(frozen=True)
class Config:
    """The whole configuration, loaded and validated once per instance."""

    project: str
    region: str
    source: str  # where it was read from, for error messages
    alerts_topic: str
    requests_topic: str | None = None
    completions_topic: str | None = None
    # None only in a Config built by hand: the loader defaults it to DEFAULT_JOB_EVENTS_TOPIC_ID
    # in the config's project, where the reconciler publishes job-state hints.
    job_events_topic: str | None = None
    watchdog_grace: timedelta = DEFAULT_WATCHDOG_GRACE  # beyond a placement's max wait
    reconcile_max_runs: int = DEFAULT_RECONCILE_MAX_RUNS  # active runs one reconcile tick reads
    # A run no placement can take alerts after no_placement_alert (then at most daily) and
    # ends FAILED after no_placement_give_up; a template may set its own.
    no_placement_alert: timedelta = DEFAULT_NO_PLACEMENT_ALERT
    no_placement_give_up: timedelta = DEFAULT_NO_PLACEMENT_GIVE_UP
    cooldown: timedelta = DEFAULT_COOLDOWN  # a template may set its own; 0 turns it off
    data_timeout: timedelta = DEFAULT_DATA_TIMEOUT  # a run waiting for its data, at most
    alert_webhook: AlertWebhook | None = None
    guards: Guards = Guards()
    routes: tuple[Route, ...] = ()
    templates: Mapping[str, Template] = field(default_factory=dict)
