"""Starting a placement's cooldown: the one write dispatch (a create refused for capacity) and the
job-state function (a job that ended for capacity) both make (docs/architecture.md, "Placement
cooldown"; the rules are ``policy.cooldown``'s).

A failed write is logged, never raised: the cooldown only orders later walks, while what it
follows (a refusal handled, a decision to record) must go on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from shared.adapters.ledger import Ledger
from shared.config.model import Config, Placement, Template
from shared.logs import log
from shared.model.cooldowns import Cooldown
from shared.model.errors import DispatchError
from shared.policy.cooldown import cooldown_of, placement_key

logger = logging.getLogger(__name__)


def start_cooldown(
    ledger: Ledger,
    config: Config,
    template: Template,
    placement: Placement,
    *,
    now: datetime,
    reason: str,
    run_id: str,
    labels: Mapping[str, str],
) -> None:
    """Cool ``placement`` of ``template`` down from ``now`` for the template's cooldown (nothing
    when it is 0), saying ``reason``."""
    length = cooldown_of(config, template)
    if length <= timedelta(0):
        return
    key = placement_key(placement, template, config.region)
    cooldown = Cooldown(
        key.key,
        key.kind,
        key.region,
        key.machine,
        since=now,
        until=now + length,
        reason=reason,
        run_id=run_id,
    )
    try:
        ledger.start_cooldown(cooldown)
    except DispatchError as error:
        log(
            logger,
            logging.WARNING,
            "placement cooldown not recorded",
            labels=labels,
            cooldown=key.key,
            error=str(error),
        )
        return
    log(
        logger,
        logging.INFO,
        "placement cooling down",
        labels=labels,
        cooldown=key.key,
        cooling_until=cooldown.until.isoformat(),
    )
