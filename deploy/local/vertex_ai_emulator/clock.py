"""Simulated time: a clock that runs at a chosen multiple of real time and can be pushed forward.

The simulation reads only this clock, so tests can advance it by hand (no sleeping) and a demo can
run an hour of GPU queueing in a minute (`time_scale=60`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta


class SimulatedClock:
    """Simulated UTC time = start + (real seconds elapsed) * time_scale + seconds advanced by hand.

    `time_scale=0` freezes the clock so that only `advance` moves it (what unit tests want).
    """

    def __init__(
        self,
        time_scale: float = 1.0,
        start: datetime | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._time_scale = float(time_scale)
        self._anchor_real = monotonic()
        self._anchor_simulated = _as_utc(start) if start else datetime.now(UTC)

    @property
    def time_scale(self) -> float:
        """Simulated seconds per real second."""
        return self._time_scale

    @time_scale.setter
    def time_scale(self, value: float) -> None:
        if value < 0:
            raise ValueError(f"time_scale must be >= 0, got {value}")
        with self._lock:
            self._rebase()
            self._time_scale = float(value)

    def now(self) -> datetime:
        """The current simulated time (UTC, timezone-aware)."""
        with self._lock:
            return self._now_locked()

    def advance(self, seconds: float) -> datetime:
        """Move simulated time forward by `seconds`; returns the new now."""
        if seconds < 0:
            raise ValueError(f"the clock only moves forward, got {seconds} s")
        with self._lock:
            self._rebase()
            self._anchor_simulated += timedelta(seconds=seconds)
            return self._anchor_simulated

    def _rebase(self) -> None:
        # Folding the elapsed real time into the anchor lets scale changes and manual
        # advances apply from now on without rewriting the past.
        self._anchor_simulated = self._now_locked()
        self._anchor_real = self._monotonic()

    def _now_locked(self) -> datetime:
        elapsed_real = self._monotonic() - self._anchor_real
        return self._anchor_simulated + timedelta(seconds=elapsed_real * self._time_scale)


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
