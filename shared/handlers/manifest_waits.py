"""Manifests that wait visibly: a run WAITING_DATA until every file its manifest lists exists.

(Contract stub: being built; see issue 16.)
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters.ledger import RunSnapshot
from shared.handlers.data_waits import DataCheck

if TYPE_CHECKING:
    from shared.handlers.services import Services


def check_manifest(services: Services, snapshot: RunSnapshot, now: datetime) -> DataCheck:
    """Whether every file of the manifest ``snapshot`` waits for exists (as pinned) at ``now``;
    when it does, the run is made ready (``data_waits.data_ready``)."""
    return DataCheck.NOT_CHECKED
