"""What a Compute Engine reservation's full name says: the one rule for the name
(``projects/P/zones/Z/reservations/N``) and for where the reservation is (its zone, its region).

The config loader (``shared.config.placements``, ``shared.config.importers``), the placement
itself (``shared.config.model.ReservationPlacement`` fills in its region) and the Compute Engine
adapter all read them here. Plain functions, no client; the pattern is compiled on first use, as
a config without a named reservation (an unmatched event's cold start) never needs it.
"""

from __future__ import annotations

import functools
import re
from typing import Final

# A Compute Engine reservation's full name, as Vertex AI's reservationAffinity.values takes it and
# reservations.get reads it. The project is an ID or a project number; the zone is a region and a
# letter (us-central1-a), and a job consumes the reservation only in that region.
RESERVATION_NAME: Final = (
    r"projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,19})"
    r"/zones/(?P<zone>(?P<region>[a-z]+(-[a-z]+)+[0-9]+)-[a-z])"
    r"/reservations/(?P<reservation>[a-z]([-a-z0-9]{0,61}[a-z0-9])?)"
)


@functools.cache
def reservation_name_pattern() -> re.Pattern[str]:
    """``RESERVATION_NAME`` compiled (once, on first use)."""
    return re.compile(RESERVATION_NAME)


def reservation_zone(name: str) -> str | None:
    """The zone of a reservation's full name (``us-central1-a``); None when it is not one."""
    matched = reservation_name_pattern().fullmatch(name)
    return matched["zone"] if matched else None


def reservation_region(name: str) -> str | None:
    """The region of a reservation's zone (``us-central1-a`` -> ``us-central1``); None when
    ``name`` is not a reservation's full name."""
    matched = reservation_name_pattern().fullmatch(name)
    return matched["region"] if matched else None
