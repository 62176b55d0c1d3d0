"""One cold start, in the fresh process running this module: import, build one event, handle it.

``python -m bench.coldstart_child MODULE:FUNCTION EVENT ARG`` times everything from just before
the entry module's import to the handler's return, then prints one line ``RESULT_PREFIX`` + JSON:
the seconds, the process's peak RSS, and which Google Cloud clients ended up imported (an
unmatched event must import none). Nothing heavy is imported before the clock starts.
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time

RESULT_PREFIX = "BENCH-COLD-RESULT "
CLOUD_CLIENT_MODULES = (
    "google.cloud.aiplatform",
    "google.cloud.aiplatform_v1",
    "google.cloud.firestore",
    "google.cloud.pubsub_v1",
    "google.cloud.storage",
)


def main(argv: list[str]) -> None:
    entry, event_kind, event_arg = argv
    module_name, function_name = entry.split(":")
    started = time.perf_counter()
    handler = getattr(importlib.import_module(module_name), function_name)
    handler(_event(event_kind, event_arg))
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = {
        "seconds": seconds,
        "peak_rss_mib": peak_kib / 1024,
        "cloud_clients_imported": [name for name in CLOUD_CLIENT_MODULES if name in sys.modules],
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _event(kind: str, arg: str) -> object:
    from bench import events

    if kind == "shard":
        return events.shard(1, int(arg))
    if kind == "marker":
        return events.marker(int(arg))
    if kind == "job_state":
        return events.job_state(arg, message_id=str(time.time_ns()))
    raise SystemExit(f"event kind must be shard, marker or job_state; got {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
