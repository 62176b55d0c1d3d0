"""The floor: a hello-world CloudEvent function under functions-framework.

It imports what every Python Cloud Function imports and does nothing else, so its cold start is
the least any function can cost on this runtime. Not part of vertex-dispatch.
"""

from __future__ import annotations

import functions_framework
from cloudevents.http import CloudEvent


@functions_framework.cloud_event
def on_event(cloud_event: CloudEvent) -> None:
    """Acknowledge any event."""
    print(f"hello {cloud_event['id']}")
