"""A Cloud Scheduler stand-in: the reconcile tick, and the config's schedules, as Pub/Sub messages.

Cloud Scheduler with a Pub/Sub target publishes a fixed body and attributes; so does this. The
reconcile tick goes to the reconcile topic every ``reconcile_every_seconds`` (in production, every
minute); each schedule route with a ``cron`` publishes ``{"schedule": NAME}`` with
``vertex_dispatch_kind=schedule`` on the requests topic in every minute its cron matches (real
time, UTC). ``fire(name)`` runs a schedule now, as ``gcloud scheduler jobs run`` does.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from emulator_stack.cron import cron_matches

SCHEDULE_KIND = {"vertex_dispatch_kind": "schedule"}
RECONCILE_KIND = {"vertex_dispatch_kind": "reconcile"}

Publish = Callable[[str, bytes, Mapping[str, str]], str]

logger = logging.getLogger("emulator_stack.scheduler")


@dataclass(frozen=True)
class ScheduleJob:
    """One Scheduler job of the config: a schedule route's name and cron."""

    schedule: str
    cron: str | None


class LocalScheduler:
    """Publishes ticks from a background thread until stopped."""

    def __init__(
        self,
        publish: Publish,
        requests_topic: str,
        reconcile_topic: str,
        schedules: list[ScheduleJob],
        reconcile_every_seconds: float = 2.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._publish = publish
        self._requests_topic = requests_topic
        self._reconcile_topic = reconcile_topic
        self.schedules = {job.schedule: job for job in schedules}
        self._every = reconcile_every_seconds
        self._clock = clock
        self._fired_minutes: set[tuple[str, datetime]] = set()
        self.reconcile_ticks = 0
        self.schedule_fires: list[str] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def is_running(self) -> bool:
        return self._thread.is_alive()

    def fire(self, schedule: str) -> str:
        """Publish the tick of ``schedule`` now; the message id."""
        if schedule not in self.schedules:
            raise KeyError(
                f"no schedule route named {schedule!r} in the config; known: "
                f"{sorted(self.schedules)}"
            )
        body = json.dumps({"schedule": schedule}).encode()
        message_id = self._publish(self._requests_topic, body, SCHEDULE_KIND)
        self.schedule_fires.append(schedule)
        return message_id

    def tick_reconcile(self) -> str:
        """Publish one reconcile tick now; the message id."""
        message_id = self._publish(self._reconcile_topic, b"{}", RECONCILE_KIND)
        self.reconcile_ticks += 1
        return message_id

    def fire_due_schedules(self, now: datetime) -> list[str]:
        """Fire each cron schedule matching the minute of ``now``, once per minute."""
        minute = now.replace(second=0, microsecond=0)
        fired = []
        for job in self.schedules.values():
            due = job.cron is not None and cron_matches(job.cron, minute)
            if due and (job.schedule, minute) not in self._fired_minutes:
                self._fired_minutes.add((job.schedule, minute))
                self.fire(job.schedule)
                fired.append(job.schedule)
        return fired

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick_reconcile()
                self.fire_due_schedules(self._clock())
            except OSError as error:  # the emulator is stopping
                logger.warning("scheduler: publishing failed: %s", error)
            self._stopping.wait(self._every)
