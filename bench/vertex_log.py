"""What the Vertex AI emulator's admin API tells the benchmark (its request log and its jobs), and
the few things the benchmark sets in it (its clock, how jobs end).

Remote Vertex AI calls are counted from the emulator's own request log (docs/vertex-ai-emulator.md,
"Admin API"), not from the client, so a call the client retried counts as often as it was made.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections import Counter
from datetime import datetime
from typing import Any

REST_HOST_VARIABLE = "VERTEX_AI_EMULATOR_HOST"


def _base_url() -> str:
    return f"http://{os.environ[REST_HOST_VARIABLE]}"


def _call(method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{_base_url()}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def clear_requests() -> None:
    """Empty the request log, so the next count starts from zero."""
    _call("DELETE", "/emulator/v1/requests")


def request_counts() -> Counter[str]:
    """API calls since the last ``clear_requests``, by RPC method name."""
    return Counter(entry["method"] for entry in _call("GET", "/emulator/v1/requests")["requests"])


def jobs_with_label(region: str, label: str, project: str = "local-project") -> list[str]:
    """Names of the region's CustomJobs carrying ``label`` (first page of 100, newest first)."""
    parent = f"projects/{project}/locations/{region}"
    page = _call("GET", f"/v1/{parent}/customJobs?pageSize=100")
    return [job["name"] for job in page.get("customJobs", []) if label in job.get("labels", {})]


def now() -> datetime:
    """The emulator's clock (frozen in the benchmark: only ``advance`` moves it)."""
    stamp = _call("GET", "/emulator/v1/clock")["now"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def advance(seconds: float) -> None:
    _call("POST", "/emulator/v1/clock:advance", {"seconds": seconds})


def add_outcome(rule: dict[str, Any]) -> None:
    """How the next jobs end (docs/vertex-ai-emulator.md, outcome rules)."""
    _call("POST", "/emulator/v1/outcomes", rule)
