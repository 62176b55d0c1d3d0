"""Cloud Function entry points: decode nothing here, decide nothing here.

Each function hands its CloudEvent to ``shared`` and maps the outcome to the platform's answer:
returning acknowledges the event (done, or a permanent error already recorded and alerted); an
exception makes the platform deliver it again, which ``shared`` reserves for transient failures.

Deployed as the source root's ``main.py`` (Cloud Functions' default), so the entry points are
``on_object_finalized``, ``on_request`` (dispatch), ``on_job_event`` (the job-state function) and
``reconcile`` (the Cloud Scheduler tick that catches every missed state change and due retry).
"""

from __future__ import annotations

import functions_framework
from cloudevents.http import CloudEvent

from shared import logs
from shared.handlers.dispatch import dispatch_event

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
