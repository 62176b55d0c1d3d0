"""The Vertex AI gateway: the few calls dispatch makes, with errors translated at this boundary.

Every call picks the regional client (``shared.adapters.clients``) from the resource name it is
given, so callers pass names only. Errors leave this module as members of the project's error tree:

============================================  ====================================================
service answer                                raised here
============================================  ====================================================
UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL,     ``BackendUnavailable`` (transient: the event
ABORTED, UNKNOWN, CANCELLED, DATA_LOSS,       retries). After a *create* the job may exist
any 5xx, a network or token-transport error   anyway: the ledger's intent and the job's labels
                                              let the redelivery find it (``find_jobs_by_label``).
INVALID_ARGUMENT, FAILED_PRECONDITION,        ``VertexRejected`` (an ``InvalidJobSpec``) carrying
OUT_OF_RANGE, ALREADY_EXISTS, UNIMPLEMENTED,  the service's own message. Two refusals of a
other 4xx, a malformed name or label filter   create belong to the placement, not the job, and
                                              are subclasses of their own: a GPU "not supported
                                              in location" (``AcceleratorNotOffered``) and a
                                              persistent resource the service will not run the
                                              job on (``PersistentResourceRefused``: not
                                              RUNNING, no matching pool, another CMEK key).
PERMISSION_DENIED, UNAUTHENTICATED, missing   ``VertexPermissionDenied``, naming the permission
credentials                                   and the role to grant (``roles/aiplatform.user``).
NOT_FOUND                                     ``get_persistent_resource`` returns None;
                                              otherwise ``VertexNotFound``.
RESOURCE_EXHAUSTED (HTTP 429)                 ``VertexThrottled`` (transient): on any call but
                                              a create, and on a create refused by a request-rate
                                              limit (per minute/second, or reason
                                              ``RATE_LIMIT_EXCEEDED``); any other quota on a
                                              create: ``QuotaExceeded`` (permanent).
============================================  ====================================================

A read or a cancel uses no resource quota: its RESOURCE_EXHAUSTED can only be the request quota
per minute and region (the reconciler's ListCustomJobs, the hints' GetCustomJob, the watchdog's
CancelCustomJob all draw on it), so it is ``VertexThrottled`` whatever the message says. Callers
that make many calls back off on it (``handlers.reconcile``) rather than retry at once.

Why a quota on create is permanent: a resource quota (GPUs, CPUs, preemptible GPUs for
FLEX_START) is a ceiling only a human lifts, in hours or days, not within the platform's redelivery
window; treating it as transient would turn one request into a storm of refused creates and hide
the problem. Recorded, alerted and classified as ``FailureClass.QUOTA``, it reaches someone who can
raise it, and the retry policy (not the delivery loop) decides whether to try again later. A
refused create has created nothing, so nothing is left to clean up.

``CreateCustomJob`` is never retried here (it takes no request id, so a blind retry can start a
second job); reads and cancels, which are idempotent, are retried briefly on transient errors.

Every kind of job a template makes (``shared.model.job_kinds``) goes through the kind-generic
functions: ``create_job``, ``get_job``, ``list_jobs``, ``find_jobs_by_label``, ``cancel_job`` and
``job_result``. They pick the service and the method by the message's type (a create) or the
name's collection (everything else): CustomJobs and HyperparameterTuningJobs are JobService's,
TrainingPipelines PipelineService's. What they return is the job's VIEW
(``shared.policy.job_views.view_of``): a ``CustomJob`` carrying the job's own name, state, labels,
times and the spec of what runs, so nothing past this module branches on the kind. Errors are
translated the same way for every kind (a quota refusal of any create is ``QuotaExceeded``, a
placement's refusal is read from the trial job spec / the training task). A CustomJob-only
process never loads the tuning or pipeline protos: they are looked up only when a job of that
kind is met.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import google.auth.exceptions
import requests
import urllib3
from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry

from shared.adapters import clients
from shared.aiplatform import aiplatform_v1
from shared.model.errors import (
    BackendUnavailable,
    InvalidJobSpec,
    PermanentError,
    PermissionMissing,
)
from shared.model.job_kinds import JobKind, kind_of_job_name
from shared.policy.job_views import AnyJob, result_of, view_of

CREATE_TIMEOUT_SECONDS = 60.0
READ_TIMEOUT_SECONDS = 30.0
LIST_PAGE_SIZE = 100
REQUIRED_ROLE = "roles/aiplatform.user"


class OutcomeUnknown(BackendUnavailable):
    """A call failed without saying whether the service carried it out.

    A timeout, INTERNAL or UNKNOWN answer, or a connection cut after the request was sent: for a
    create, the job may exist or may yet appear. UNAVAILABLE and rate limits are plain
    ``BackendUnavailable``: the service says it did not take the request.
    """


class VertexRejected(InvalidJobSpec):
    """Vertex AI refused the request as invalid; the message is the service's own."""

    headline = "Vertex AI refused the job as invalid"


class PlacementRefused(VertexRejected):
    """Vertex AI refused a create for a reason that belongs to the placement, not the job: the
    next placement of the chain may take the same job (``handlers.submission`` moves on).

    ``lasting``: the placement can never take this job as written (a GPU the region does not
    offer, a persistent resource of another machine, network or key), as opposed to one that may
    take it later (a resource that is not RUNNING, or not there yet)."""

    headline = "Vertex AI refused the job on this placement"
    lasting: ClassVar[bool] = False


class AcceleratorNotOffered(PlacementRefused):
    """The job's GPU type is not offered in the placement's region ("Accelerator type A is not
    supported in location R.")."""

    headline = "the GPU type is not offered in this region"
    lasting = True


class PersistentResourceRefused(PlacementRefused):
    """The persistent resource cannot run the job now: it is not RUNNING, or does not exist."""

    headline = "the persistent resource cannot run the job"


class PersistentResourceMismatch(PersistentResourceRefused):
    """The persistent resource can never run the job as written: no resource pool matches the
    job's machine and disk, a pool is smaller than the job, or its network or encryption key is
    not the job's."""

    headline = "the persistent resource does not match the job"
    lasting = True


class VertexPermissionDenied(PermissionMissing):
    """The function's identity may not make this call; the message names the role to grant."""

    headline = "Vertex AI denied the function permission"


class VertexNotFound(PermanentError):
    """The named job (or its location) does not exist."""

    headline = "Vertex AI did not find what the job names"


class VertexThrottled(BackendUnavailable):
    """Vertex AI refused the call for a request quota (RESOURCE_EXHAUSTED, HTTP 429): it did
    nothing; try again later, and make fewer calls meanwhile (never retried here)."""


class QuotaExceeded(PermanentError):
    """A Vertex AI resource quota refused the job; someone must raise it or ask for less."""

    headline = "a Vertex AI quota refused the job"


class _CallFailure(enum.Enum):
    """What a failed call means, before it becomes an exception of the error tree."""

    TRANSIENT = "transient"
    REJECTED = "rejected"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    EXHAUSTED = "exhausted"  # quota or rate limit: the message tells which


_FAILURE_BY_GRPC_STATUS: dict[str, _CallFailure] = {
    "CANCELLED": _CallFailure.TRANSIENT,
    "UNKNOWN": _CallFailure.TRANSIENT,
    "INVALID_ARGUMENT": _CallFailure.REJECTED,
    "DEADLINE_EXCEEDED": _CallFailure.TRANSIENT,
    "NOT_FOUND": _CallFailure.NOT_FOUND,
    "ALREADY_EXISTS": _CallFailure.REJECTED,
    "PERMISSION_DENIED": _CallFailure.PERMISSION,
    "RESOURCE_EXHAUSTED": _CallFailure.EXHAUSTED,
    "FAILED_PRECONDITION": _CallFailure.REJECTED,
    "ABORTED": _CallFailure.TRANSIENT,
    "OUT_OF_RANGE": _CallFailure.REJECTED,
    "UNIMPLEMENTED": _CallFailure.REJECTED,
    "INTERNAL": _CallFailure.TRANSIENT,
    "UNAVAILABLE": _CallFailure.TRANSIENT,
    "DATA_LOSS": _CallFailure.TRANSIENT,
    "UNAUTHENTICATED": _CallFailure.PERMISSION,
}

# The REST transport raises by HTTP status only (400 is a bare BadRequest, 429 TooManyRequests).
_FAILURE_BY_HTTP_STATUS: dict[int, _CallFailure] = {
    400: _CallFailure.REJECTED,
    401: _CallFailure.PERMISSION,
    403: _CallFailure.PERMISSION,
    404: _CallFailure.NOT_FOUND,
    409: _CallFailure.TRANSIENT,  # ABORTED; we never name jobs, so never ALREADY_EXISTS
    429: _CallFailure.EXHAUSTED,
    499: _CallFailure.TRANSIENT,
    501: _CallFailure.REJECTED,
}

_PERMISSION_BY_METHOD: dict[str, str] = {
    "CreateCustomJob": "aiplatform.customJobs.create",
    "GetCustomJob": "aiplatform.customJobs.get",
    "ListCustomJobs": "aiplatform.customJobs.list",
    "CancelCustomJob": "aiplatform.customJobs.cancel",
    "CreateHyperparameterTuningJob": "aiplatform.hyperparameterTuningJobs.create",
    "GetHyperparameterTuningJob": "aiplatform.hyperparameterTuningJobs.get",
    "ListHyperparameterTuningJobs": "aiplatform.hyperparameterTuningJobs.list",
    "CancelHyperparameterTuningJob": "aiplatform.hyperparameterTuningJobs.cancel",
    "CreateTrainingPipeline": "aiplatform.trainingPipelines.create",
    "GetTrainingPipeline": "aiplatform.trainingPipelines.get",
    "ListTrainingPipelines": "aiplatform.trainingPipelines.list",
    "CancelTrainingPipeline": "aiplatform.trainingPipelines.cancel",
    "GetPersistentResource": "aiplatform.persistentResources.get",
}
# The creates: a quota refusal of one is a resource quota (permanent), of any other call a
# request quota (``VertexThrottled``).
_CREATE_METHODS = frozenset(
    {"CreateCustomJob", "CreateHyperparameterTuningJob", "CreateTrainingPipeline"}
)

_NOT_OFFERED_MESSAGE = re.compile(
    r"(accelerator|machine) type \S+ is not supported in (location|region|zone)", re.IGNORECASE
)
# A persistent resource that cannot run jobs now: "Persistent resource R is in state STOPPING;
# it must be RUNNING to run jobs." / "Persistent resource R does not exist".
_RESOURCE_NOT_RUNNING = re.compile(
    r"persistent ?resource \S+ (?:is in state \w+|does not exist|was not found)", re.IGNORECASE
)
# One that never will, as the job is written: "No resource pool of persistent resource R matches
# machine_spec and disk_spec exactly ...", "Requested 4 replicas of resource pool P, which has at
# most 2", "The CustomJob's encryption_spec.kms_key_name (...) must be the same as the
# encryption_spec.kms_key_name of persistent resource R (...)", and the network's twin.
_RESOURCE_MISMATCH = re.compile(
    r"no resource pool of persistent ?resource"
    r"|requested \d+ replicas of resource pool \S+, which has at most"
    r"|(?:kms_key_name|network)\b.{0,200}\bof persistent ?resource",
    re.IGNORECASE | re.DOTALL,
)
_RATE_LIMIT_MESSAGE = re.compile(r"per (minute|second)|rate limit", re.IGNORECASE)
_RATE_LIMIT_REASON = "RATE_LIMIT_EXCEEDED"
_LOCATION_OF_NAME = re.compile(r"^projects/[^/]+/locations/([a-z0-9-]+)(?:/|$)")
_LABEL_PART = re.compile(r"^[a-z0-9_-]{1,63}$")
_TRANSIENT_EXCEPTIONS = (
    api_exceptions.ServiceUnavailable,
    api_exceptions.DeadlineExceeded,
    api_exceptions.InternalServerError,
    api_exceptions.Aborted,
    api_exceptions.Unknown,
    requests.exceptions.ConnectionError,
)
# Answers after which the request may have been carried out (HTTP 500 and 504 on REST; the gRPC
# classes below subclass these).
_OUTCOME_UNKNOWN_EXCEPTIONS = (
    api_exceptions.GatewayTimeout,  # DEADLINE_EXCEEDED
    api_exceptions.InternalServerError,  # INTERNAL
    api_exceptions.Unknown,
    api_exceptions.DataLoss,
)
_READ_RETRY = api_retry.Retry(
    predicate=api_retry.if_exception_type(*_TRANSIENT_EXCEPTIONS),
    initial=0.25,
    maximum=4.0,
    multiplier=2.0,
    timeout=READ_TIMEOUT_SECONDS,
)


def create_custom_job(parent: str, job: aiplatform_v1.CustomJob) -> aiplatform_v1.CustomJob:
    """Create ``job`` under ``parent`` (``projects/P/locations/R``) once, without retrying.

    A refusal that belongs to the placement raises a ``PlacementRefused`` (``_placement_refusal``);
    any other refusal of the job, ``VertexRejected``."""
    client = clients.job_service_client(region_of(parent))
    try:
        with _translated_errors("CreateCustomJob", parent):
            return client.create_custom_job(
                parent=parent, custom_job=job, retry=None, timeout=CREATE_TIMEOUT_SECONDS
            )
    except VertexRejected as rejected:
        cause = rejected.__cause__
        if not isinstance(cause, api_exceptions.GoogleAPICallError):
            raise
        refused = _placement_refusal(
            cause,
            f"Vertex AI CreateCustomJob on {parent}",
            on_persistent_resource=bool(job.job_spec.persistent_resource_id),
        )
        if refused is None:
            raise
        raise refused from cause


def get_custom_job(name: str) -> aiplatform_v1.CustomJob:
    """The job named ``name``; ``VertexNotFound`` when there is none."""
    client = clients.job_service_client(region_of(name))
    with _translated_errors("GetCustomJob", name):
        return client.get_custom_job(name=name, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS)


def list_custom_jobs(
    parent: str, filter: str = "", page_size: int = LIST_PAGE_SIZE
) -> Iterator[list[aiplatform_v1.CustomJob]]:
    """The jobs under ``parent`` matching ``filter``, one list per page (one List call each)."""
    client = clients.job_service_client(region_of(parent))
    request = aiplatform_v1.ListCustomJobsRequest(parent=parent, filter=filter, page_size=page_size)
    with _translated_errors("ListCustomJobs", parent):
        pager = client.list_custom_jobs(
            request=request, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS
        )
        for page in pager.pages:
            yield list(page.custom_jobs)


@dataclass(frozen=True)
class _KindCalls:
    """How one kind of job is created, read, listed and cancelled: its service's client and the
    client's methods, by name (the RPC name is ``method`` with the kind's resource type)."""

    client: Callable[[str], Any]  # region -> the service's client
    snake: str  # the resource in the client's method names: custom_job, training_pipeline, ...
    listed: str  # the List response's repeated field: custom_jobs, ...

    def rpc(self, verb: str, kind: JobKind) -> str:
        """The RPC's name, e.g. ``ListHyperparameterTuningJobs``, for errors and permissions."""
        return f"{verb}{kind.resource}{'s' if verb == 'List' else ''}"


_CALLS: dict[JobKind, _KindCalls] = {
    JobKind.CUSTOM_JOB: _KindCalls(clients.job_service_client, "custom_job", "custom_jobs"),
    JobKind.HYPERPARAMETER_TUNING_JOB: _KindCalls(
        clients.job_service_client, "hyperparameter_tuning_job", "hyperparameter_tuning_jobs"
    ),
    JobKind.TRAINING_PIPELINE: _KindCalls(
        clients.pipeline_service_client, "training_pipeline", "training_pipelines"
    ),
}


def create_job(parent: str, job: AnyJob) -> aiplatform_v1.CustomJob:
    """Create ``job`` (a CustomJob, HyperparameterTuningJob or TrainingPipeline) under ``parent``
    once, without retrying, and return the created job's view.

    Errors as ``create_custom_job``'s; a placement's refusal is read against the job that runs
    (the trial job spec, the training task): a persistent resource's refusal only when that job
    names one."""
    kind = kind_of_job(job)
    if kind is JobKind.CUSTOM_JOB:
        assert isinstance(job, aiplatform_v1.CustomJob)
        return create_custom_job(parent, job)
    calls = _CALLS[kind]
    method = calls.rpc("Create", kind)
    client = calls.client(region_of(parent))
    create = getattr(client, f"create_{calls.snake}")
    try:
        with _translated_errors(method, parent):
            created = create(
                **{"parent": parent, calls.snake: job},
                retry=None,
                timeout=CREATE_TIMEOUT_SECONDS,
            )
    except VertexRejected as rejected:
        cause = rejected.__cause__
        if not isinstance(cause, api_exceptions.GoogleAPICallError):
            raise
        refused = _placement_refusal(
            cause,
            f"Vertex AI {method} on {parent}",
            on_persistent_resource=bool(view_of(job).job_spec.persistent_resource_id),
        )
        if refused is None:
            raise
        raise refused from cause
    return view_of(created)


def kind_of_job(job: AnyJob) -> JobKind:
    """The kind of a job message (by its type; the tuning and pipeline protos are looked up only
    when the message is not a CustomJob, so a CustomJob never loads them)."""
    if isinstance(job, aiplatform_v1.CustomJob):
        return JobKind.CUSTOM_JOB
    if isinstance(job, aiplatform_v1.HyperparameterTuningJob):
        return JobKind.HYPERPARAMETER_TUNING_JOB
    if isinstance(job, aiplatform_v1.TrainingPipeline):
        return JobKind.TRAINING_PIPELINE
    raise VertexRejected(
        f"{type(job).__name__} is not a job Vertex AI dispatch creates: render a CustomJob, "
        "HyperparameterTuningJob or TrainingPipeline"
    )


def get_job(name: str) -> aiplatform_v1.CustomJob:
    """The view of the job named ``name``, of the kind its collection names; ``VertexNotFound``
    when there is none."""
    return view_of(_get_raw(name))


def job_result(name: str) -> dict[str, Any] | None:
    """What the job ``name`` produced (``job_views.result_of``: a sweep's best trial, a
    pipeline's uploaded model), read now; None for a CustomJob, without a call."""
    if _kind_of_name(name) is JobKind.CUSTOM_JOB:
        return None
    return result_of(_get_raw(name))


def list_jobs(
    parent: str, kind: JobKind, filter: str = "", page_size: int = LIST_PAGE_SIZE
) -> Iterator[list[aiplatform_v1.CustomJob]]:
    """The views of the jobs of ``kind`` under ``parent`` matching ``filter``, one list per page
    (one List call each)."""
    if kind is JobKind.CUSTOM_JOB:
        yield from list_custom_jobs(parent, filter=filter, page_size=page_size)
        return
    calls = _CALLS[kind]
    client = calls.client(region_of(parent))
    request_type = getattr(aiplatform_v1, f"{calls.rpc('List', kind)}Request")
    request = request_type(parent=parent, filter=filter, page_size=page_size)
    with _translated_errors(calls.rpc("List", kind), parent):
        pager = getattr(client, f"list_{calls.listed}")(
            request=request, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS
        )
        for page in pager.pages:
            yield [view_of(job) for job in getattr(page, calls.listed)]


def find_jobs_by_label(
    parent: str, key: str, value: str, kind: JobKind = JobKind.CUSTOM_JOB
) -> list[aiplatform_v1.CustomJob]:
    """The views of every job of ``kind`` under ``parent`` whose label ``key`` equals ``value``
    (e.g. one run's jobs)."""
    for part, what in ((key, "label key"), (value, "label value")):
        if not _LABEL_PART.match(part):
            raise VertexRejected(
                f"{what} {part!r} cannot be used in a {_CALLS[kind].rpc('List', kind)} filter: "
                "Vertex AI labels are 1-63 characters of lowercase letters, digits, '_' and "
                "'-'; pass a label as jobspec wrote it"
            )
    pages = list_jobs(parent, kind, filter=f'labels.{key}="{value}"')
    return [job for page in pages for job in page]


def cancel_job(name: str) -> None:
    """Ask Vertex AI to cancel the job ``name``, of the kind its collection names
    (asynchronous: the job moves to CANCELLING)."""
    kind = _kind_of_name(name)
    if kind is JobKind.CUSTOM_JOB:
        cancel_custom_job(name)
        return
    calls = _CALLS[kind]
    client = calls.client(region_of(name))
    with _translated_errors(calls.rpc("Cancel", kind), name):
        getattr(client, f"cancel_{calls.snake}")(
            name=name, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS
        )


def _get_raw(name: str) -> AnyJob:
    kind = _kind_of_name(name)
    if kind is JobKind.CUSTOM_JOB:
        return get_custom_job(name)
    calls = _CALLS[kind]
    client = calls.client(region_of(name))
    with _translated_errors(calls.rpc("Get", kind), name):
        job: AnyJob = getattr(client, f"get_{calls.snake}")(
            name=name, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS
        )
        return job


def _kind_of_name(name: str) -> JobKind:
    kind = kind_of_job_name(name)
    if kind is None:
        raise VertexRejected(
            f"{name!r} is not the name of a Vertex AI training job: expected "
            "projects/{project}/locations/{region}/{customJobs|hyperparameterTuningJobs|"
            "trainingPipelines}/{id}"
        )
    return kind


def get_persistent_resource(name: str) -> aiplatform_v1.PersistentResource | None:
    """The persistent resource named ``name`` as it is now, or None when it does not exist."""
    client = clients.persistent_resource_client(region_of(name))
    try:
        with _translated_errors("GetPersistentResource", name):
            return client.get_persistent_resource(
                name=name, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS
            )
    except VertexNotFound:
        return None


def cancel_custom_job(name: str) -> None:
    """Ask Vertex AI to cancel the job ``name`` (asynchronous: the job moves to CANCELLING)."""
    client = clients.job_service_client(region_of(name))
    with _translated_errors("CancelCustomJob", name):
        client.cancel_custom_job(name=name, retry=_READ_RETRY, timeout=READ_TIMEOUT_SECONDS)


def region_of(resource_name: str) -> str:
    """The location in ``projects/P/locations/R[/...]``; it picks the regional endpoint."""
    match = _LOCATION_OF_NAME.match(resource_name)
    if match is None:
        raise VertexRejected(
            f"{resource_name!r} is not a Vertex AI resource name: expected "
            "projects/{project}/locations/{region}[/{collection}/{id}]"
        )
    return match.group(1)


@contextmanager
def _translated_errors(method: str, resource: str) -> Iterator[None]:
    try:
        yield
    except api_exceptions.GoogleAPICallError as error:
        raise _translated(error, method, resource) from error
    except api_exceptions.RetryError as error:
        raise BackendUnavailable(
            f"Vertex AI {method} on {resource} kept failing for {READ_TIMEOUT_SECONDS:.0f}s: "
            f"{error.cause}"
        ) from error
    except requests.exceptions.ReadTimeout as error:  # sent, never answered
        raise OutcomeUnknown(
            f"Vertex AI {method} on {resource} sent no answer in time: {error}"
        ) from error
    except requests.exceptions.ConnectionError as error:
        if _cut_mid_exchange(error):
            raise OutcomeUnknown(
                f"Vertex AI {method} on {resource}: the connection was cut before the answer "
                f"came: {error}"
            ) from error
        raise BackendUnavailable(
            f"Vertex AI {method} on {resource} could not reach the service: {error}"
        ) from error
    except (requests.exceptions.RequestException, google.auth.exceptions.TransportError) as error:
        raise BackendUnavailable(
            f"Vertex AI {method} on {resource} could not reach the service: {error}"
        ) from error
    except google.auth.exceptions.GoogleAuthError as error:
        raise VertexPermissionDenied(
            f"Vertex AI {method} on {resource}: no usable credentials ({error}); run the "
            f"function as a service account that has {REQUIRED_ROLE}"
        ) from error


def _cut_mid_exchange(error: requests.exceptions.ConnectionError) -> bool:
    """A connection that broke after it was made (urllib3's ProtocolError, e.g. the server
    closed it without answering), not one that never opened: the request may have been read."""
    cause = error.args[0] if error.args else None
    return isinstance(cause, urllib3.exceptions.ProtocolError)


def _translated(error: api_exceptions.GoogleAPICallError, method: str, resource: str) -> Exception:
    failure = _failure_of(error)
    what = f"Vertex AI {method} on {resource}"
    if failure is _CallFailure.TRANSIENT:
        if isinstance(error, _OUTCOME_UNKNOWN_EXCEPTIONS):
            return OutcomeUnknown(f"{what} failed, and may have been carried out: {error.message}")
        return BackendUnavailable(f"{what} failed, try again: {error.message}")
    if failure is _CallFailure.REJECTED:
        return VertexRejected(
            f"{what} was rejected: {error.message}; change what the message names (in the "
            "template, its placement or the request) and send the request again"
        )
    if failure is _CallFailure.NOT_FOUND:
        return VertexNotFound(
            f"{what}: not found ({error.message}); check the project, region and id"
        )
    if failure is _CallFailure.PERMISSION:
        permission = _PERMISSION_BY_METHOD.get(method, "the aiplatform permission")
        return VertexPermissionDenied(
            f"{what} was denied ({error.message}): the function's service account needs "
            f"{permission}; grant it {REQUIRED_ROLE} on the project"
        )
    if method not in _CREATE_METHODS or _is_rate_limit(error):
        return VertexThrottled(f"{what} hit a request quota, try later: {error.message}")
    return QuotaExceeded(
        f"{what} exceeded a quota: {error.message}; ask for fewer or other accelerators, another "
        "region, or request a quota increase (console: IAM & Admin > Quotas)"
    )


def _placement_refusal(
    error: api_exceptions.GoogleAPICallError, what: str, *, on_persistent_resource: bool
) -> PlacementRefused | None:
    """A create's refusal that belongs to the placement, or None for a refusal of the job itself.

    Matched on the service's message, the only place it says which rule refused, and only for
    the rules of the job's own placement (a persistent resource's only when the job names one):
    a refusal read too widely would turn an invalid spec into a silent move along the chain, so
    the patterns are the specific refusals, and anything else stays ``VertexRejected``."""
    message = error.message or ""
    if on_persistent_resource:
        if _RESOURCE_NOT_RUNNING.search(message):
            return PersistentResourceRefused(
                f"{what} was refused: {message}; the persistent resource cannot run jobs now "
                "(start it, or create it)"
            )
        if _RESOURCE_MISMATCH.search(message):
            return PersistentResourceMismatch(
                f"{what} was refused: {message}; the persistent resource does not match the job "
                "(match its pools, network and encryption key, or use another resource)"
            )
        return None
    if _NOT_OFFERED_MESSAGE.search(message):
        return AcceleratorNotOffered(
            f"{what} was refused: {message}; the GPU type is not offered in this region: "
            "choose a region that offers it (or another GPU) for this placement"
        )
    return None


def _failure_of(error: api_exceptions.GoogleAPICallError) -> _CallFailure:
    status = getattr(error.grpc_status_code, "name", None)
    if status in _FAILURE_BY_GRPC_STATUS:
        return _FAILURE_BY_GRPC_STATUS[status]
    http_status = error.code if isinstance(error.code, int) else 500
    if http_status in _FAILURE_BY_HTTP_STATUS:
        return _FAILURE_BY_HTTP_STATUS[http_status]
    # Unknown answers: a server-side one may pass, a client-side one will not.
    return _CallFailure.TRANSIENT if http_status >= 500 else _CallFailure.REJECTED


def _is_rate_limit(error: api_exceptions.GoogleAPICallError) -> bool:
    return error.reason == _RATE_LIMIT_REASON or bool(_RATE_LIMIT_MESSAGE.search(error.message))
