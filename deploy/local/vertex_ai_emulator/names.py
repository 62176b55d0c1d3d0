"""Resource names of the emulated service, and the project id <-> project number mapping.

The real service answers with the project NUMBER in every name, even when it was called with the
project id; the emulator does the same: numbers come from config, or a stable number is derived
from the id so that names never change between runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from vertex_ai_emulator.errors import invalid_argument

CUSTOM_JOBS = "customJobs"
HYPERPARAMETER_TUNING_JOBS = "hyperparameterTuningJobs"
TRAINING_PIPELINES = "trainingPipelines"
MODELS = "models"  # where a training pipeline uploads its model
PERSISTENT_RESOURCES = "persistentResources"
OPERATIONS = "operations"

PROJECT_NUMBER_DIGITS = 12
_SMALLEST_PROJECT_NUMBER = 10 ** (PROJECT_NUMBER_DIGITS - 1)

_PARENT_PATTERN = re.compile(r"^projects/([^/]+)/locations/([^/]+)$")
_RESOURCE_PATTERN = re.compile(r"^(projects/[^/]+/locations/[^/]+)/([A-Za-z]+)/([^/]+)$")
_OPERATION_PATTERN = re.compile(
    r"^(projects/[^/]+/locations/[^/]+/([A-Za-z]+)/[^/]+)/" + OPERATIONS + r"/([^/]+)$"
)


@dataclass(frozen=True, order=True)
class LocationName:
    """`projects/{project_number}/locations/{location}`: where jobs and resources live."""

    project_number: str
    location: str

    def __str__(self) -> str:
        return f"projects/{self.project_number}/locations/{self.location}"

    def child(self, collection: str, resource_id: str) -> ResourceName:
        """The name of resource `resource_id` of `collection` under this location."""
        return ResourceName(self, collection, resource_id)


@dataclass(frozen=True, order=True)
class ResourceName:
    """`{location}/{collection}/{resource_id}`, e.g. a CustomJob or a PersistentResource."""

    parent: LocationName
    collection: str
    resource_id: str

    def __str__(self) -> str:
        return f"{self.parent}/{self.collection}/{self.resource_id}"


def derived_project_number(project_id: str) -> str:
    """A stable 12-digit project number for a project id that config gives no number for."""
    digest = int.from_bytes(hashlib.sha256(project_id.encode()).digest()[:8], "big")
    span = 10**PROJECT_NUMBER_DIGITS - _SMALLEST_PROJECT_NUMBER
    return str(_SMALLEST_PROJECT_NUMBER + digest % span)


class ProjectDirectory:
    """Turns the names clients send (project id or number) into canonical, number-based names."""

    def __init__(self, project_numbers: Mapping[str, str]) -> None:
        self._numbers = dict(project_numbers)

    def number_of(self, project: str) -> str:
        """The project number for `project`, which may already be a number."""
        if project.isdigit():
            return project
        return self._numbers.get(project) or derived_project_number(project)

    def parse_parent(self, parent: str) -> LocationName:
        """`projects/{id or number}/locations/{location}` -> its canonical LocationName."""
        match = _PARENT_PATTERN.match(parent or "")
        if not match:
            raise invalid_argument(
                f'Invalid parent "{parent}": expected projects/{{project}}/locations/{{location}}.'
            )
        project, location = match.groups()
        return LocationName(self.number_of(project), location)

    def parse_resource(self, name: str, collection: str) -> ResourceName:
        """A resource name of `collection` (id or number form) -> its canonical ResourceName."""
        match = _RESOURCE_PATTERN.match(name or "")
        if not match or match.group(2) != collection:
            raise invalid_argument(
                f'Invalid resource name "{name}": expected '
                f"projects/{{project}}/locations/{{location}}/{collection}/{{id}}."
            )
        parent_text, _, resource_id = match.groups()
        return self.parse_parent(parent_text).child(collection, resource_id)

    def canonical_operation_name(self, name: str) -> str:
        """`{resource}/operations/{id}` with the resource part in canonical form."""
        match = _OPERATION_PATTERN.match(name or "")
        if not match:
            raise invalid_argument(f'Invalid operation name "{name}".')
        resource_text, collection, operation_id = match.groups()
        resource = self.parse_resource(resource_text, collection)
        return f"{resource}/{OPERATIONS}/{operation_id}"
