"""Marker-less datasets (``completion: quiet``): one run per dataset version, once it is quiet.

(Contract stub: dispatch's side and the reconciler's check are being built; see issue 16.)
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters.ledger import RunSnapshot
from shared.handlers.data_waits import DataCheck

if TYPE_CHECKING:
    from shared.handlers.services import Services


def check_dataset(services: Services, snapshot: RunSnapshot, now: datetime) -> DataCheck:
    """Whether the dataset version ``snapshot`` waits for is complete at ``now``; when it is,
    the run is made ready (``data_waits.data_ready``)."""
    return DataCheck.NOT_CHECKED
