"""The ``{name}`` placeholders of templates and route parameters, and the built-in names.

A placeholder is ``{`` + a name of letters, digits and ``_`` + ``}``, nothing else: ``{"a": 1}``
or ``${HOME}`` in an argument stay literal text. This is the regex ``shared.decode.routing`` and
``shared.policy.jobspec`` fill with (never ``str.format``), each value landing inside one argument,
never through a shell (docs/dispatch-contract.md).

Built-in names are filled by dispatch itself: ``RENDER_FIELDS`` by ``shared.policy.jobspec`` on
every attempt, the trigger fields by ``shared.decode.routing`` according to the kind of route that
matched. Placeholders are filled only in the fields a trigger may vary (``FILLED_*`` below): the
image, command, machine, service account and network stay exactly as the template fixes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Final

from shared.config.model import GcsRoute, PubSubRoute, Route

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
PARAM_NAME_RULE = "letters, digits and _, not starting with a digit, at most 63 characters"

# ``previous_output``: the output directory of the run's latest earlier attempt whose job started
# (the directory a trainer resumes from, also in the job's env VERTEX_DISPATCH_PREVIOUS_OUTPUT);
# empty on a first attempt, or when no earlier attempt's job ever ran (docs/configuration.md).
RENDER_FIELDS = frozenset({"run_id", "attempt", "template", "project", "region", "previous_output"})
GCS_FIELDS = frozenset({"bucket", "object", "dirname", "basename", "generation", "dataset_uri"})
# A quiet dataset is complete when its directory is: no one object is the trigger, so the fields
# of one (the first shard's name, basename, generation) would mean nothing. Its ``dataset``
# pattern's names are its fields too (``quiet_fields``).
QUIET_FIELDS = frozenset({"bucket", "dirname", "dataset_uri"})
SHARD_FIELDS = GCS_FIELDS - QUIET_FIELDS
PUBSUB_FIELDS = frozenset({"message_id"})
SCHEDULE_FIELDS = frozenset({"message_id", "schedule", "schedule_time"})
TRIGGER_FIELDS = GCS_FIELDS | PUBSUB_FIELDS | SCHEDULE_FIELDS
BUILTIN_NAMES = RENDER_FIELDS | TRIGGER_FIELDS

FIELDS_BY_ROUTE_KIND: Mapping[str, frozenset[str]] = {
    "gcs": GCS_FIELDS,
    "pubsub": PUBSUB_FIELDS,
    "schedule": SCHEDULE_FIELDS,
}

# Where placeholders are filled, as key paths relative to a template in the friendly form...
FILLED_TEMPLATE_KEYS = re.compile(
    r"display_name|base_output_dir|experiment_run"
    r"|worker_pools\[\d+\]\.(python_package\.)?(args\[\d+\]|env\.\w+)"
)
# ...and relative to a CustomJob REST body or CustomJobSpec (shared.policy.jobspec.FILLED_FIELDS).
FILLED_SPEC_KEYS = re.compile(
    r"displayName|baseOutputDirectory\.outputUriPrefix|experimentRun"
    r"|workerPoolSpecs\[\d+\]\.(containerSpec|pythonPackageSpec)\.(args\[\d+\]|env\[\d+\]\.value)"
)
# Where placeholders are filled in a pipeline's model upload, as REST field paths (listed in
# shared.policy.jobspec.FILLED_FIELDS, filled by shared.policy.job_wrappers).
MODEL_DISPLAY_NAME_FIELD: Final = "modelToUpload.displayName"
MODEL_ARTIFACT_URI_FIELD: Final = "modelToUpload.artifactUri"
# The environment variable a retry's job gets the same value in, on every program
# (shared.policy.jobspec); a template may not set it itself (shared.config.shorthand).
PREVIOUS_OUTPUT_ENV: Final = "VERTEX_DISPATCH_PREVIOUS_OUTPUT"
# The base output directory is shared by every attempt of a run (so Vertex AI's
# AIP_CHECKPOINT_DIR is the same and a resubmission resumes): these built-ins vary per attempt
# and are refused there (shared.config.templates).
PER_ATTEMPT_FIELDS = frozenset({"attempt", "previous_output"})
OUTPUT_DIR_KEYS = frozenset({"base_output_dir", "baseOutputDirectory.outputUriPrefix"})
FILLED_FIELDS_HINT = (
    "placeholders are filled only in display_name, args, env values, base_output_dir and "
    "experiment_run"
)


def quiet_fields(dataset: str) -> frozenset[str]:
    """The trigger fields of a ``completion: quiet`` route whose ``dataset`` pattern is
    ``dataset``: ``QUIET_FIELDS`` and the pattern's names."""
    return QUIET_FIELDS | set(placeholder_names(dataset))


def route_fields(route: Route) -> frozenset[str]:
    """The trigger fields ``route``'s runs carry, besides those dispatch fills on every run
    (``RENDER_FIELDS``)."""
    if isinstance(route, GcsRoute):
        return quiet_fields(route.quiet.dataset) if route.quiet is not None else GCS_FIELDS
    if isinstance(route, PubSubRoute):
        return PUBSUB_FIELDS
    return SCHEDULE_FIELDS


def placeholder_names(text: str) -> list[str]:
    """The placeholder names in ``text``, in order of appearance."""
    return PLACEHOLDER.findall(text)


def placeholders_in(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Every ``(key path, name)`` of a placeholder anywhere in nested lists, mappings and text."""
    if isinstance(value, str):
        for name in placeholder_names(value):
            yield path, name
    elif isinstance(value, Mapping):
        for key, entry in value.items():
            yield from placeholders_in(entry, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, entry in enumerate(value):
            yield from placeholders_in(entry, f"{path}[{index}]")
