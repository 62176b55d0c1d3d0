"""The Compute Engine gateway: the one read dispatch makes, a named reservation, with errors
translated at this boundary.

``get_reservation`` reads ``projects/P/zones/Z/reservations/N`` with the official client
(``compute_v1.ReservationsClient``, REST; built once per process by ``shared.adapters.clients``,
which loads the library only on the first read: see its docstring for the cost and for
``COMPUTE_EMULATOR_HOST``). It returns the plain ``shared.model.reservations.Reservation`` the
live rules read (``shared.validation.reservation``), never a Compute message.

=========================================  ===================================================
Compute Engine answer                      here
=========================================  ===================================================
404 NOT_FOUND                              None: the reservation does not exist (or is not
                                           visible to this project); the rules make the
                                           placement unavailable
401, 403, missing credentials              ``ComputePermissionDenied``, naming the permission
                                           (``compute.reservations.get``) and a role to grant
                                           in the reservation's project
429 (a request quota: a read uses no       ``BackendUnavailable`` (transient, not retried
resource quota), 5xx, network errors       here but for the brief retry below)
other 4xx (a malformed name)               ``ReservationUnreadable`` (permanent)
=========================================  ===================================================

Reads are idempotent, so transient answers (503, 500, 504, a dropped connection) are retried
briefly, as ``shared.adapters.vertex`` does for its reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import google.auth.exceptions
import requests
from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry

from shared.adapters import clients
from shared.model.errors import BackendUnavailable, PermanentError, PermissionMissing
from shared.model.reservation_names import reservation_name_pattern, reservation_zone
from shared.model.reservations import Reservation, ReservedGpu, short_name

if TYPE_CHECKING:
    from google.cloud import compute_v1

READ_TIMEOUT_SECONDS: Final = 30.0
READ_PERMISSION: Final = "compute.reservations.get"
# The narrowest predefined role that holds compute.reservations.get (read-only on Compute Engine).
READ_ROLE: Final = "roles/compute.viewer"

_TRANSIENT_EXCEPTIONS = (
    api_exceptions.ServiceUnavailable,
    api_exceptions.InternalServerError,
    api_exceptions.GatewayTimeout,
    api_exceptions.BadGateway,
    requests.exceptions.ConnectionError,
)
_READ_RETRY = api_retry.Retry(
    predicate=api_retry.if_exception_type(*_TRANSIENT_EXCEPTIONS),
    initial=0.25,
    maximum=4.0,
    multiplier=2.0,
    timeout=READ_TIMEOUT_SECONDS,
)


class ComputePermissionDenied(PermissionMissing):
    """The function's identity may not read the reservation; the message names what to grant."""

    headline = "Compute Engine denied the function permission to read a reservation"


class ReservationUnreadable(PermanentError):
    """Compute Engine refused the read as invalid (a malformed reservation name)."""

    headline = "Compute Engine could not read the reservation the placement names"


def get_reservation(name: str) -> Reservation | None:
    """The reservation ``projects/P/zones/Z/reservations/N`` as it is now; None when not found."""
    match = reservation_name_pattern().fullmatch(name)
    if match is None:
        raise ReservationUnreadable(
            f"{name!r} is not a Compute Engine reservation name: expected "
            "projects/{project}/zones/{zone}/reservations/{name}; fix the placement's "
            "reservation.name"
        )
    try:
        with _translated_errors(name, project=match["project"]):
            # Built inside: without credentials the constructor raises google-auth's error.
            client = clients.reservations_client()
            answer = client.get(
                project=match["project"],
                zone=match["zone"],
                reservation=match["reservation"],
                retry=_READ_RETRY,
                timeout=READ_TIMEOUT_SECONDS,
            )
    except _NotFound:
        return None
    return reservation_of(name, answer)


def reservation_of(name: str, answer: compute_v1.Reservation) -> Reservation:
    """Compute Engine's ``Reservation`` as plain data (absent numbers stay None: unknown)."""
    specific: Any = answer.specific_reservation if "specific_reservation" in answer else None
    properties: Any = (
        specific.instance_properties
        if specific is not None and "instance_properties" in specific
        else None
    )
    gpus = tuple(
        ReservedGpu(short_name(gpu.accelerator_type), gpu.accelerator_count)
        for gpu in (properties.guest_accelerators if properties is not None else ())
    )
    return Reservation(
        name=name,
        zone=short_name(answer.zone) if answer.zone else reservation_zone(name) or "",
        status=answer.status if "status" in answer else "",
        machine_type=short_name(properties.machine_type) if properties is not None else "",
        gpus=gpus,
        count=_optional_int(specific, "count"),
        in_use_count=_optional_int(specific, "in_use_count"),
    )


class _NotFound(Exception):
    """Internal: a 404, which ``get_reservation`` turns into None."""


def _optional_int(message: Any, field: str) -> int | None:
    if message is None or field not in message:
        return None
    return int(getattr(message, field))


@contextmanager
def _translated_errors(name: str, *, project: str) -> Iterator[None]:
    what = f"Compute Engine reservations.get on {name}"
    try:
        yield
    except api_exceptions.NotFound as error:
        raise _NotFound(str(error)) from error
    except (api_exceptions.Unauthorized, api_exceptions.Forbidden) as error:
        raise _denied(what, project, error.message) from error
    except api_exceptions.TooManyRequests as error:
        raise BackendUnavailable(
            f"{what} hit a request quota, try later: {error.message}"
        ) from error
    except api_exceptions.GoogleAPICallError as error:
        if isinstance(error.code, int) and 400 <= error.code < 500:
            raise ReservationUnreadable(
                f"{what} was refused: {error.message}; check the placement's reservation.name"
            ) from error
        raise BackendUnavailable(f"{what} failed, try again: {error.message}") from error
    except api_exceptions.RetryError as error:
        raise BackendUnavailable(
            f"{what} kept failing for {READ_TIMEOUT_SECONDS:.0f}s: {error.cause}"
        ) from error
    except (requests.exceptions.RequestException, google.auth.exceptions.TransportError) as error:
        raise BackendUnavailable(f"{what} could not reach the service: {error}") from error
    except google.auth.exceptions.GoogleAuthError as error:
        raise _denied(what, project, f"no usable credentials ({error})") from error


def _denied(what: str, project: str, reason: str) -> ComputePermissionDenied:
    return ComputePermissionDenied(
        f"{what} was denied ({reason}): the function's service account needs {READ_PERMISSION} "
        f"in project {project}, the reservation's; grant it {READ_ROLE} there (for a shared "
        "reservation, in the project that owns it)"
    )
