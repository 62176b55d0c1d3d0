"""A reservation's full name: the one rule the loader, the placement and the Compute Engine
adapter read (``shared.model.reservations``). Table: name -> its zone and region, or None."""

from __future__ import annotations

import pytest

from shared.config.model import ReservationPlacement
from shared.model.reservation_names import reservation_region, reservation_zone

NAMES = [
    ("projects/acme-ml/zones/us-central1-a/reservations/a100-res", "us-central1-a", "us-central1"),
    ("projects/123456789012/zones/europe-west4-b/reservations/r", "europe-west4-b", "europe-west4"),
    ("projects/acme-ml/zones/me-central2-c/reservations/h100", "me-central2-c", "me-central2"),
    # not a reservation's full name: no zone, no region
    ("a100-res", None, None),
    ("projects/acme-ml/zones/us-central1/reservations/r", None, None),  # a region, not a zone
    ("projects/acme-ml/regions/us-central1-a/reservations/r", None, None),
    ("projects/p/zones/us-central1-a/reservations/r", None, None),  # no project ID is 1 letter
    ("projects/acme-ml/zones/us-central1-a/reservations/r/reservationBlocks/b1", None, None),
    ("projects/acme-ml/zones/us-central1-a/reservations/A100", None, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "zone", "region"), NAMES)
def test_a_reservation_names_its_zone_and_region(
    name: str, zone: str | None, region: str | None
) -> None:
    assert (reservation_zone(name), reservation_region(name)) == (zone, region)


@pytest.mark.parametrize(("name", "zone", "region"), NAMES)
def test_a_placement_built_in_code_takes_the_same_region(
    name: str, zone: str | None, region: str | None
) -> None:
    assert ReservationPlacement(name=name).region == region
    assert ReservationPlacement(name=name, region="us-east4").region == "us-east4"
