"""Cloud Function entry points: decode nothing here, decide nothing here.

Each function hands its CloudEvent to ``shared`` and maps the outcome to the platform's answer:
returning acknowledges the event (done, or a permanent error already recorded and alerted); an
exception makes the platform deliver it again, which ``shared`` reserves for transient failures.

Deployed as the source root's ``main.py`` (Cloud Functions' default), so the entry points are
``on_object_finalized``, ``on_request`` (dispatch), ``on_job_event`` (the job-state function) and
``reconcile`` (the Cloud Scheduler tick that catches every missed state change and due retry).
"""

from __future__ import annotations

import gc

import functions_framework
from cloudevents.http import CloudEvent

# No garbage collection while the library loads: what it creates (modules, classes, the
# functions dataclasses generate) lives as long as the instance, so the collections its
# allocations would trigger find nothing to free (none, measured), yet on a cold start they cost
# about 3 ms (one of them scans everything functions-framework loaded before). Frozen, those
# objects are never scanned again, so re-enabling the collector does not pay the same scan on
# the first event instead.
gc.disable()
try:
    from shared import logs
    from shared.handlers.dispatch import dispatch_event
finally:
    gc.freeze()
    gc.enable()

logs.configure()

# A note on imports: every function is deployed from this one module, so a module-level import
# is paid by all four at cold start. shared.handlers.dispatch keeps an unmatched event free of cloud
# clients; the job-state and reconcile modules need the Vertex AI and Pub/Sub clients (about 1 s
# even through the lazy shared.aiplatform) and are imported by the entry points that use them.


@functions_framework.cloud_event
def on_object_finalized(cloud_event: CloudEvent) -> None:
    """Eventarc ``google.cloud.storage.object.v1.finalized``: a dataset object landed."""
    dispatch_event(cloud_event)


@functions_framework.cloud_event
def on_request(cloud_event: CloudEvent) -> None:
    """Pub/Sub ``messagePublished`` on the requests topic: job requests, ticks and retries."""
    dispatch_event(cloud_event)


@functions_framework.cloud_event
def on_job_event(cloud_event: CloudEvent) -> None:
    """Pub/Sub ``messagePublished`` on the job-events topic: "look at job X" hints."""
    from shared.handlers.jobstate import handle_job_event  # imported here: see the note on imports

    handle_job_event(cloud_event)


@functions_framework.cloud_event
def reconcile(cloud_event: CloudEvent) -> None:
    """Pub/Sub ``messagePublished`` from Cloud Scheduler (every minute): one reconcile tick."""
    from shared.handlers.reconcile import run_reconcile  # imported here: see the note on imports

    run_reconcile(cloud_event)
