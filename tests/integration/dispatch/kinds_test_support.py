"""What the tests of the other job kinds read from the Vertex AI emulator, per kind.

``VertexAdmin``'s readers are CustomJob's (CreateCustomJob calls, ListCustomJobs); the same
readers for any kind are here: the create calls of the kind's Create method as the emulator's
request log holds them, and the jobs of the kind's collection that exist for a run (its public
REST List, by label). Both look only at state, never at log text.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from dispatch_test_support import HTTP_TIMEOUT_SECONDS, PARENT, VertexAdmin

from shared.model.job_kinds import JobKind

# The dispatch tests' template of each kind (tests/integration/dispatch/configs/dispatch.yaml).
TEMPLATE_OF_KIND: dict[JobKind, str] = {
    JobKind.CUSTOM_JOB: "flex-a100",
    JobKind.HYPERPARAMETER_TUNING_JOB: "sweep-a100",
    JobKind.TRAINING_PIPELINE: "pipeline-pool",
}
NEW_KINDS = (JobKind.HYPERPARAMETER_TUNING_JOB, JobKind.TRAINING_PIPELINE)


def _camel(name: str) -> str:
    return name[0].lower() + name[1:]


@dataclass(frozen=True)
class KindAdmin:
    """``VertexAdmin``'s readers for the jobs of one ``kind``."""

    vertex: VertexAdmin
    address: str  # the emulator's REST host:port
    kind: JobKind

    @property
    def create_method(self) -> str:
        return f"Create{self.kind.resource}"

    def create_calls(self, run_id: str) -> list[dict[str, Any]]:
        """The kind's create calls logged for ``run_id`` (label ``vd-run``), answered or not:
        each ``{"status", "job"}`` (the job as asked for, REST JSON)."""
        field = _camel(self.kind.resource)
        logged = self.vertex.call("GET", f"requests?method={self.create_method}")["requests"]
        calls = [{"status": e["status"], "job": e["request"].get(field, {})} for e in logged]
        return [c for c in calls if c["job"].get("labels", {}).get("vd-run") == run_id]

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        """The jobs of the kind that exist for ``run_id`` (the kind's List by label)."""
        query = urllib.parse.urlencode({"filter": f'labels.vd-run="{run_id}"'})
        url = f"http://{self.address}/v1/{PARENT}/{self.kind.collection}?{query}"
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_SECONDS) as response:
            return json.loads(response.read()).get(self.kind.collection, [])
