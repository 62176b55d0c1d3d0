"""The `error` (google.rpc.Status) a CustomJob carries when it fails or is cancelled.

Codes and wording follow what the real service puts in `CustomJob.error`, so that code which
classifies failures (capacity vs. user code vs. infrastructure) can be tested against it.
"""

from __future__ import annotations

from urllib.parse import quote

from google.rpc import code_pb2, status_pb2

from vertex_ai_emulator.durations import format_duration
from vertex_ai_emulator.names import ResourceName

STOCKOUT_MESSAGE = (
    "Resources are insufficient in region: {region}. Please try a different region. "
    "If you use K80, please consider using P100 or V100 instead."
)
FLEX_START_EXPIRED_MESSAGE = (
    "The job could not be scheduled within its max wait duration of {max_wait}. "
    "Resources are insufficient in region: {region}. Please try a different region, "
    "or a longer scheduling.max_wait_duration."
)
PERSISTENT_RESOURCE_FULL_MESSAGE = (
    "Resources are insufficient in persistent resource {resource}: the job needs {needed} "
    "but only {free} are free in its resource pools."
)
# A Spot preemption ends as a stockout (the project's design: the placement had no capacity to
# keep the job), so the message carries the stockout wording after saying what happened.
SPOT_PREEMPTED_MESSAGE = (
    "The job was preempted: Compute Engine reclaimed the Spot VMs of its replicas. "
    "Resources are insufficient in region: {region}. Please try a different region."
)
RESERVATION_FULL_MESSAGE = (
    "Reservation {reservation} has insufficient capacity: resources are insufficient in zone "
    "{zone}. The job needs {needed} VMs but only {free} of the reservation's {count} are free."
)
USER_ERROR_MESSAGE = (
    "The replica workerpool0-0 exited with a non-zero status of {exit_code}. "
    "To find out more about why your job exited please check the logs: {logs_url}"
)
INTERNAL_ERROR_MESSAGE = "Internal error occurred for the current attempt."
CANCELLED_MESSAGE = "CustomJob was cancelled."

_LOGS_URL = (
    "https://console.cloud.google.com/logs/viewer?project={project}"
    "&resource=ml_job%2Fjob_id%2F{job_id}&advancedFilter={advanced_filter}"
)


def stockout(region: str) -> status_pb2.Status:
    """No GPUs of the requested type in the region right now."""
    return _status(code_pb2.RESOURCE_EXHAUSTED, STOCKOUT_MESSAGE.format(region=region))


def flex_start_wait_expired(region: str, max_wait_seconds: float) -> status_pb2.Status:
    """A FLEX_START job whose GPUs did not all become free within its max wait duration."""
    message = FLEX_START_EXPIRED_MESSAGE.format(
        region=region, max_wait=format_duration(max_wait_seconds)
    )
    return _status(code_pb2.RESOURCE_EXHAUSTED, message)


def persistent_resource_full(resource: str, needed: str, free: str) -> status_pb2.Status:
    """A job the persistent resource has no free replicas for (`persistent_resource_when_full:
    reject`)."""
    message = PERSISTENT_RESOURCE_FULL_MESSAGE.format(resource=resource, needed=needed, free=free)
    return _status(code_pb2.RESOURCE_EXHAUSTED, message)


def spot_preempted(region: str) -> status_pb2.Status:
    """A running Spot job whose VMs were reclaimed (`spot.preempt_after`)."""
    return _status(code_pb2.RESOURCE_EXHAUSTED, SPOT_PREEMPTED_MESSAGE.format(region=region))


def reservation_full(
    reservation: str, zone: str, needed: int, free: int, count: int
) -> status_pb2.Status:
    """A job whose reservation has fewer free VMs than it has replicas."""
    message = RESERVATION_FULL_MESSAGE.format(
        reservation=reservation, zone=zone, needed=needed, free=free, count=count
    )
    return _status(code_pb2.RESOURCE_EXHAUSTED, message)


def user_error(job: ResourceName, exit_code: int) -> status_pb2.Status:
    """The training code exited with a non-zero status."""
    advanced_filter = quote(
        f'resource.type="ml_job"\nresource.labels.job_id="{job.resource_id}"', safe=""
    )
    logs_url = _LOGS_URL.format(
        project=job.parent.project_number,
        job_id=job.resource_id,
        advanced_filter=advanced_filter,
    )
    message = USER_ERROR_MESSAGE.format(exit_code=exit_code, logs_url=logs_url)
    return _status(code_pb2.INVALID_ARGUMENT, message)


def internal_error() -> status_pb2.Status:
    """A failure of the service itself, not of the training code."""
    return _status(code_pb2.INTERNAL, INTERNAL_ERROR_MESSAGE)


def cancelled() -> status_pb2.Status:
    """The job was cancelled on request."""
    return _status(code_pb2.CANCELLED, CANCELLED_MESSAGE)


def _status(code: int, message: str) -> status_pb2.Status:
    return status_pb2.Status(code=code, message=message)
