"""Completion messages: a finished run announced on the completions topic, for downstream steps.

Published once per run (the ledger's ``notices`` records "completion" after the publish), when
the config names a ``completions_topic``. A step such as model registration subscribes and reads
where the job wrote its output. The message (data: UTF-8 JSON; attributes ``schema``,
``run_id``, ``template`` for subscription filters)::

    {
      "schema": "vertex-dispatch.completion.v1",
      "run_id": "r-0123456789abcdef01234567",
      "run_key": "gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
      "template": "resnet-a100",
      "job_name": "projects/123456789012/locations/us-central1/customJobs/456",
      "output_directory": "gs://acme-models/resnet/r-0123456789abcdef01234567/",  # or null
      "state": "JOB_STATE_SUCCEEDED",
      "job_kind": "custom_job"  # or "hyperparameter_tuning_job", "training_pipeline"
    }

The job's name is of its kind's collection (``.../hyperparameterTuningJobs/ID``,
``.../trainingPipelines/ID``). A sweep's message adds what it found, and a pipeline's the model it
uploaded (``shared.policy.job_views.result_of``, read from the job when the message is published)::

    "best_trial": {"id": "7", "metrics": {"accuracy": 0.93},
                   "parameters": {"learning_rate": 0.01, "optimizer": "adam"}},  # or null
    "trials": {"succeeded": 17, "infeasible": 0}

    "model": "projects/123456789012/locations/us-central1/models/789",  # or null
    "model_version": "1"                                                # or null

The schema stays ``vertex-dispatch.completion.v1``: keys are only ever added to it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from shared.adapters import clients
from shared.model.errors import TransientError
from shared.model.job_kinds import JobKind
from shared.model.runs import COMPLETION_NOTICE

if TYPE_CHECKING:
    from google.cloud import pubsub_v1

    from shared.model.runs import Attempt, Run

SCHEMA = "vertex-dispatch.completion.v1"
NOTICE = COMPLETION_NOTICE  # recorded on the run once its completion was published
"""The ledger notice that says the completion message was published."""
PUBLISH_TIMEOUT_SECONDS = 30.0


class CompletionNotSent(TransientError):
    """The completion message could not be published; it is published again later."""


# The keys each kind's result adds to the message (``job_views.result_of``'s keys).
RESULT_KEYS: dict[JobKind, tuple[str, ...]] = {
    JobKind.CUSTOM_JOB: (),
    JobKind.HYPERPARAMETER_TUNING_JOB: ("best_trial", "trials"),
    JobKind.TRAINING_PIPELINE: ("model", "model_version"),
}


def completion_message(
    run: Run, attempt: Attempt, result: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The completion message for ``run``, whose ``attempt`` succeeded; ``result`` is what the
    job produced (``vertex.job_result``), its kind's keys null when it is None."""
    decision = attempt.decision or {}
    message: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "run_key": run.run_key,
        "template": run.template,
        "job_name": attempt.job_name,
        "output_directory": decision.get("output_directory"),
        "state": attempt.state,
        "job_kind": attempt.job_kind.value,
    }
    for key in RESULT_KEYS[attempt.job_kind]:
        message[key] = (result or {}).get(key)
    return message


def publish_completion(
    message: dict[str, Any], topic: str, publisher: pubsub_v1.PublisherClient | None = None
) -> str:
    """Publish ``message`` on ``topic``; the message id. ``CompletionNotSent`` on any failure."""
    data = json.dumps(message, ensure_ascii=False).encode()
    attributes = {"schema": SCHEMA, "run_id": message["run_id"], "template": message["template"]}
    publisher = publisher or clients.publisher_client()
    try:
        future = publisher.publish(topic, data, timeout=PUBLISH_TIMEOUT_SECONDS, **attributes)
        return future.result(timeout=PUBLISH_TIMEOUT_SECONDS)
    # Any failure leaves the notice unrecorded, so the next pass publishes it again.
    except Exception as error:
        raise CompletionNotSent(
            f"completion of run {message['run_id']} was not published on {topic}: {error!r}; "
            "it is published again on the next delivery or reconcile. If this persists, check "
            "that the topic exists and the function's service account has "
            "roles/pubsub.publisher on it"
        ) from error
