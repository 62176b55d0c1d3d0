"""``vertex-dispatch demo``: the whole local stack, and a story a person can follow.

It starts what production runs (emulators, each function under functions-framework, the Pub/Sub
push wiring, the Eventarc and Cloud Scheduler stand-ins: ``emulator_stack.local_stack``) and plays
every part of the mission through the real paths only (objects written to the bucket, messages
published, the Vertex AI emulator's admin API for capacity), printing each run's progress from the
ledger:

1. a dataset lands as shards and a ``_SUCCESS`` marker: one FLEX_START job waits for GPUs, runs
   when capacity appears, succeeds, and its completion is published;
2. a request on Pub/Sub lands on the persistent resource and starts at once;
3. the persistent resource is full: the next request falls through to FLEX_START;
4. a FLEX_START wait expires: the run is resubmitted to the next placement (another region);
5. a job fails in user code: retried per policy, then alerted;
6. an invalid request is rejected with its reasons and alerted; nothing is created;
7. the config's scheduled retrain fires (the Scheduler stand-in);
8. the reservation is full, Spot is preempted, the run lands elsewhere: a first request takes the
   Compute Engine reservation's only VM; the next one's walk skips the full reservation (a live
   rule), its Spot job is preempted (a capacity end, so the Spot placement cools down), and the
   run succeeds on demand in us-east4;
9. a sweep (a HyperparameterTuningJob of 6 trials, 2 at a time, each on one L4 under
   FLEX_START in us-east4, which has none): its trials wait for GPUs, run when capacity appears,
   and the sweep succeeds; its completion names the best trial;
10. a training pipeline (a TrainingPipeline) runs its training task on the persistent resource
    l4-pool, then its model is uploaded: its completion names the model;
11. a nightly export lands without a marker: its shards are written first of all (so its quiet
    minute passes while the other chapters play), one run waits WAITING_DATA, and once no shard
    has been written for ``quiet_for`` (1 minute) the reconciler starts exactly one job for the
    directory.

Then a summary. The checks look at the ledger, the topics and the Vertex AI request log.

Ctrl-C, SIGTERM and SIGHUP all stop the demo the same way, at any point: the stack is stopped
(every emulator's and function's process group) before the process exits. A signal's default
action would end the process at once, leaving those groups running: neither ``with`` blocks nor
``atexit`` handlers run then, and the groups are sessions of their own, out of the signal's reach.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from emulator_stack.local_stack import LocalStack
    from emulator_stack.observe import TopicReader, VertexAdmin
    from shared.adapters.ledger import Ledger, Run

DEMO_DIR = Path(__file__).resolve().parents[1] / "deploy" / "local" / "demo"
DISPATCH_CONFIG = DEMO_DIR / "dispatch-config.yaml"
EMULATOR_CONFIG = DEMO_DIR / "vertex-emulator.yaml"
BUCKET = "demo-datasets"
SHARDS = 50
REQUEST_ATTRIBUTES = {"kind": "train"}
WAIT_SECONDS = 30.0  # per chapter, real time
# The Compute Engine reservation of chapter 8 (deploy/local/demo/*.yaml): ONE A100 80GB VM.
RESERVATION = "projects/local-project/zones/us-central1-a/reservations/a100-80gb"
# Chapter 9's sweep: its trials' GPUs (none in us-east4 until the story adds them).
SWEEP_REGION = "us-east4"
SWEEP_GPU = "NVIDIA_L4"
SWEEP_TRIALS = 6  # max_trials of the resnet-sweep template
SWEEP_PARALLEL = 2  # its parallel_trials: the GPUs the story adds
# Chapter 10's persistent resource (deploy/local/demo/vertex-emulator.yaml).
PIPELINE_POOL = "l4-pool"
CREATE_SWEEP = "CreateHyperparameterTuningJob"
CREATE_PIPELINE = "CreateTrainingPipeline"
# Chapter 11's export (the nightly-export route of deploy/local/demo/dispatch-config.yaml).
EXPORT_PREFIX = "exports/2026-12-02/"
EXPORT_SHARDS = 24  # min_objects is 20
EXPORT_QUIET_SECONDS = 60.0  # its quiet_for
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class DemoStopped(KeyboardInterrupt):
    """A stop signal arrived: raised in the main thread wherever it was, to unwind the stack.

    A ``KeyboardInterrupt`` (not an ``Exception``), so that no chapter's error handling takes it
    for a failed chapter and plays on.
    """

    def __init__(self, signal_number: int) -> None:
        self.signal_number = signal_number
        self.signal_name = signal.Signals(signal_number).name
        super().__init__(f"stopped by {self.signal_name}")


class Narrator:
    """Prints the story with the wall-clock seconds since the start."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self._started:6.1f}s] {text}", flush=True)

    def chapter(self, title: str) -> None:
        print(f"\n== {title}", flush=True)


def run_demo(time_scale: float, keep_running: bool) -> int:
    """Start the local stack, play the story; 0 when every chapter ended as expected."""
    from emulator_stack import scoped_environ
    from emulator_stack.errors import EmulatorStackError
    from emulator_stack.local_stack import StackSettings, start_local_stack

    narrator = Narrator()
    log_dir = Path(tempfile.mkdtemp(prefix="vertex-dispatch-demo-"))
    settings = StackSettings(DISPATCH_CONFIG, EMULATOR_CONFIG, time_scale)
    with _stop_signals_interrupt():
        narrator.say(f"starting the local stack (every log in {log_dir}) ...")
        try:
            stack = start_local_stack(settings, log_dir)
        except EmulatorStackError as error:
            print(f"demo: the local stack could not start:\n{error}", flush=True)
            return 2
        except DemoStopped as stop:  # start_local_stack stops what it had started
            narrator.say(f"{stop} while starting; no process left")
            return 128 + stop.signal_number
        ok, stopped = False, None
        try:
            with scoped_environ(stack.env):
                for name, healthy in stack.health().items():
                    narrator.say(f"  {'up  ' if healthy else 'DOWN'} {name}")
                ok = Story(stack, narrator, time_scale).play()
                if keep_running:
                    _wait_for_interrupt(narrator, stack)
        except DemoStopped as stop:
            stopped = stop
            narrator.say(f"{stop} before the scenarios ended; stopping the stack ...")
        finally:
            _ignore_stop_signals()  # a second signal must not cut the stopping short
            stack.stop()
    narrator.say("stack stopped, no process left")
    if stopped is not None:
        return 128 + stopped.signal_number
    return 0 if ok else 1


@contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """While inside, each of ``STOP_SIGNALS`` raises ``DemoStopped``; the old handlers after."""
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}

    def stop(signal_number: int, _frame: FrameType | None) -> None:
        _ignore_stop_signals()
        raise DemoStopped(signal_number)

    for number in STOP_SIGNALS:
        signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _ignore_stop_signals() -> None:
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)


class Story:
    """The chapters, each checking what it shows."""

    def __init__(self, stack: LocalStack, narrator: Narrator, time_scale: float) -> None:
        from emulator_stack.observe import TopicReader, VertexAdmin
        from shared.adapters.ledger import default_ledger

        self.stack = stack
        self.say = narrator.say
        self.chapter = narrator.chapter
        self.time_scale = time_scale
        self.project = stack.config.project
        self.vertex: VertexAdmin = VertexAdmin(stack.vertex_ai.address)
        self.ledger: Ledger = default_ledger(self.project)
        alerts = stack.config.alerts_topic
        self.alerts: TopicReader = TopicReader(stack.pubsub, self.project, alerts)
        completions = stack.config.completions_topic or ""
        self.completions: TopicReader = TopicReader(stack.pubsub, self.project, completions)
        self.results: list[tuple[str, bool]] = []
        self.seen: dict[str, list[str]] = {}  # run id -> job states read in the ledger, in order
        self.export_run_id: str | None = None  # chapter 11's run, once its first shard opened it
        self.export_written = time.monotonic()  # when its last shard was written
        self.export_waited = False  # whether its run was read WAITING_DATA

    def play(self) -> bool:
        try:
            self.export_lands()
        except Exception as error:  # told as chapter 11's failure, at its place in the story
            self.say(f"  the export's upload failed: {type(error).__name__}: {error}")
        for chapter in (
            self.dataset_lands,
            self.request_on_persistent_resource,
            self.persistent_resource_full,
            self.flex_start_wait_expires,
            self.user_code_fails,
            self.invalid_request,
            self.scheduled_retrain,
            self.reservation_full_spot_preempted,
            self.sweep_waits_then_succeeds,
            self.pipeline_uploads_its_model,
            self.export_goes_quiet,
        ):
            try:
                chapter()
            except Exception as error:  # a failed chapter must not hide the others
                self.say(f"  chapter failed: {type(error).__name__}: {error}")
                self.results.append((chapter.__name__.replace("_", " "), False))
        self.chapter("summary")
        for title, ok in self.results:
            self.say(f"  {'ok  ' if ok else 'FAIL'} {title}")
        self.say(
            f"Vertex AI CreateCustomJob calls: {len(self.vertex.created_jobs())}; "
            f"{CREATE_SWEEP} calls: {len(self.created(CREATE_SWEEP))}; {CREATE_PIPELINE} "
            f"calls: {len(self.created(CREATE_PIPELINE))}; alerts: "
            f"{len(self.alerts.poll())}; completions: {len(self.completions.poll())}; "
            f"reconcile ticks: {self.stack.scheduler.reconcile_ticks}; storage events "
            f"delivered: {self.stack.eventarc.counts.delivered}"
        )
        return all(ok for _, ok in self.results)

    # --- the chapters ------------------------------------------------------------------------

    def dataset_lands(self) -> None:
        from emulator_stack.observe import upload_object

        prefix = "imagenet/2026-12-01"
        self.chapter(f"1. a dataset lands in gs://{BUCKET}/{prefix}/: {SHARDS} shards + _SUCCESS")
        for index in range(SHARDS):
            name = f"{prefix}/train-{index:05d}-of-{SHARDS:05d}.tfrecord"
            upload_object(self.stack.storage.url, BUCKET, name, b"shard")
        # The storage emulator drops an upload with an empty body, so the marker holds a newline.
        upload_object(self.stack.storage.url, BUCKET, f"{prefix}/_SUCCESS", b"\n")
        self.say("uploaded; the Eventarc stand-in delivers one finalized event per object")
        run = self.follow(lambda r: f"{BUCKET}/{prefix}/" in r.run_key, _has_state("QUEUED"))
        self.say("no A100 is free in us-central1: the FLEX_START job waits for GPUs")
        time.sleep(min(3.0, 1800 / self.time_scale))
        self.vertex.set_capacity("us-central1", "NVIDIA_TESLA_A100", 8)
        self.say("capacity appears: 8 x NVIDIA_TESLA_A100 in us-central1")
        run = self.follow(lambda r: r.run_id == run.run_id, _status("SUCCEEDED"))
        completion = self.wait_for_message(self.completions, run.run_id)
        if completion:
            self.say(f"completion published: state={completion.get('state')}")
        jobs = [job for job in self.vertex.created_jobs() if _run_label(job) == run.run_id]
        strategy = jobs[0]["jobSpec"]["scheduling"]["strategy"] if jobs else None
        self.results.append(
            (
                dataset_summary(
                    self.seen.get(run.run_id, []), len(jobs), strategy, completion is not None
                ),
                run.status.value == "SUCCEEDED"
                and len(jobs) == 1
                and strategy in ("FLEX_START", 6)
                and completion is not None,
            )
        )

    def request_on_persistent_resource(self) -> None:
        self.chapter("2. a request on Pub/Sub lands on the persistent resource a100-pool")
        message_id = self.publish_request("finetune-pool", "gs://demo-datasets/ft/")
        run = self.follow(_by_message(message_id), _status("RUNNING"))
        job = self.vertex.job(run.attempts[-1].job_name or "")
        self.say(f"persistentResourceId = {job['jobSpec'].get('persistentResourceId')!r}")
        self.results.append(
            (
                "a request runs on the persistent resource at once",
                run.status.value == "RUNNING"
                and job["jobSpec"].get("persistentResourceId") == "a100-pool",
            )
        )

    def persistent_resource_full(self) -> None:
        self.chapter("3. the pool's only replica is busy: the next request falls to FLEX_START")
        message_id = self.publish_request("finetune-pool", "gs://demo-datasets/ft2/")
        run = self.follow(_by_message(message_id), _status("RUNNING", "SUCCEEDED"))
        job = self.vertex.job(run.attempts[-1].job_name or "")
        strategy = job["jobSpec"].get("scheduling", {}).get("strategy")
        self.say(f"placed with strategy {strategy}, no persistentResourceId")
        self.results.append(
            (
                "persistent resource full -> FLEX_START",
                strategy == "FLEX_START" and not job["jobSpec"].get("persistentResourceId"),
            )
        )

    def flex_start_wait_expires(self) -> None:
        self.chapter("4. no H100 in us-central1: the FLEX_START wait (20m) expires")
        message_id = self.publish_request("llm-h100", "gs://demo-datasets/llm/")
        run = self.follow(_by_message(message_id), _status("RUNNING", "SUCCEEDED"))
        regions = [attempt.region for attempt in run.attempts]
        self.say(f"attempts by region: {regions}")
        self.results.append(
            (
                "FLEX_START wait expires -> resubmitted to the next placement (us-east4)",
                len(run.attempts) >= 2 and regions[-1] == "us-east4",
            )
        )

    def user_code_fails(self) -> None:
        self.chapter("5. an evaluation fails in user code: retried once (policy), then alerted")
        message_id = self.publish_request("flaky-eval", "gs://demo-datasets/eval/")
        run = self.follow(_by_message(message_id), _status("FAILED"))
        alert = self.wait_for_message(self.alerts, run.run_id)
        if alert:
            self.say(f"alert: reason={alert.get('reason')}: {alert.get('what_to_do')}")
        self.results.append(
            (
                "user-code failure -> retried per policy -> alert",
                run.status.value == "FAILED" and len(run.attempts) == 2 and alert is not None,
            )
        )

    def invalid_request(self) -> None:
        self.chapter("6. an invalid request: an unknown parameter the template does not take")
        before = len(self.vertex.created_jobs())
        body = {"template": "resnet-a100", "params": {"image": "evil.example/miner:latest"}}
        message_id = self.stack.pubsub.publish(
            _requests_topic(self.stack), json.dumps(body).encode(), REQUEST_ATTRIBUTES
        )
        run = self.follow(_by_message(message_id), _status("REJECTED"))
        alert = self.wait_for_message(self.alerts, run.run_id)
        if alert:
            self.say(f"alert: reason={alert.get('reason')}: {alert.get('message')}")
        self.results.append(
            (
                "invalid request -> rejected with reasons, alerted, nothing created",
                run.status.value == "REJECTED"
                and alert is not None
                and len(self.vertex.created_jobs()) == before,
            )
        )

    def scheduled_retrain(self) -> None:
        self.chapter("7. the config's schedule nightly-retrain fires (Cloud Scheduler stand-in)")
        self.stack.scheduler.fire("nightly-retrain")
        # Done once the job exists, whatever its state: with A100s free in us-central1 (chapter 1
        # added them) the job may be PENDING before the ledger is read, and waiting for QUEUED
        # then cost the chapter its whole WAIT_SECONDS.
        run = self.follow(lambda r: r.run_key.startswith("schedule:nightly-retrain@"), _has_job)
        self.results.append(("scheduled retrain -> a run and its job", _has_job(run)))

    def reservation_full_spot_preempted(self) -> None:
        from shared.policy.records import placement_kind

        self.chapter("8. the reservation is full, Spot is preempted, the run lands elsewhere")
        first = self.publish_request("bert-reserved", "gs://demo-datasets/bert/a/")
        holder_run = self.follow(_by_message(first), _status("RUNNING"))
        holder = self.seen_job(holder_run.attempts[-1].job_name if holder_run.attempts else None)
        if holder is not None:
            self.say(f"its job is {holder.state} on reservation {holder.reservation} (one VM)")
        message_id = self.publish_request("bert-reserved", "gs://demo-datasets/bert/b/")
        run = self.follow(_by_message(message_id), _status(*_ENDED))
        for attempt in run.attempts:
            for skip in attempt.skips:
                kind, why = placement_kind(skip.placement), skip.skip_class
                self.say(f"  attempt #{attempt.number} skipped the {kind} ({why}): {skip.reason}")
            if attempt.error:
                self.say(f"  attempt #{attempt.number} ended: {attempt.error.get('message')}")
        jobs = [self.seen_job(attempt.job_name) for attempt in run.attempts]
        creates = [job for job in self.vertex.created_jobs() if _run_label(job) == run.run_id]
        for cooldown in self.ledger.placement_cooldowns().values():
            if cooldown.run_id == run.run_id:
                self.say(
                    f"{cooldown.kind} in {cooldown.region} ({cooldown.machine}) cools down until "
                    f"{cooldown.until:%H:%M:%S}: new runs try it after the others"
                )
        self.results.append(
            placement_summary(run, holder, [job for job in jobs if job], len(creates))
        )

    def sweep_waits_then_succeeds(self) -> None:
        self.chapter(
            f"9. a sweep: {SWEEP_TRIALS} tuning trials, {SWEEP_PARALLEL} at a time, each on one "
            f"L4 under FLEX_START in {SWEEP_REGION} (none free there)"
        )
        message_id = self.publish_request("resnet-sweep", "gs://demo-datasets/sweep/")
        run = self.follow(_by_message(message_id), _has_job)
        job_name = run.attempts[-1].job_name if run.attempts else None
        # Let the trials wait a simulated half hour, then look at them: none may have run.
        time.sleep(min(3.0, 1800 / self.time_scale))
        waiting = seen_sweep(self.vertex.job(job_name)) if job_name else None
        if waiting is not None:
            self.say(
                f"the tuning job is {waiting.state}: {waiting.trials_succeeded} of "
                f"{waiting.max_trials} trials succeeded, the trials wait for GPUs"
            )
        self.vertex.set_capacity(SWEEP_REGION, SWEEP_GPU, SWEEP_PARALLEL)
        self.say(f"capacity appears: {SWEEP_PARALLEL} x {SWEEP_GPU} in {SWEEP_REGION}")
        run = self.follow(lambda r: r.run_id == run.run_id, _status(*_ENDED))
        ended = seen_sweep(self.vertex.job(job_name)) if job_name else None
        completion = self.wait_for_message(self.completions, run.run_id)
        best = (completion or {}).get("best_trial")
        if best:
            self.say(
                f"completion published: best trial {best.get('id')} with metrics "
                f"{_rounded(best.get('metrics'))} and parameters "
                f"{_rounded(best.get('parameters'))}"
            )
        creates = [
            job
            for job in self.created(CREATE_SWEEP, "hyperparameterTuningJob")
            if _run_label(job) == run.run_id
        ]
        strategy = (
            creates[0].get("trialJobSpec", {}).get("scheduling", {}).get("strategy")
            if creates
            else None
        )
        self.results.append(
            sweep_summary(
                len(creates),
                strategy,
                waiting,
                ended,
                run.status.value,
                completion,
            )
        )

    def pipeline_uploads_its_model(self) -> None:
        self.chapter(
            f"10. a training pipeline: its training task on the persistent resource "
            f"{PIPELINE_POOL}, then its model uploaded"
        )
        message_id = self.publish_request("resnet-pipeline", "gs://demo-datasets/pipeline/")
        run = self.follow(_by_message(message_id), _status(*_ENDED))
        job_name = run.attempts[-1].job_name if run.attempts else None
        pipeline = seen_pipeline(self.vertex.job(job_name)) if job_name else None
        if pipeline is not None:
            self.say(
                f"the pipeline ran on persistentResourceId = {pipeline.persistent_resource!r} "
                f"and ended {pipeline.state}; model uploaded: {pipeline.model or 'none'}"
            )
        completion = self.wait_for_message(self.completions, run.run_id)
        if completion:
            self.say(
                f"completion published: model={completion.get('model')} "
                f"version={completion.get('model_version')}"
            )
        creates = [
            job
            for job in self.created(CREATE_PIPELINE, "trainingPipeline")
            if _run_label(job) == run.run_id
        ]
        self.results.append(pipeline_summary(pipeline, len(creates), run.status.value, completion))

    def export_lands(self) -> None:
        from emulator_stack.observe import upload_object

        self.chapter(
            f"11 begins. a nightly export writes {EXPORT_SHARDS} shards to "
            f"gs://{BUCKET}/{EXPORT_PREFIX} and no marker (told last, once it is quiet)"
        )
        for index in range(EXPORT_SHARDS):
            name = f"{EXPORT_PREFIX}part-{index:05d}.parquet"
            upload_object(self.stack.storage.url, BUCKET, name, b"rows")
        self.export_written = time.monotonic()
        run = self.follow(lambda r: EXPORT_PREFIX in r.run_key, _status("WAITING_DATA"))
        self.export_run_id = run.run_id
        self.export_waited = run.status.value == "WAITING_DATA"
        self.say(
            f"one run waits for the dataset ({run.run_id}): the shards after the first cost no "
            "ledger write; the reconciler lists the directory and waits for a quiet minute"
        )

    def export_goes_quiet(self) -> None:
        self.chapter("11. the export has been quiet for its quiet_for (1 minute): its run starts")
        if self.export_run_id is None:
            raise RuntimeError("the export's run never appeared (see chapter 11's beginning)")
        # quiet_for after the last shard, plus a few reconcile ticks and the job's run.
        left = self.export_written + EXPORT_QUIET_SECONDS + 45 - time.monotonic()
        run = self.follow(
            lambda r: r.run_id == self.export_run_id, _status(*_ENDED), seconds=max(left, 5)
        )
        jobs = [job for job in self.vertex.created_jobs() if _run_label(job) == run.run_id]
        args = jobs[0]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] if jobs else []
        wait = run.data_wait
        objects = getattr(wait, "objects", None)
        self.say(f"  counted {objects} shards; the job's arguments: {' '.join(args)}")
        self.results.append(
            (
                f"marker-less export -> waited WAITING_DATA, then {len(jobs)} job on "
                f"{objects} shards ({run.status.value})",
                self.export_waited
                and run.status.value == "SUCCEEDED"
                and len(jobs) == 1
                and objects == EXPORT_SHARDS
                and f"--data=gs://{BUCKET}/{EXPORT_PREFIX}" in args,
            )
        )

    # --- helpers -----------------------------------------------------------------------------

    def publish_request(self, template: str, dataset_uri: str) -> str:
        body = {"template": template, "params": {"dataset_uri": dataset_uri}}
        message_id = self.stack.pubsub.publish(
            _requests_topic(self.stack), json.dumps(body).encode(), REQUEST_ATTRIBUTES
        )
        self.say(f"published a request for {template} (message {message_id})")
        return message_id

    def follow(
        self,
        which: Callable[[Run], bool],
        done: Callable[[Run], bool],
        seconds: float = WAIT_SECONDS,
    ) -> Run:
        """Print the run's progress from the ledger until ``done`` (at most ``seconds``); the
        last run read."""
        deadline = time.monotonic() + seconds
        shown = ""
        run: Run | None = None
        while time.monotonic() < deadline:
            run = next((r for r in self._runs() if which(r)), run)
            if run is not None:
                line = _progress(run)
                _note_states(self.seen.setdefault(run.run_id, []), run)
                if line != shown:
                    self.say(f"  {line}")
                    shown = line
                if done(run):
                    return run
            time.sleep(0.3)
        if run is None:
            raise TimeoutError(f"no run appeared in the ledger within {seconds:g} s")
        self.say(f"  (still {run.status.value} after {seconds:g} s)")
        return run

    def created(self, method: str, field: str | None = None) -> list[dict[str, Any]]:
        """The successful ``method`` calls in the Vertex AI emulator's request log, oldest first:
        their request bodies, or the ``field`` of each (the job the call created)."""
        bodies = [
            entry.get("request", {})
            for entry in self.vertex.requests(method)
            if entry.get("status") == "OK"
        ]
        return [body.get(field, {}) for body in bodies] if field else bodies

    def seen_job(self, name: str | None) -> SeenJob | None:
        """The job ``name`` as the Vertex AI emulator holds it now; None without a name."""
        return seen_job(self.vertex.job(name)) if name else None

    def wait_for_message(self, reader: TopicReader, run_id: str) -> dict[str, Any] | None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = reader.find(lambda body: body.get("run_id") == run_id)
            if found is not None:
                return found
            time.sleep(0.3)
        return None

    def _runs(self) -> list[Run]:
        from shared.adapters.ledger import RunStatus

        return [snapshot.run for snapshot in self.ledger.list_runs(list(RunStatus), limit=500)]


def dataset_summary(
    states_seen: Sequence[str], jobs: int, strategy: object, completion: bool
) -> str:
    """Chapter 1's summary line, naming only what the demo saw: the jobs Vertex AI was asked to
    create, the job states read in the ledger (in order; a state that lasted less than the time
    between two reads is never seen), and whether the completion message arrived."""
    flex_start = strategy in ("FLEX_START", 6)  # REST JSON name, or the enum's number
    if jobs == 1:
        job = "exactly one FLEX_START job" if flex_start else f"one job (strategy {strategy})"
    else:
        job = f"{jobs} jobs"
    steps = ["dataset", job]
    waited = [state for state in ("QUEUED", "PENDING") if state in states_seen]
    if waited:
        steps.append(f"waits ({', '.join(waited)} seen)")
    if "RUNNING" in states_seen:
        steps.append("runs")
    if "SUCCEEDED" in states_seen:
        steps.append("succeeds" if "RUNNING" in states_seen else "succeeds (RUNNING not seen)")
    elif states_seen:
        steps.append(f"last seen {states_seen[-1]}")
    else:
        steps.append("no job state seen")
    steps.append("completion" if completion else "no completion")
    return " -> ".join(steps)


_ENDED: Final = ("SUCCEEDED", "FAILED", "REJECTED", "CANCELLED")
_STRATEGIES: Final = {3: "STANDARD", 4: "SPOT", 6: "FLEX_START"}  # the enum's numbers we name
_RESERVATION_KEY: Final = "compute.googleapis.com/reservation-name"
_KINDS: Final = {"SPOT": "Spot", "STANDARD": "on demand", "": "on demand"}  # by strategy
_ENDS: Final = {"SUCCEEDED": "succeeds", "FAILED": "fails", "CANCELLED": "cancelled"}


@dataclass(frozen=True)
class SeenJob:
    """One job as the Vertex AI emulator holds it (its REST JSON), reduced to what the demo
    checks: where it ran and how it ended."""

    region: str
    strategy: str  # scheduling.strategy's name; "" when unset
    reservation: str | None  # the reservation its pools name (SPECIFIC_RESERVATION), else None
    state: str  # without the JOB_STATE_ prefix
    error: str  # its error's message; "" when none


def seen_job(job: Mapping[str, Any]) -> SeenJob:
    """``job`` (a CustomJob's REST JSON) as a ``SeenJob``."""
    spec: Mapping[str, Any] = job.get("jobSpec", {})
    strategy = spec.get("scheduling", {}).get("strategy", "")
    affinities = [
        pool.get("machineSpec", {}).get("reservationAffinity", {})
        for pool in spec.get("workerPoolSpecs", [])
    ]
    reservations = {
        value
        for affinity in affinities
        if affinity.get("key") == _RESERVATION_KEY
        for value in affinity.get("values", [])
    }
    name: str = job.get("name", "")
    parts = name.split("/")
    return SeenJob(
        region=parts[3] if len(parts) > 3 and parts[2] == "locations" else "",
        strategy=_strategy_name(strategy),
        reservation=min(reservations) if reservations else None,
        state=str(job.get("state", "")).removeprefix("JOB_STATE_"),
        error=str(job.get("error", {}).get("message", "")),
    )


def _strategy_name(strategy: object) -> str:
    """A ``scheduling.strategy`` as its name: REST JSON gives the name, a proto read without
    names the enum's number."""
    if isinstance(strategy, int):
        return _STRATEGIES.get(strategy, str(strategy))
    return str(strategy)


def placement_summary(
    run: Run, holder: SeenJob | None, jobs: Sequence[SeenJob], creates: int
) -> tuple[str, bool]:
    """Chapter 8's summary line and whether it ended as the story says, naming only what the
    demo saw: ``holder`` is the first run's job (it should hold the reservation's only VM),
    ``run`` the second run as the ledger has it, ``jobs`` its attempts' jobs as Vertex AI holds
    them (in order) and ``creates`` the CreateCustomJob calls made for it.

    As expected: the reservation held by ``holder``, RUNNING; the run's first attempt skipped it
    for a live rule (``unavailable``: no free VM) and created a Spot job in us-central1, which
    was preempted (a ``capacity`` end); its second attempt's job, on demand in us-east4,
    succeeded; the run SUCCEEDED, with exactly those two jobs created and none on the
    reservation."""
    held = holder is not None and holder.reservation == RESERVATION and holder.state == "RUNNING"
    steps = ["reservation full" if held else f"reservation not held ({_described(holder)})"]
    first = run.attempts[0] if run.attempts else None
    skips = [
        skip.skip_class
        for skip in (first.skips if first else ())
        if skip.placement.get("reservation", {}).get("name") == RESERVATION
    ]
    steps.append(f"skipped ({', '.join(skips)})" if skips else "reservation not skipped")
    steps.extend(_described(job) for job in jobs)
    if run.status.value != "SUCCEEDED":
        steps.append(f"run {run.status.value}")
    created = "exactly 2 jobs" if creates == 2 else f"{creates} job{'' if creates == 1 else 's'}"
    spot = jobs[0] if jobs else None
    landed = jobs[1] if len(jobs) > 1 else None
    ok = (
        held
        and skips == ["unavailable"]
        and len(run.attempts) == len(jobs) == creates == 2
        and all(job.reservation is None for job in jobs)
        and spot is not None
        and (spot.strategy, spot.region, spot.state) == ("SPOT", "us-central1", "FAILED")
        and "preempted" in spot.error
        and first is not None
        and (first.error or {}).get("class") == "capacity"
        and landed is not None
        and landed.strategy in ("STANDARD", "")
        and (landed.region, landed.state) == ("us-east4", "SUCCEEDED")
        and run.status.value == "SUCCEEDED"
    )
    return f"{' -> '.join(steps)}; {created}", ok


def _described(job: SeenJob | None) -> str:
    """A job in a few words: its placement kind, region and end, e.g. "Spot in us-central1
    preempted"."""
    if job is None:
        return "no job"
    kind = "reservation" if job.reservation else _KINDS.get(job.strategy, job.strategy)
    if job.state == "FAILED" and "preempted" in job.error:
        return f"{kind} in {job.region} preempted"
    return f"{kind} in {job.region} {_ENDS.get(job.state, job.state)}"


@dataclass(frozen=True)
class SeenSweep:
    """A HyperparameterTuningJob as the Vertex AI emulator holds it (its REST JSON), reduced to
    what chapter 9 checks."""

    state: str  # without the JOB_STATE_ prefix
    max_trials: int
    trials_succeeded: int
    trials_ended: int  # succeeded, failed or infeasible


def seen_sweep(job: Mapping[str, Any]) -> SeenSweep:
    """``job`` (a HyperparameterTuningJob's REST JSON) as a ``SeenSweep``."""
    trials = [str(trial.get("state", "")) for trial in job.get("trials", [])]
    return SeenSweep(
        state=str(job.get("state", "")).removeprefix("JOB_STATE_"),
        max_trials=int(job.get("maxTrialCount", 0)),
        trials_succeeded=sum(state == "SUCCEEDED" for state in trials),
        trials_ended=sum(state in ("SUCCEEDED", "FAILED", "INFEASIBLE") for state in trials),
    )


def sweep_summary(
    creates: int,
    strategy: object,
    waiting: SeenSweep | None,
    ended: SeenSweep | None,
    status: str,
    completion: Mapping[str, Any] | None,
) -> tuple[str, bool]:
    """Chapter 9's summary line and whether it ended as the story says, naming only what the
    demo saw: ``creates`` CreateHyperparameterTuningJob calls for the run, the trial job's
    ``strategy``, the tuning job read while its trials waited (``waiting``: no trial may have
    ended then) and once the run ended (``ended``), the run's ``status`` and its completion.

    As expected: exactly one FLEX_START tuning job; no trial ended before the GPUs appeared; every
    trial succeeded; the run SUCCEEDED; the completion names a best trial with its metrics and
    parameters and counts the trials that succeeded."""
    flex_start = strategy in ("FLEX_START", 6)
    if creates == 1:
        job = "exactly one FLEX_START tuning job" if flex_start else f"one tuning job ({strategy})"
    else:
        job = f"{creates} tuning jobs"
    steps = ["sweep", job]
    waited = waiting is not None and waiting.trials_ended == 0 and waiting.state != "SUCCEEDED"
    if waiting is None:
        steps.append("not read while waiting")
    elif waited:
        steps.append(f"trials wait for GPUs (tuning job {waiting.state})")
    else:
        steps.append(f"{waiting.trials_ended} trials ended before any GPU was free")
    trials_ok = ended is not None and ended.trials_succeeded == ended.max_trials > 0
    if ended is not None:
        steps.append(f"{ended.trials_succeeded} of {ended.max_trials} trials succeed")
    steps.append("succeeds" if status == "SUCCEEDED" else f"run {status}")
    best = (completion or {}).get("best_trial") or {}
    counted = ((completion or {}).get("trials") or {}).get("succeeded")
    if completion is None:
        steps.append("no completion")
    elif best:
        metrics = _rounded(best.get("metrics")) if best.get("metrics") else "no metrics"
        steps.append(f"completion: best trial {best.get('id')} ({metrics})")
    else:
        steps.append("completion without a best trial")
    ok = (
        creates == 1
        and flex_start
        and waited
        and trials_ok
        and status == "SUCCEEDED"
        and bool(best.get("id"))
        and bool(best.get("metrics"))
        and bool(best.get("parameters"))
        and ended is not None
        and counted == ended.trials_succeeded
    )
    return " -> ".join(steps), ok


@dataclass(frozen=True)
class SeenPipeline:
    """A TrainingPipeline as the Vertex AI emulator holds it (its REST JSON), reduced to what
    chapter 10 checks."""

    state: str  # without the PIPELINE_STATE_ prefix
    persistent_resource: str  # trainingTaskInputs.persistentResourceId; "" when none
    model: str  # modelToUpload.name once uploaded; "" before
    model_version: str


def seen_pipeline(pipeline: Mapping[str, Any]) -> SeenPipeline:
    """``pipeline`` (a TrainingPipeline's REST JSON) as a ``SeenPipeline``."""
    inputs: Mapping[str, Any] = pipeline.get("trainingTaskInputs") or {}
    model: Mapping[str, Any] = pipeline.get("modelToUpload") or {}
    return SeenPipeline(
        state=str(pipeline.get("state", "")).removeprefix("PIPELINE_STATE_"),
        persistent_resource=str(inputs.get("persistentResourceId", "")),
        model=str(model.get("name", "")),
        model_version=str(model.get("versionId", "")),
    )


def pipeline_summary(
    pipeline: SeenPipeline | None,
    creates: int,
    status: str,
    completion: Mapping[str, Any] | None,
) -> tuple[str, bool]:
    """Chapter 10's summary line and whether it ended as the story says: exactly one
    CreateTrainingPipeline call for the run, its training task on ``PIPELINE_POOL``, the pipeline
    SUCCEEDED with a model uploaded, the run SUCCEEDED, and the completion names that model and
    its version."""
    job = "exactly one training pipeline" if creates == 1 else f"{creates} training pipelines"
    steps = ["pipeline", job]
    if pipeline is None:
        steps.append("not read")
    else:
        where = pipeline.persistent_resource or "no persistent resource"
        steps.append(f"training on {where}")
        steps.append(_ENDS.get(pipeline.state, pipeline.state))
        steps.append(f"model {pipeline.model}" if pipeline.model else "no model uploaded")
    if status != "SUCCEEDED":
        steps.append(f"run {status}")
    model = (completion or {}).get("model")
    if completion is None:
        steps.append("no completion")
    else:
        steps.append("completion names the model" if model else "completion without a model")
    ok = (
        creates == 1
        and pipeline is not None
        and pipeline.persistent_resource == PIPELINE_POOL
        and pipeline.state == "SUCCEEDED"
        and bool(pipeline.model)
        and status == "SUCCEEDED"
        and model == pipeline.model
        and str((completion or {}).get("model_version", "")) == pipeline.model_version
    )
    return " -> ".join(steps), ok


def _rounded(values: Mapping[str, Any] | None) -> str:
    """A trial's metrics or parameters in a few digits each, e.g. "accuracy 0.66"."""
    return (
        ", ".join(
            f"{key} {value:.4g}" if isinstance(value, int | float) else f"{key} {value}"
            for key, value in sorted((values or {}).items())
        )
        or "none"
    )


def _note_states(seen: list[str], run: Run) -> None:
    """Add the run's job states not read before to ``seen``, in the order they were read."""
    for attempt in run.attempts:
        state = attempt.state.removeprefix("JOB_STATE_")
        if state not in seen:
            seen.append(state)


def _progress(run: Run) -> str:
    attempts = ", ".join(
        f"#{a.number} {a.region} {a.state.removeprefix('JOB_STATE_')}" for a in run.attempts
    )
    return f"{run.run_id} {run.status.value:<13} attempts: {attempts or '-'}"


def _status(*wanted: str) -> Callable[[Run], bool]:
    return lambda run: run.status.value in wanted


def _has_state(state: str) -> Callable[[Run], bool]:
    return lambda run: any(a.state.endswith(state) for a in run.attempts)


def _has_job(run: Run) -> bool:
    return any(attempt.job_name for attempt in run.attempts)


def _by_message(message_id: str) -> Callable[[Run], bool]:
    return lambda run: run.run_key == f"request-message:{message_id}"


def _run_label(job: dict[str, Any]) -> str | None:
    labels: dict[str, str] = job.get("labels", {})
    return labels.get("vd-run")


def _requests_topic(stack: LocalStack) -> str:
    return stack.config.requests_topic or ""


def _wait_for_interrupt(narrator: Narrator, stack: LocalStack) -> None:
    narrator.say("the stack keeps running; point your tools at it with:")
    for name, value in sorted(stack.env.items()):
        print(f"  export {name}={value}")
    for target, server in stack.functions.items():
        print(f"  # {target}: {server.url}")
    narrator.say(f"logs: {stack.log_dir}; press Ctrl-C (or send SIGTERM) to stop")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:  # DemoStopped included: the expected end of --keep-running
        narrator.say("stopping the stack ...")
