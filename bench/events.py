"""The CloudEvents the benchmark delivers, shaped as Eventarc delivers them (docs/messages.md).

Plain dicts until the last moment: a cold-start child builds its event without importing more
than ``cloudevents``, which every function under functions-framework imports anyway.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from cloudevents.http import CloudEvent

BUCKET = "bench-datasets"
PROJECT = "local-project"
DATASET_PREFIX = "imagenet/2026-12-01"
SWEEP_PREFIX = "sweeps/2026-12-01"  # the imagenet-sweep route: a tuning job (resnet-sweep)
JOB_STATE_KIND = "job_state"  # shared.decode.hints.JOB_STATE_KIND, repeated to stay import-free


def object_finalized(name: str, generation: int, bucket: str = BUCKET) -> CloudEvent:
    """A ``google.cloud.storage.object.v1.finalized`` event; int64 fields are JSON strings."""
    return CloudEvent(
        {
            "type": "google.cloud.storage.object.v1.finalized",
            "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
            "subject": f"objects/{name}",
            "id": f"{bucket}/{name}/{generation}",
            "time": "2026-12-01T02:00:00Z",
        },
        {
            "bucket": bucket,
            "name": name,
            "generation": str(generation),
            "metageneration": "1",
            "size": "1048576",
            "contentType": "application/octet-stream",
        },
    )


def shard(index: int, generation: int) -> CloudEvent:
    """One data shard of the dataset: matches no route."""
    return object_finalized(f"{DATASET_PREFIX}/train-{index:05d}-of-10000.tfrecord", generation)


def quiet_shard(name: str, generation: int, written: datetime) -> CloudEvent:
    """A shard of a ``completion: quiet`` dataset, written at ``written`` (the event's time)."""
    event = object_finalized(name, generation)
    event["time"] = written.isoformat().replace("+00:00", "Z")
    return event


def marker(generation: int, prefix: str = DATASET_PREFIX) -> CloudEvent:
    """The dataset's ``_SUCCESS`` marker: matches the ``imagenet-daily`` route (FLEX_START)."""
    return object_finalized(f"{prefix}/_SUCCESS", generation)


def pubsub_message(
    topic: str, message_id: str, body: dict[str, Any], attributes: dict[str, str]
) -> CloudEvent:
    """A ``google.cloud.pubsub.topic.v1.messagePublished`` event carrying ``body`` as JSON."""
    return CloudEvent(
        {
            "type": "google.cloud.pubsub.topic.v1.messagePublished",
            "source": f"//pubsub.googleapis.com/projects/{PROJECT}/topics/{topic}",
            "id": message_id,
        },
        {
            "message": {
                "data": base64.b64encode(json.dumps(body).encode()).decode(),
                "attributes": attributes,
                "messageId": message_id,
                "publishTime": "2026-12-01T02:00:03.412Z",
            },
            "subscription": f"projects/{PROJECT}/subscriptions/eventarc-{topic}",
        },
    )


def job_state(job_name: str, message_id: str) -> CloudEvent:
    """Our job-state hint on the job-events topic: "look at job ``job_name``". It names no
    observed state, so on_job_event reads the job (a hint whose state the ledger records is
    dropped without a read: that would measure the cheap path)."""
    return pubsub_message(
        "vertex-dispatch-job-events",
        message_id,
        {"job_name": job_name},
        {"vertex_dispatch_kind": JOB_STATE_KIND},
    )


def pool_request(message_id: str) -> CloudEvent:
    """A job request for the persistent-resource template ``finetune-pool``."""
    return pubsub_message(
        "bench-requests",
        message_id,
        {"template": "finetune-pool", "params": {"dataset_uri": f"gs://{BUCKET}/ft/{message_id}/"}},
        {"kind": "train"},
    )
