"""The whole system on one machine: emulators, the functions, and the wiring between them.

``start_local_stack`` starts, and returns running:

- the Pub/Sub, Firestore, Cloud Storage and Vertex AI emulators (concurrently);
- each Cloud Function under functions-framework as its own HTTP server, pointed at the emulators
  and at the dispatch config (``VERTEX_DISPATCH_CONFIG``);
- the config's topics, a push subscription from each Pub/Sub trigger to its function (dead-letter
  policy included), and the buckets the storage routes watch;
- the Eventarc stand-in (storage events), the Cloud Scheduler stand-in (reconcile tick and the
  config's schedules) and the log-sink stand-in (the Vertex AI emulator's simulated ml_job log
  entries that ``SINK_FILTER`` takes, on the job-events topic: ``emulator_stack.logsink``).

Every component logs into ``log_dir`` (``<component>.log``; the stand-ins into ``stack.log``).
``stop`` ends everything, and anything left is ended at interpreter exit. If a part fails to
start, the parts already started are stopped before the error is raised.
"""

from __future__ import annotations

import functools
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from emulator_stack.environment import LOCAL_PROJECT
from emulator_stack.eventarc import StorageEventarc
from emulator_stack.functions import (
    JOB_EVENT,
    OBJECT_FINALIZED,
    RECONCILE,
    REQUEST,
    TARGETS,
    FunctionServer,
    start_function_server,
)
from emulator_stack.logsink import LogSink
from emulator_stack.pubsub import PubSubEmulator
from emulator_stack.scheduler import LocalScheduler, ScheduleJob
from emulator_stack.stack import EmulatorStack, start_emulators
from emulator_stack.storage import StorageEmulator
from emulator_stack.vertex_ai import VertexAIEmulator, start_vertex_ai_emulator
from emulator_stack.wiring import RECONCILE_TICKS_TOPIC_ID, PubSubWiring, PushRoute, topic_path
from shared.adapters.config_source import load_config
from shared.config.model import Config, GcsRoute, ScheduleRoute

EMULATORS = ("pubsub", "firestore", "storage", "vertex-ai")
# Google: "About one minute after a job ends, Vertex AI sets the error code on the training job
# object" ("Understand the custom training service"). The stack's Vertex AI emulator does so, so
# the demo, the end-to-end tests and the soak all go through the late-error path
# (shared/handlers/jobstate.py defers a FAILED job without its error).
VERTEX_ERROR_DELAY = "60s"
CONFIG_VARIABLE = "VERTEX_DISPATCH_CONFIG"
STACK_LOG = "stack.log"


@dataclass(frozen=True)
class StackSettings:
    """What a local stack is started with."""

    dispatch_config: Path
    vertex_config: Path | None = None
    time_scale: float | None = None  # simulated seconds per real second in the Vertex AI emulator
    # The emulator's `timings.error_delay`, in simulated time, overriding its config's; None
    # keeps the config's (0 unless it sets one: the error comes with the FAILED state).
    vertex_error_delay: str | None = VERTEX_ERROR_DELAY
    reconcile_every_seconds: float = 2.0
    storage_poll_seconds: float = 0.5
    log_sink_poll_seconds: float = 0.5


@dataclass(frozen=True)
class LocalStack:
    """A running local stack. Use it as a context manager, or call ``stop``."""

    settings: StackSettings
    config: Config
    log_dir: Path
    emulators: EmulatorStack
    functions: dict[str, FunctionServer]  # by target; a crashed one is replaced in place
    pubsub: PubSubWiring
    eventarc: StorageEventarc
    scheduler: LocalScheduler
    dead_letter_topic: str
    log_sink: LogSink
    _restarts: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def env(self) -> dict[str, str]:
        """What a client (a test, the CLI, a shell) needs to talk to this stack."""
        return {
            **self.emulators.env,
            "GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT,
            CONFIG_VARIABLE: str(self.settings.dispatch_config),
        }

    @property
    def vertex_ai(self) -> VertexAIEmulator:
        return self.emulators.get("vertex-ai", VertexAIEmulator)

    @property
    def storage(self) -> StorageEmulator:
        return self.emulators.get("storage", StorageEmulator)

    def health(self) -> dict[str, bool]:
        """Whether each component is running, by name."""
        emulators = self.emulators.emulators.items()
        status = {name: emulator.process.is_running() for name, emulator in emulators}
        for target, server in self.functions.items():
            status[f"function {target}"] = server.is_running()
        status["eventarc stand-in"] = self.eventarc.is_running()
        status["scheduler stand-in"] = self.scheduler.is_running()
        status["log-sink stand-in"] = self.log_sink.is_running()
        return status

    def crash_and_restart_function(self, target: str) -> FunctionServer:
        """SIGKILL ``target``'s server (as an instance crashing mid-request), then serve it again
        on the same port, so pushes and Eventarc find it; what was in flight is redelivered."""
        old = self.functions[target]
        old.kill()
        self._restarts[target] = self._restarts.get(target, 1) + 1
        new = start_function_server(
            target, self.log_dir, self.env, old.host, port=old.port, instance=self._restarts[target]
        )
        self.functions[target] = new
        return new

    def stop(self) -> None:
        """Stop the stand-ins, then the functions, then the emulators (idempotent)."""
        self.scheduler.stop()
        self.log_sink.stop()
        self.eventarc.stop()
        _stop_functions(self.functions)
        self.emulators.stop()

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_local_stack(settings: StackSettings, log_dir: Path) -> LocalStack:
    """Start everything (about 5 s); see the module docstring."""
    config = load_config(str(settings.dispatch_config))
    log_dir.mkdir(parents=True, exist_ok=True)
    _log_stand_ins_to(log_dir / STACK_LOG)
    vertex = functools.partial(
        start_vertex_ai_emulator,
        config=settings.vertex_config,
        time_scale=settings.time_scale,
        timings=None
        if settings.vertex_error_delay is None
        else {"error_delay": settings.vertex_error_delay},
    )
    emulators = start_emulators(EMULATORS, log_dir, launchers={"vertex-ai": vertex})
    functions: dict[str, FunctionServer] = {}
    try:
        env = {
            **emulators.env,
            "GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT,
            CONFIG_VARIABLE: str(settings.dispatch_config),
        }
        functions.update(_start_functions(log_dir, env))
        pubsub = PubSubWiring(emulators.get("pubsub", PubSubEmulator).address)
        dead_letter = pubsub.wire(config.project, _push_routes(config, functions), _topics(config))
        storage = emulators.get("storage", StorageEmulator)
        buckets = [route.bucket for route in config.routes if isinstance(route, GcsRoute)]
        for bucket in buckets:
            _create_bucket(storage.url, config.project, bucket)
        eventarc = StorageEventarc(
            storage.url, buckets, functions[OBJECT_FINALIZED].url, settings.storage_poll_seconds
        )
        scheduler = LocalScheduler(
            pubsub.publish,
            _requests_topic(config),
            topic_path(config.project, RECONCILE_TICKS_TOPIC_ID),
            [
                ScheduleJob(route.schedule, route.cron)
                for route in config.routes
                if isinstance(route, ScheduleRoute)
            ],
            settings.reconcile_every_seconds,
        )
        log_sink = LogSink(
            emulators.get("vertex-ai", VertexAIEmulator).admin_url,
            pubsub.publish,
            _job_events_topic(config),
            poll_seconds=settings.log_sink_poll_seconds,
        )
    except BaseException:
        _stop_functions(functions)
        emulators.stop()
        raise
    eventarc.start()
    scheduler.start()
    log_sink.start()
    return LocalStack(
        settings,
        config,
        log_dir,
        emulators,
        functions,
        pubsub,
        eventarc,
        scheduler,
        dead_letter,
        log_sink,
    )


def _start_functions(log_dir: Path, env: Mapping[str, str]) -> dict[str, FunctionServer]:
    with ThreadPoolExecutor(len(TARGETS), thread_name_prefix="function") as pool:
        futures = {t: pool.submit(start_function_server, t, log_dir, env) for t in TARGETS}
    started = {t: f.result() for t, f in futures.items() if f.exception() is None}
    failed = [f.exception() for f in futures.values() if f.exception() is not None]
    if failed:
        _stop_functions(started)
        raise failed[0]  # type: ignore[misc]
    return started


def _stop_functions(functions: Mapping[str, FunctionServer]) -> None:
    for server in functions.values():
        server.stop()


def _requests_topic(config: Config) -> str:
    if config.requests_topic is None:
        raise ValueError(
            f"{config.source}: requests_topic is not set; the local stack pushes it to "
            "on_request, so set requests_topic (e.g. training-requests)"
        )
    return config.requests_topic


def _job_events_topic(config: Config) -> str:
    return config.job_events_topic or topic_path(config.project, "vertex-dispatch-job-events")


def _push_routes(config: Config, functions: Mapping[str, FunctionServer]) -> list[PushRoute]:
    return [
        PushRoute(_requests_topic(config), functions[REQUEST].url),
        PushRoute(_job_events_topic(config), functions[JOB_EVENT].url),
        PushRoute(topic_path(config.project, RECONCILE_TICKS_TOPIC_ID), functions[RECONCILE].url),
    ]


def _topics(config: Config) -> list[str]:
    """The topics the functions publish to that no function consumes."""
    return [topic for topic in (config.alerts_topic, config.completions_topic) if topic]


def _create_bucket(storage_url: str, project: str, bucket: str) -> None:
    request = urllib.request.Request(
        f"{storage_url}/storage/v1/b?project={project}",
        data=json.dumps({"name": bucket}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10):
            pass
    except urllib.error.HTTPError as error:
        if error.code != 409:  # it exists already
            raise


def _log_stand_ins_to(path: Path) -> None:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("emulator_stack.eventarc", "emulator_stack.scheduler", "emulator_stack.logsink"):
        stand_in = logging.getLogger(name)
        stand_in.handlers = [handler]
        stand_in.setLevel(logging.INFO)
        stand_in.propagate = False
