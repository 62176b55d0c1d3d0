"""The user's configuration: routes, templates, placements, retry policy and guards.

``model`` holds the frozen dataclasses every other module reads; ``loader`` turns the YAML text
into them, with errors that name the file, the key path and the fix (reading that text from a path
or a ``gs://`` URI, once per instance, is ``shared.adapters.config_source``). Nothing here imports a
Google Cloud client: an event that matches no route must stay cheap (docs/architecture.md, "Costs").
"""

from shared.config.model import (
    Completion,
    Config,
    FlexStartPlacement,
    GcsRoute,
    Guards,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    PubSubRoute,
    ReservationPlacement,
    RetryPolicy,
    Route,
    ScheduleRoute,
    SpotPlacement,
    Template,
)

__all__ = [
    "Completion",
    "Config",
    "FlexStartPlacement",
    "GcsRoute",
    "Guards",
    "OnDemandPlacement",
    "PersistentResourcePlacement",
    "Placement",
    "PubSubRoute",
    "ReservationPlacement",
    "RetryPolicy",
    "Route",
    "ScheduleRoute",
    "SpotPlacement",
    "Template",
]
