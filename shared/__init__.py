"""vertex-dispatch: turn bucket arrivals, Pub/Sub requests and scheduler ticks into Vertex AI jobs.

This package holds all of the project's logic; ``functions/`` only adapts CloudEvents to it.
Modules are imported lazily by the entry points so that an event that matches no route never pays
for the Google Cloud client libraries.
"""

__version__ = "0.1.0"
