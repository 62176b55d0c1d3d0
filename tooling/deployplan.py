"""What a deployment of one config creates: the logic of ``vertex-dispatch deploy-plan``.

From a loaded ``Config`` it derives, with no cloud call, the topics, push subscriptions,
functions and their triggers, Cloud Scheduler jobs and service accounts with their grants that
the Terraform module in ``deploy/terraform/modules/vertex-dispatch`` creates, so a user can
review them before ``terraform apply``; and the Terraform variables that make the module follow
the config (``--tfvars``).

``FUNCTIONS`` is the same table as the module's ``local.functions``; tests/deploy/ reads the HCL
and checks that the two agree, so this plan cannot drift from what Terraform does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shared.config.model import DEFAULT_JOB_EVENTS_TOPIC_ID, Config, GcsRoute, ScheduleRoute

DEFAULT_PREFIX: Final = "vd"
RECONCILE_CRON: Final = "* * * * *"
DEAD_LETTER_ATTEMPTS: Final = 10
STORAGE_FINALIZED: Final = "google.cloud.storage.object.v1.finalized"


@dataclass(frozen=True)
class FunctionSpec:
    """One function of the deployment: its entry point, rights and trigger (see locals.tf)."""

    key: str  # the role name: resource and service account names are PREFIX-KEY
    entry_point: str
    project_roles: tuple[str, ...]
    publishes: tuple[str, ...]  # topic roles (keys of DeployPlan.topics)
    reads_datasets: bool
    acts_as_training_accounts: bool
    listens_to: str | None  # topic role of its push subscription; None: storage triggers


FUNCTIONS: Final = (
    FunctionSpec(
        "object-finalized",
        "on_object_finalized",
        ("roles/aiplatform.user", "roles/datastore.user", "roles/compute.viewer"),
        ("alerts",),
        reads_datasets=True,
        acts_as_training_accounts=True,
        listens_to=None,
    ),
    FunctionSpec(
        "request",
        "on_request",
        ("roles/aiplatform.user", "roles/datastore.user", "roles/compute.viewer"),
        ("alerts",),
        reads_datasets=False,
        acts_as_training_accounts=True,
        listens_to="requests",
    ),
    FunctionSpec(
        "job-event",
        "on_job_event",
        ("roles/aiplatform.viewer", "roles/datastore.user"),
        ("requests", "alerts", "completions"),
        reads_datasets=False,
        acts_as_training_accounts=False,
        listens_to="job-events",
    ),
    FunctionSpec(
        "reconcile",
        "reconcile",
        ("roles/aiplatform.user", "roles/datastore.user"),
        ("requests", "alerts", "completions"),
        reads_datasets=False,
        acts_as_training_accounts=False,
        listens_to="reconcile-ticks",
    ),
)


@dataclass(frozen=True)
class Grant:
    """One role on one resource (``project``, ``topic ID``, ``bucket NAME``, ``account EMAIL``)."""

    role: str
    resource: str


@dataclass(frozen=True)
class ServiceAccountPlan:
    email: str
    purpose: str
    grants: tuple[Grant, ...]


@dataclass(frozen=True)
class FunctionPlan:
    name: str
    entry_point: str
    trigger: str
    service_account: str


@dataclass(frozen=True)
class SchedulerJobPlan:
    name: str
    cron: str
    topic: str
    body: str
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeployPlan:
    """Everything the module creates for one config, plus what blocks or deserves a look."""

    project: str
    region: str
    prefix: str
    topics: Mapping[str, str]  # role -> topic id
    subscriptions: tuple[str, ...]
    functions: tuple[FunctionPlan, ...]
    scheduler_jobs: tuple[SchedulerJobPlan, ...]
    service_accounts: tuple[ServiceAccountPlan, ...]
    dataset_buckets: tuple[str, ...]
    training_service_accounts: tuple[str, ...]
    problems: tuple[str, ...]  # the module cannot deploy this config until they are fixed
    notes: tuple[str, ...]  # deployable, but worth knowing

    @property
    def deployable(self) -> bool:
        return not self.problems


def function_name(prefix: str, key: str) -> str:
    return f"{prefix}-{key}"


def object_function_name(prefix: str, bucket: str) -> str:
    """The copy of on_object_finalized that watches ``bucket`` (functions.tf names it alike)."""
    digest = hashlib.sha256(bucket.encode()).hexdigest()[:8]
    return f"{function_name(prefix, 'object-finalized')}-{digest}"


def service_account_email(project: str, account_id: str) -> str:
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def deploy_plan(config: Config, *, prefix: str = DEFAULT_PREFIX) -> DeployPlan:
    """What the Terraform module creates for ``config``; pure, no cloud call."""
    problems: list[str] = []
    topics = _topics(config, prefix, problems)
    buckets = tuple(sorted({r.bucket for r in config.routes if isinstance(r, GcsRoute)}))
    trainers = _training_service_accounts(config)
    notes = [
        f"dataset bucket {bucket} is assumed to be in {config.region}; set its location in "
        "dataset_buckets of the tfvars if it is elsewhere (the storage trigger must be there)"
        for bucket in buckets
    ]
    schedules = _schedule_jobs(config, prefix, topics, notes)
    if not trainers:
        notes.append(
            "no training service account is named (guards.service_accounts, templates' "
            "service_account): jobs run as the Vertex AI service agent, no actAs is granted"
        )
    return DeployPlan(
        project=config.project,
        region=config.region,
        prefix=prefix,
        topics=topics,
        subscriptions=_subscriptions(prefix, topics),
        functions=_functions(config, prefix, topics, buckets),
        scheduler_jobs=schedules,
        service_accounts=_service_accounts(config, prefix, topics, buckets, trainers),
        dataset_buckets=buckets,
        training_service_accounts=trainers,
        problems=tuple(problems),
        notes=tuple(notes),
    )


def _topics(config: Config, prefix: str, problems: list[str]) -> dict[str, str]:
    """Topic role -> topic id in the config's project; a topic elsewhere is a problem."""
    named = {
        "requests": config.requests_topic,
        "alerts": config.alerts_topic,
        "job-events": config.job_events_topic or DEFAULT_JOB_EVENTS_TOPIC_ID,
        "completions": config.completions_topic,
    }
    if config.requests_topic is None:
        problems.append(
            "requests_topic: required to deploy: on_request listens on it and retries are "
            "published to it; set requests_topic in the config (e.g. training-requests)"
        )
    topics: dict[str, str] = {}
    for role, topic in named.items():
        if topic is None:
            continue
        project, topic_id = _split_topic(topic, config.project)
        if project != config.project:
            problems.append(
                f"{role.replace('-', '_')}_topic: {topic} is in project {project}, but the "
                f"module creates topics in {config.project} only; use a topic of {config.project}"
            )
        topics[role] = topic_id
    topics["reconcile-ticks"] = f"{prefix}-reconcile-ticks"
    topics["dead-letter"] = f"{prefix}-dead-letter"
    return topics


def _subscriptions(prefix: str, topics: Mapping[str, str]) -> tuple[str, ...]:
    dead_letter = topics["dead-letter"]
    pushed = [
        f"{function_name(prefix, spec.key)}-push on {topics.get(spec.listens_to, '?')} "
        f"(dead letter after {DEAD_LETTER_ATTEMPTS} deliveries to {dead_letter})"
        for spec in FUNCTIONS
        if spec.listens_to is not None
    ]
    return (*pushed, f"{prefix}-dead-letter-hold on {dead_letter} (pull: read what failed)")


def _split_topic(topic: str, default_project: str) -> tuple[str, str]:
    parts = topic.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == "topics":
        return parts[1], parts[3]
    return default_project, topic


def _training_service_accounts(config: Config) -> tuple[str, ...]:
    accounts = set(config.guards.service_accounts)
    for template in config.templates.values():
        account = template.job_spec.get("serviceAccount")
        if isinstance(account, str) and account:
            accounts.add(account)
    return tuple(sorted(accounts))


def _schedule_jobs(
    config: Config, prefix: str, topics: Mapping[str, str], notes: list[str]
) -> tuple[SchedulerJobPlan, ...]:
    jobs = [
        SchedulerJobPlan(
            f"{prefix}-reconcile", RECONCILE_CRON, topics["reconcile-ticks"], '{"tick":"reconcile"}'
        )
    ]
    for route in config.routes:
        if not isinstance(route, ScheduleRoute):
            continue
        if route.cron is None:
            notes.append(
                f"route {route.name}: schedule {route.schedule} has no cron, so no Cloud "
                f"Scheduler job is created; write schedule: {{name: {route.schedule}, cron: "
                "'0 3 * * *'} or publish its ticks yourself"
            )
            continue
        jobs.append(
            SchedulerJobPlan(
                f"{prefix}-schedule-{route.schedule}",
                route.cron,
                topics.get("requests", "?"),
                f'{{"schedule":"{route.schedule}"}}',
                {"vertex_dispatch_kind": "schedule"},
            )
        )
    return tuple(jobs)


def _functions(
    config: Config, prefix: str, topics: Mapping[str, str], buckets: Sequence[str]
) -> tuple[FunctionPlan, ...]:
    plans: list[FunctionPlan] = []
    for spec in FUNCTIONS:
        account = service_account_email(config.project, function_name(prefix, spec.key))
        if spec.listens_to is None:
            plans += [
                FunctionPlan(
                    object_function_name(prefix, bucket),
                    spec.entry_point,
                    f"Eventarc {STORAGE_FINALIZED} on bucket {bucket}, retried on failure",
                    account,
                )
                for bucket in buckets
            ]
        else:
            plans.append(
                FunctionPlan(
                    function_name(prefix, spec.key),
                    spec.entry_point,
                    f"push subscription on topic {topics.get(spec.listens_to, '?')}",
                    account,
                )
            )
    return tuple(plans)


def _service_accounts(
    config: Config,
    prefix: str,
    topics: Mapping[str, str],
    buckets: Sequence[str],
    trainers: Sequence[str],
) -> tuple[ServiceAccountPlan, ...]:
    accounts = []
    for spec in FUNCTIONS:
        grants = [Grant(role, "project") for role in spec.project_roles]
        grants += [
            Grant("roles/pubsub.publisher", f"topic {topics[role]}")
            for role in spec.publishes
            if role in topics
        ]
        if spec.reads_datasets:
            grants += [Grant("roles/storage.objectViewer", f"bucket {b}") for b in buckets]
        if spec.acts_as_training_accounts:
            grants += [Grant("roles/iam.serviceAccountUser", f"account {a}") for a in trainers]
        accounts.append(
            ServiceAccountPlan(
                service_account_email(config.project, function_name(prefix, spec.key)),
                f"runs {spec.entry_point}",
                tuple(grants),
            )
        )
    accounts += [
        ServiceAccountPlan(
            service_account_email(config.project, f"{prefix}-eventarc"),
            "Eventarc storage triggers deliver as it",
            (
                Grant("roles/eventarc.eventReceiver", "project"),
                *(
                    Grant("roles/run.invoker", f"function {object_function_name(prefix, b)}")
                    for b in buckets
                ),
            ),
        ),
        ServiceAccountPlan(
            service_account_email(config.project, f"{prefix}-pusher"),
            "push subscriptions sign their requests as it",
            tuple(
                Grant("roles/run.invoker", f"function {function_name(prefix, spec.key)}")
                for spec in FUNCTIONS
                if spec.listens_to is not None
            ),
        ),
        ServiceAccountPlan(
            service_account_email(config.project, f"{prefix}-build"),
            "Cloud Build builds the functions as it",
            (
                Grant("roles/logging.logWriter", "project"),
                Grant("roles/artifactregistry.writer", "project"),
                Grant("roles/storage.objectViewer", f"bucket {config.project}-{prefix}-source"),
            ),
        ),
    ]
    return tuple(accounts)


def tfvars(plan: DeployPlan, *, source_zip: Path) -> dict[str, Any]:
    """The example root's variables for this plan; paths absolute (Terraform runs elsewhere).

    The config itself is not one of them: it ships in the bundle ``source_zip`` names
    (``deploy/bundle.py --config``), which the functions read it from.
    """
    variables: dict[str, Any] = {
        "project_id": plan.project,
        "region": plan.region,
        "name_prefix": plan.prefix,
        "source_zip": str(source_zip.resolve()),
        "requests_topic": plan.topics.get("requests"),
        "alerts_topic": plan.topics["alerts"],
        "job_events_topic": plan.topics["job-events"],
        "completions_topic": plan.topics.get("completions"),
        "dataset_buckets": {bucket: plan.region for bucket in plan.dataset_buckets},
        "schedules": [
            {"name": job.name.removeprefix(f"{plan.prefix}-schedule-"), "cron": job.cron}
            for job in plan.scheduler_jobs
            if job.attributes
        ],
        "training_service_accounts": list(plan.training_service_accounts),
    }
    return variables


def plan_text(plan: DeployPlan) -> str:
    """The plan as a reviewer reads it: one section per kind of resource."""
    lines = [f"deployment of project {plan.project}, region {plan.region}, prefix {plan.prefix}"]
    lines += ["", "topics:", *(f"  {role}: {topic}" for role, topic in plan.topics.items())]
    lines += ["", "subscriptions:", *(f"  {line}" for line in plan.subscriptions)]
    lines += ["", "functions:"]
    for function in plan.functions:
        lines += [
            f"  {function.name} ({function.entry_point})",
            f"    trigger: {function.trigger}",
            f"    runs as: {function.service_account}",
        ]
    lines += ["", "scheduler jobs:"]
    lines += [f"  {job.name}: '{job.cron}' -> topic {job.topic}" for job in plan.scheduler_jobs]
    lines += ["", "service accounts:"]
    for account in plan.service_accounts:
        lines.append(f"  {account.email} ({account.purpose})")
        lines += [f"    {grant.role} on {grant.resource}" for grant in account.grants]
    lines += ["", "also: the source bucket (the bundle, with the config in it), the (default)"]
    lines += ["      Firestore database, the APIs, the ml_job log sink to job-events, a log-based"]
    lines += ["      alert policy on ERROR lines"]
    if plan.notes:
        lines += ["", "notes:", *(f"  - {note}" for note in plan.notes)]
    if plan.problems:
        lines += ["", "problems (fix before deploying):", *(f"  - {p}" for p in plan.problems)]
    return "\n".join(lines)


def plan_document(plan: DeployPlan) -> dict[str, Any]:
    """The plan as ``deploy-plan --json`` prints it."""
    return {
        "project": plan.project,
        "region": plan.region,
        "prefix": plan.prefix,
        "deployable": plan.deployable,
        "topics": dict(plan.topics),
        "subscriptions": list(plan.subscriptions),
        "functions": [vars(function) for function in plan.functions],
        "scheduler_jobs": [
            {**vars(job), "attributes": dict(job.attributes)} for job in plan.scheduler_jobs
        ],
        "service_accounts": [
            {
                "email": account.email,
                "purpose": account.purpose,
                "grants": [vars(grant) for grant in account.grants],
            }
            for account in plan.service_accounts
        ],
        "problems": list(plan.problems),
        "notes": list(plan.notes),
    }
