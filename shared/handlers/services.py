"""What the handlers work with: the config, the run ledger (built on first use) and a clock.

One ``Services`` per instance (``default_services``), for the config ``VERTEX_DISPATCH_CONFIG``
names; tests build their own with an emulator's ledger and a fixed clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shared.adapters.config_source import config_from_env
from shared.config.model import Config
from shared.logs import log
from shared.model.errors import ConfigError, TransientError

if TYPE_CHECKING:
    from shared.adapters.ledger import Ledger

logger = logging.getLogger(__name__)


class ConfigUnavailable(TransientError):
    """The configuration cannot be loaded; events retry (and then dead-letter) until it is fixed.

    A broken config is not the event's fault: acknowledging would lose every trigger until the
    fix, so the event is delivered again instead, and the CRITICAL log line alerts a human.
    """


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Services:
    """What dispatch works with: the config, the run ledger (built on first use), a clock."""

    config: Config
    now: Callable[[], datetime] = _utc_now
    _ledger: Ledger | None = None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            from shared.adapters.ledger import default_ledger

            self._ledger = default_ledger(self.config.project)
        return self._ledger


_services: Services | None = None


def default_services() -> Services:
    """This instance's services, for the config ``VERTEX_DISPATCH_CONFIG`` names."""
    global _services
    config = _load_config()
    if _services is None or _services.config is not config:
        _services = Services(config)
    return _services


def _load_config() -> Config:
    try:
        return config_from_env()
    except ConfigError as error:
        log(logger, logging.CRITICAL, f"configuration cannot be loaded: {error}")
        raise ConfigUnavailable(str(error)) from error
