"""Compute Engine reservations: VMs set aside in one zone, and the job replicas that use them.

A reservation (config key `reservations`, admin `PUT /emulator/v1/reservations`) holds `count`
VMs of one machine shape (machine type, GPU type and count) in a zone. A job whose worker pools
ask for it through `machineSpec.reservationAffinity` (SPECIFIC_RESERVATION, key
`compute.googleapis.com/reservation-name`, values [the full name]) takes one VM per replica from
the start of PENDING until it ends, like replicas of a persistent-resource pool: `inUseCount` is
never stored but counted from the jobs holding VMs, so it cannot drift from their states. A
reservation's VMs are set aside already, so they take nothing from the region's GPU capacity
(capacity.py) nor from the project's GPU quota (quota.py).

The same reservation is also what the Compute Engine API's `reservations.get` answers (served on
the REST port, see rest.py), in the REST JSON of `compute_v1.Reservation`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import ConfigError
from vertex_ai_emulator.messages import rfc3339
from vertex_ai_emulator.names import ProjectDirectory

RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"
COMPUTE_API_ROOT = "https://www.googleapis.com/compute/v1"

# Vertex AI's AcceleratorType names -> the accelerator type names Compute Engine spells
# (`gcloud compute accelerator-types list`); a reservation answers the Compute names.
COMPUTE_ACCELERATOR_NAMES: dict[str, str] = {
    "NVIDIA_TESLA_K80": "nvidia-tesla-k80",
    "NVIDIA_TESLA_P100": "nvidia-tesla-p100",
    "NVIDIA_TESLA_V100": "nvidia-tesla-v100",
    "NVIDIA_TESLA_P4": "nvidia-tesla-p4",
    "NVIDIA_TESLA_T4": "nvidia-tesla-t4",
    "NVIDIA_TESLA_A100": "nvidia-tesla-a100",
    "NVIDIA_A100_80GB": "nvidia-a100-80gb",
    "NVIDIA_L4": "nvidia-l4",
    "NVIDIA_H100_80GB": "nvidia-h100-80gb",
    "NVIDIA_H100_MEGA_80GB": "nvidia-h100-mega-80gb",
    "NVIDIA_H200_141GB": "nvidia-h200-141gb",
    "NVIDIA_B200": "nvidia-b200",
    "NVIDIA_GB200": "nvidia-gb200",
    "NVIDIA_RTX_PRO_6000": "nvidia-rtx-pro-6000",
}
_VERTEX_ACCELERATOR_NAMES = {
    compute: vertex for vertex, compute in COMPUTE_ACCELERATOR_NAMES.items()
}

RESERVATION_KEYS = frozenset(
    {
        "name",
        "machine_type",
        "accelerator_type",
        "accelerator_count",
        "count",
        "specific_reservation_required",
    }
)
REQUIRED_KEYS = frozenset({"name", "machine_type", "count"})

# projects/P/zones/Z/reservations/N, N as Compute Engine names resources (RFC 1035 label).
_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/zones/(?P<zone>[a-z]+-[a-z]+[0-9]+-[a-z])"
    r"/reservations/(?P<name>[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)$"
)
NAME_FORM = "projects/PROJECT/zones/ZONE/reservations/NAME (e.g. zone us-central1-a)"


@dataclass(frozen=True)
class Reservation:
    """One reservation: where it is, the machine shape of its VMs, and how many there are."""

    project: str  # as configured: the project id (Compute names use it) or number
    zone: str
    short_name: str
    machine_type: str
    accelerator_type: str  # an AcceleratorType name, "" for VMs without GPUs
    accelerator_count: int
    count: int  # VMs
    specific_reservation_required: bool = False

    @property
    def name(self) -> str:
        """The full name jobs give in `reservationAffinity.values`."""
        return f"projects/{self.project}/zones/{self.zone}/reservations/{self.short_name}"

    @property
    def region(self) -> str:
        """The region of the reservation's zone (us-central1-a -> us-central1)."""
        return region_of_zone(self.zone)

    def matches(self, machine_type: str, accelerator_type: str, accelerator_count: int) -> bool:
        """Whether a replica of this machine shape can use one of the reservation's VMs."""
        if accelerator_count == 0 or accelerator_type == "ACCELERATOR_TYPE_UNSPECIFIED":
            accelerator_type, accelerator_count = "", 0
        return (self.machine_type, self.accelerator_type, self.accelerator_count) == (
            machine_type,
            accelerator_type,
            accelerator_count,
        )

    def describe_machine(self) -> str:
        """The machine shape, as messages print it."""
        return describe_machine(self.machine_type, self.accelerator_type, self.accelerator_count)


def describe_machine(machine_type: str, accelerator_type: str, accelerator_count: int) -> str:
    """machine_type=..., accelerator_type=..., accelerator_count=... for messages."""
    return (
        f"machine_type={machine_type}, accelerator_type={accelerator_type or 'none'}, "
        f"accelerator_count={accelerator_count}"
    )


def region_of_zone(zone: str) -> str:
    """us-central1-a -> us-central1."""
    return zone.rsplit("-", 1)[0]


def parse_reservation_name(text: str) -> tuple[str, str, str] | None:
    """(project, zone, short name) of a full reservation name; None when it is not one."""
    match = _NAME.match(text)
    return (match["project"], match["zone"], match["name"]) if match else None


def reservation_from_dict(raw: Any, where: str, base: Reservation | None = None) -> Reservation:
    """Validate one reservation entry (config's shape, snake_case keys).

    With `base`, keys left out keep base's values (an admin resize sends name and count only).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - RESERVATION_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(RESERVATION_KEYS))}"
        )
    if base is None:
        missing = sorted(REQUIRED_KEYS - set(raw))
        if missing:
            raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")
    parsed = parse_reservation_name(str(raw.get("name", "")))
    if parsed is None:
        raise ConfigError(f"{where}.name: must be {NAME_FORM}, got {raw.get('name')!r}")
    project, zone, short_name = parsed
    reservation = base or Reservation(project, zone, short_name, "", "", 0, 0)
    changes: dict[str, Any] = {}
    if "machine_type" in raw:
        machine_type = raw["machine_type"]
        if not isinstance(machine_type, str) or not machine_type:
            raise ConfigError(
                f"{where}.machine_type: must be a machine type such as a2-highgpu-1g, "
                f"got {machine_type!r}"
            )
        changes["machine_type"] = machine_type
    if "accelerator_type" in raw:
        changes["accelerator_type"] = _accelerator(raw["accelerator_type"], where)
    if "accelerator_count" in raw:
        changes["accelerator_count"] = _count(
            raw["accelerator_count"], f"{where}.accelerator_count"
        )
    if "count" in raw:
        changes["count"] = _count(raw["count"], f"{where}.count")
    if "specific_reservation_required" in raw:
        required = raw["specific_reservation_required"]
        if not isinstance(required, bool):
            raise ConfigError(
                f"{where}.specific_reservation_required: must be true or false, got {required!r}"
            )
        changes["specific_reservation_required"] = required
    reservation = replace(reservation, **changes)
    if bool(reservation.accelerator_type) != (reservation.accelerator_count > 0):
        raise ConfigError(
            f"{where}: accelerator_type and accelerator_count go together (a GPU type and a "
            f"count above 0, or neither), got {reservation.accelerator_type!r} and "
            f"{reservation.accelerator_count}"
        )
    return reservation


def _accelerator(raw: Any, where: str) -> str:
    # Either spelling: Vertex AI's enum name, or Compute Engine's (what gcloud prints).
    if raw in aiplatform_v1.AcceleratorType.__members__ and raw != "ACCELERATOR_TYPE_UNSPECIFIED":
        return str(raw)
    if raw in _VERTEX_ACCELERATOR_NAMES:
        return _VERTEX_ACCELERATOR_NAMES[raw]
    raise ConfigError(
        f"{where}.accelerator_type: {raw!r} is not an AcceleratorType name (e.g. "
        f"NVIDIA_TESLA_A100) nor a Compute Engine GPU name (e.g. nvidia-tesla-a100)"
    )


def _count(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ConfigError(f"{where}: must be a non-negative integer, got {raw!r}")
    return raw


ReservationKey = tuple[str, str, str]  # (project number, zone, short name)


class Reservations:
    """The reservations by canonical key, and the VMs each job holds on them."""

    def __init__(self, directory: ProjectDirectory, created: datetime) -> None:
        self._directory = directory
        self._created = created
        self._reservations: dict[ReservationKey, Reservation] = {}
        self._ids: dict[ReservationKey, int] = {}
        self._holds: dict[str, tuple[ReservationKey, int]] = {}

    def key(self, name: str) -> ReservationKey | None:
        """The canonical key of a full name (project id or number); None when malformed."""
        parsed = parse_reservation_name(name)
        if parsed is None:
            return None
        project, zone, short_name = parsed
        return (self._directory.number_of(project), zone, short_name)

    def put(self, reservation: Reservation) -> None:
        """Add a reservation or replace one of the same name (a resize); held VMs stay held."""
        key = self.key(reservation.name)
        assert key is not None  # Reservation names are validated when parsed
        self._reservations[key] = reservation
        self._ids.setdefault(key, 7_000_000_000_000_000_000 + len(self._ids) + 1)

    def get(self, name: str) -> Reservation | None:
        """The reservation a full name (id or number form) refers to, or None."""
        key = self.key(name)
        return self._reservations.get(key) if key is not None else None

    def get_by_parts(self, project: str, zone: str, short_name: str) -> Reservation | None:
        """The reservation a Compute Engine path names, or None."""
        return self._reservations.get((self._directory.number_of(project), zone, short_name))

    def all(self) -> list[Reservation]:
        """Every reservation, by name."""
        return [self._reservations[key] for key in sorted(self._reservations)]

    def in_use(self, name: str) -> int:
        """VMs of the reservation that jobs hold now."""
        key = self.key(name)
        return sum(vms for held_key, vms in self._holds.values() if held_key == key)

    def free(self, name: str) -> int:
        """VMs of the reservation a new job could take now."""
        reservation = self.get(name)
        return max(0, reservation.count - self.in_use(name)) if reservation else 0

    def hold(self, holder: str, name: str, vms: int) -> None:
        """Take `vms` VMs of the reservation for `holder` (a job name) until `release`."""
        key = self.key(name)
        assert key is not None
        self._holds[holder] = (key, vms)

    def release(self, holder: str) -> None:
        """Give back whatever `holder` holds (nothing if it holds nothing)."""
        self._holds.pop(holder, None)

    def any_with_room(
        self, region: str, machine: tuple[str, str, int], vms: int
    ) -> Reservation | None:
        """The first reservation (by name) in the region that ANY_RESERVATION may use for
        `vms` replicas of this machine shape: not `specific_reservation_required`, same shape,
        enough free VMs."""
        for reservation in self.all():
            if (
                reservation.region == region
                and not reservation.specific_reservation_required
                and reservation.matches(*machine)
                and self.free(reservation.name) >= vms
            ):
                return reservation
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        """Every reservation with its VMs in use, JSON-friendly (admin state)."""
        return [
            {
                "name": reservation.name,
                "machine_type": reservation.machine_type,
                "accelerator_type": reservation.accelerator_type,
                "accelerator_count": reservation.accelerator_count,
                "count": reservation.count,
                "in_use": self.in_use(reservation.name),
                "free": self.free(reservation.name),
                "specific_reservation_required": reservation.specific_reservation_required,
            }
            for reservation in self.all()
        ]

    def compute_json(self, reservation: Reservation) -> dict[str, Any]:
        """The reservation as Compute Engine's `reservations.get` answers it (REST JSON of
        `compute_v1.Reservation`; int64 fields as strings, as the API prints them)."""
        key = self.key(reservation.name)
        assert key is not None
        zone_url = f"{COMPUTE_API_ROOT}/projects/{reservation.project}/zones/{reservation.zone}"
        instance_properties: dict[str, Any] = {"machineType": reservation.machine_type}
        if reservation.accelerator_type:
            instance_properties["guestAccelerators"] = [
                {
                    "acceleratorType": COMPUTE_ACCELERATOR_NAMES.get(
                        reservation.accelerator_type, reservation.accelerator_type.lower()
                    ),
                    "acceleratorCount": reservation.accelerator_count,
                }
            ]
        return {
            "kind": "compute#reservation",
            "id": str(self._ids[key]),
            "creationTimestamp": rfc3339(self._created),
            "name": reservation.short_name,
            "zone": zone_url,
            "selfLink": f"{zone_url}/reservations/{reservation.short_name}",
            "specificReservation": {
                "instanceProperties": instance_properties,
                "count": str(reservation.count),
                "inUseCount": str(self.in_use(reservation.name)),
                "assuredCount": str(reservation.count),
            },
            "specificReservationRequired": reservation.specific_reservation_required,
            "status": "READY",
            "shareSettings": {"shareType": "LOCAL"},
        }
