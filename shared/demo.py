"""``vertex-dispatch demo``: the emulators, the real dispatch code, and a story a person can follow.

The demo starts the local emulators (Pub/Sub, Firestore, Cloud Storage, Vertex AI with a fast
clock), points the real client libraries at them, and plays:

1. a dataset lands as many shards and a ``_SUCCESS`` marker: the shards are ignored at once, the
   marker (delivered twice, as Eventarc may) starts exactly one FLEX_START job, which waits for
   GPUs, runs when capacity appears, and succeeds;
2. a job request on Pub/Sub lands on a persistent resource and starts at once;
3. an invalid request is rejected with its reasons, recorded and alerted; nothing is created.

Events are handed to ``shared.dispatch.dispatch_event`` in this process, exactly as the Cloud
Function entry points do. Component logs go to files under the printed log folder.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudevents.http import CloudEvent

from shared import logs

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1

DEMO_DIR = Path(__file__).resolve().parents[1] / "deploy" / "local" / "demo"
DISPATCH_CONFIG = DEMO_DIR / "dispatch-config.yaml"
EMULATOR_CONFIG = DEMO_DIR / "vertex-emulator.yaml"
PROJECT = "local-project"
BUCKET = "demo-datasets"
SHARDS = 200
ALERTS_SUBSCRIPTION = "demo-alerts"
TERMINAL_STATES = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


class Narrator:
    """Prints the story with the wall-clock seconds since the start."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self._started:6.1f}s] {text}", flush=True)

    def chapter(self, title: str) -> None:
        print(f"\n== {title}", flush=True)


def run_demo(time_scale: float, keep_running: bool) -> int:
    """Play the story; 0 when every chapter ended as expected."""
    from emulator_stack import LOCAL_PROJECT, scoped_environ, start_emulators
    from emulator_stack.vertex_ai import start_vertex_ai_emulator

    narrator = Narrator()
    log_dir = Path(tempfile.mkdtemp(prefix="vertex-dispatch-demo-"))
    narrator.say(f"starting the emulators (logs in {log_dir}) ...")
    vertex_launcher = functools.partial(
        start_vertex_ai_emulator, config=EMULATOR_CONFIG, time_scale=time_scale
    )
    with start_emulators(
        ["pubsub", "firestore", "storage", "vertex-ai"],
        log_dir,
        launchers={"vertex-ai": vertex_launcher},
    ) as stack:
        for name, emulator in stack.emulators.items():
            narrator.say(
                f"  {name:<10} {emulator.address}  ready in {emulator.startup_seconds:.1f}s"
            )
        env = {
            **stack.env,
            "GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT,
            "VERTEX_DISPATCH_CONFIG": str(DISPATCH_CONFIG),
        }
        with scoped_environ(env), _logs_to(log_dir / "dispatch.log"):
            admin_url = f"http://{env['VERTEX_AI_EMULATOR_HOST']}/emulator/v1/"
            story = Story(narrator, admin_url, time_scale)
            ok = story.play()
            if keep_running:
                _wait_for_interrupt(narrator, env)
    narrator.say("emulators stopped")
    return 0 if ok else 1


class Story:
    """The chapters, each checking what it shows."""

    def __init__(self, narrator: Narrator, admin_url: str, time_scale: float) -> None:
        self.say = narrator.say
        self.chapter = narrator.chapter
        self.admin_url = admin_url
        self.time_scale = time_scale
        self.results: list[tuple[str, bool]] = []

    def play(self) -> bool:
        self._prepare()
        self._dataset_lands()
        self._request_on_persistent_resource()
        self._invalid_request()
        self.chapter("summary")
        for title, ok in self.results:
            self.say(f"  {'ok  ' if ok else 'FAIL'} {title}")
        self._print_ledger()
        return all(ok for _, ok in self.results)

    def _prepare(self) -> None:
        from google.cloud import pubsub_v1

        from shared.clients import publisher_client, storage_client

        publisher_client().create_topic(name=self._topic("training-alerts"))
        pubsub_v1.SubscriberClient().create_subscription(
            name=f"projects/{PROJECT}/subscriptions/{ALERTS_SUBSCRIPTION}",
            topic=self._topic("training-alerts"),
        )
        storage_client(PROJECT).create_bucket(BUCKET)
        self.say(f"created bucket gs://{BUCKET}, topic training-alerts and its subscription")

    # --- chapter 1 ---------------------------------------------------------------------------

    def _dataset_lands(self) -> None:
        from shared.clients import storage_client
        from shared.dispatch import dispatch_event

        self.chapter(f"1. a dataset lands: {SHARDS} shards, then imagenet/2026-12-01/_SUCCESS")
        bucket = storage_client(PROJECT).bucket(BUCKET)
        prefix = "imagenet/2026-12-01"
        started = time.perf_counter()
        outcomes: dict[str, int] = {}
        for index in range(SHARDS):
            blob = bucket.blob(f"{prefix}/train-{index:05d}-of-{SHARDS:05d}.tfrecord")
            blob.upload_from_string(b"shard")
            outcome = dispatch_event(_object_event(blob)).outcome.value
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        elapsed = time.perf_counter() - started
        self.say(f"{SHARDS} shard uploads and events in {elapsed:.1f}s: {outcomes}")
        marker = bucket.blob(f"{prefix}/_SUCCESS")
        marker.upload_from_string(b"")
        first = dispatch_event(_object_event(marker))
        self.say(
            f"marker delivered: {first.outcome.value}, run {first.run_id}, job {first.job_name}"
        )
        second = dispatch_event(_object_event(marker))
        self.say(f"marker delivered again (at-least-once): {second.outcome.value}, no new job")
        creates = self._creates()
        self.say(f"CreateCustomJob calls so far: {creates}")
        self.results.append(("one marker, two deliveries -> one FLEX_START job", creates == 1))
        if first.job_name is None:
            self.results.append(("the FLEX_START job succeeds", False))
            return
        job = self._get_job(first.job_name)
        scheduling = job.job_spec.scheduling
        self.say(
            f"job spec: {scheduling.strategy.name}, max wait "
            f"{int(scheduling.max_wait_duration.total_seconds())}s, labels {dict(job.labels)}"
        )
        simulated_wait = 1800
        self.say(
            f"no A100 is free in us-central1: the job waits (clock x{self.time_scale:g}; "
            f"capacity arrives after {simulated_wait // 60} simulated minutes)"
        )
        self._watch(first.job_name, until=lambda state: state == "JOB_STATE_QUEUED", timeout=5)
        time.sleep(simulated_wait / self.time_scale)
        self._admin(
            "PUT",
            "capacity",
            {"region": "us-central1", "acceleratorType": "NVIDIA_TESLA_A100", "count": 8},
        )
        self.say("capacity appears: 8 x NVIDIA_TESLA_A100 in us-central1")
        final = self._watch(first.job_name, until=lambda state: state in TERMINAL_STATES)
        self.results.append(("the FLEX_START job succeeds", final == "JOB_STATE_SUCCEEDED"))

    # --- chapter 2 ---------------------------------------------------------------------------

    def _request_on_persistent_resource(self) -> None:
        from shared.dispatch import dispatch_event

        self.chapter("2. a job request on Pub/Sub lands on the persistent resource a100-pool")
        body = {"template": "finetune-pool", "params": {"dataset_uri": "gs://demo-datasets/ft/"}}
        result = dispatch_event(_request_event(body, {"kind": "train"}))
        self.say(f"request: {result.outcome.value}, job {result.job_name}")
        if result.job_name is None:
            self.results.append(("the request runs on the persistent resource", False))
            return
        job = self._get_job(result.job_name)
        self.say(f"persistentResourceId = {job.job_spec.persistent_resource_id!r}")
        final = self._watch(result.job_name, until=lambda state: state == "JOB_STATE_RUNNING")
        self.results.append(
            (
                "the request runs on the persistent resource at once",
                final == "JOB_STATE_RUNNING" and job.job_spec.persistent_resource_id == "a100-pool",
            )
        )

    # --- chapter 3 ---------------------------------------------------------------------------

    def _invalid_request(self) -> None:
        from shared.dispatch import dispatch_event

        self.chapter("3. an invalid request: an unknown parameter and an image the guards forbid")
        before = self._creates()
        body = {"template": "resnet-a100", "params": {"image": "evil.example/miner:latest"}}
        result = dispatch_event(_request_event(body, {"kind": "train"}))
        self.say(f"request: {result.outcome.value}: {result.detail}")
        alert = self._pull_alert()
        if alert:
            self.say(f"alert on training-alerts: reason={alert['reason']}, run={alert['run_id']}")
            self.say(f"  what to do: {alert['what_to_do']}")
        self.results.append(
            (
                "the invalid request is rejected, alerted, and creates nothing",
                result.outcome.value == "rejected"
                and alert is not None
                and self._creates() == before,
            )
        )

    # --- helpers -----------------------------------------------------------------------------

    def _watch(self, job_name: str, until: Callable[[str], bool], timeout: float = 60) -> str:
        """Print the job's state changes until ``until(state)``; the last state seen."""
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            state = self._get_job(job_name).state.name
            if state != seen:
                self.say(f"  {job_name.rsplit('/', 1)[-1]}: {state}")
                seen = state
            if until(state):
                break
            time.sleep(0.2)
        return seen

    def _get_job(self, name: str) -> aiplatform_v1.CustomJob:
        from shared import vertex

        return vertex.get_custom_job(name)

    def _creates(self) -> int:
        return len(self._admin("GET", "requests?method=CreateCustomJob")["requests"])

    def _admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.admin_url + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")

    def _pull_alert(self) -> dict[str, Any] | None:
        from google.cloud import pubsub_v1

        subscriber = pubsub_v1.SubscriberClient()
        name = f"projects/{PROJECT}/subscriptions/{ALERTS_SUBSCRIPTION}"
        response = subscriber.pull(subscription=name, max_messages=10, timeout=10)
        if not response.received_messages:
            return None
        subscriber.acknowledge(
            subscription=name, ack_ids=[m.ack_id for m in response.received_messages]
        )
        return json.loads(response.received_messages[-1].message.data)

    def _print_ledger(self) -> None:
        from shared.ledger import RunStatus, default_ledger

        self.say("runs in the ledger (Firestore):")
        for snapshot in default_ledger(PROJECT).list_runs(list(RunStatus)[:10], limit=50):
            run = snapshot.run
            jobs = ", ".join(a.job_name.rsplit("/", 1)[-1] for a in run.attempts if a.job_name)
            self.say(f"  {run.run_id}  {run.status.value:<10} {run.run_key}  jobs: {jobs or '-'}")

    @staticmethod
    def _topic(name: str) -> str:
        return f"projects/{PROJECT}/topics/{name}"


def _object_event(blob: Any) -> CloudEvent:
    """What Eventarc delivers for a finalized object (int64 fields as JSON strings)."""
    blob.reload()
    return CloudEvent(
        {
            "type": "google.cloud.storage.object.v1.finalized",
            "source": f"//storage.googleapis.com/projects/_/buckets/{blob.bucket.name}",
            "subject": f"objects/{blob.name}",
            "id": f"{blob.bucket.name}/{blob.name}/{blob.generation}",
            "time": datetime.now(UTC).isoformat(),
        },
        {
            "bucket": blob.bucket.name,
            "name": blob.name,
            "generation": str(blob.generation),
            "metageneration": str(blob.metageneration or 1),
            "size": str(blob.size or 0),
            "contentType": blob.content_type or "application/octet-stream",
        },
    )


def _request_event(body: dict[str, Any], attributes: dict[str, str]) -> CloudEvent:
    """What Eventarc delivers for a message published on the requests topic."""
    message_id = str(uuid.uuid4().int % 10**16)
    return CloudEvent(
        {
            "type": "google.cloud.pubsub.topic.v1.messagePublished",
            "source": f"//pubsub.googleapis.com/projects/{PROJECT}/topics/training-requests",
            "id": message_id,
        },
        {
            "message": {
                "data": base64.b64encode(json.dumps(body).encode()).decode(),
                "attributes": attributes,
                "messageId": message_id,
                "publishTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            },
            "subscription": f"projects/{PROJECT}/subscriptions/dispatch",
        },
    )


@contextmanager
def _logs_to(path: Path) -> Iterator[None]:
    """Send the structured logs to ``path`` for the block, so the console shows only the story."""
    with path.open("a", encoding="utf-8") as stream:
        logs.configure(logging.INFO, stream)
        try:
            yield
        finally:
            logging.getLogger().handlers.clear()


def _wait_for_interrupt(narrator: Narrator, env: dict[str, str]) -> None:
    narrator.say("the emulators keep running; point your tools at them with:")
    for name, value in sorted(env.items()):
        print(f"  export {name}={value}")
    narrator.say("press Ctrl-C to stop")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
