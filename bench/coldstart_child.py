"""One cold start, in the fresh process running this script: import, build one event, handle it.

``python -P bench/coldstart_child.py ROOT FUNCTION EVENT_JSON [--library PACKAGE ...]`` imports
``main`` from the source root ``ROOT`` the way functions-framework does on Cloud Functions (the
root appended to ``sys.path``, its ``main.py`` the entry module) and times everything from just
before that import to the return of ``main.FUNCTION`` on the event ``EVENT_JSON`` (JSON
``[attributes, data]``). It then prints one line ``RESULT_PREFIX`` + JSON: the seconds (wall and
CPU), the process's peak RSS, which Google Cloud clients ended up imported (an unmatched event
must import none), whether PyYAML was (a config read from the bundle's JSON needs none), where
``main`` and each ``--library`` package came from, and which of the root's modules had no bytecode
beside them. Nothing heavy is imported before the clock starts.

Run it as a script with ``-P``, so that neither the working directory nor this script's folder
(the repository) is on the import path: only the standard library, site-packages and ``ROOT``.
After the clock stops, the child checks that ``main`` and every ``--library`` package (``shared``
for vertex-dispatch) were imported from ``ROOT``, and otherwise exits ``WRONG_SOURCE_EXIT`` naming
where they came from: the project's editable install would otherwise serve the repository's
``shared`` to a bundle that lacked it, and the sample would time other code than the bundle's.
This script imports only the standard library (the event is built from JSON with ``cloudevents``,
which every functions-framework entry module has imported already).
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import NoReturn

RESULT_PREFIX = "BENCH-COLD-RESULT "
ENTRY_MODULE = "main"  # Cloud Functions' default entry module: the source root's main.py
CLOUD_CLIENT_MODULES = (
    "google.cloud.aiplatform",
    "google.cloud.aiplatform_v1",
    "google.cloud.compute_v1",  # loaded only when dispatch reads a named reservation
    "google.cloud.firestore",
    "google.cloud.pubsub_v1",
    "google.cloud.storage",
)


WRONG_SOURCE_EXIT = 2  # a module the sample must load from the source root came from elsewhere


def main(argv: list[str]) -> None:
    root_arg, function_name, event_json, *options = argv
    libraries = _libraries(options)
    root = Path(root_arg).resolve()
    sys.path.append(str(root))  # as functions_framework._function_registry does
    started, started_cpu = time.perf_counter(), time.process_time()
    entry = importlib.import_module(ENTRY_MODULE)
    handler = getattr(entry, function_name)
    handler(_event(event_json))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    loaded = _loaded_from(root, [ENTRY_MODULE, *libraries])
    root_modules = _modules_under(root)
    result = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "peak_rss_mib": peak_kib / 1024,
        "cloud_clients_imported": [name for name in CLOUD_CLIENT_MODULES if name in sys.modules],
        "pyyaml_imported": "yaml" in sys.modules,
        "loaded_from": loaded,
        "root_modules": len(root_modules),
        "root_modules_without_bytecode": sorted(
            name for name, module in root_modules.items() if not _has_bytecode(module)
        ),
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _libraries(options: list[str]) -> list[str]:
    libraries: list[str] = []
    while options:
        flag, *options = options
        if flag != "--library" or not options:
            raise SystemExit(f"coldstart_child: expected --library PACKAGE, got {flag!r}")
        package, *options = options
        libraries.append(package)
    return libraries


def _event(event_json: str) -> object:
    from cloudevents.http import CloudEvent  # already imported by any functions-framework entry

    attributes, data = json.loads(event_json)
    return CloudEvent(attributes, data)


def _loaded_from(root: Path, names: list[str]) -> dict[str, str]:
    """Each named module's file, checked to be under ``root``; exit ``WRONG_SOURCE_EXIT``
    saying where it came from otherwise."""
    files: dict[str, str] = {}
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            _wrong_source(f"{name!r} was never imported, so this sample did not run it")
        file = getattr(module, "__file__", None)
        if file is None or not Path(file).resolve().is_relative_to(root):
            _wrong_source(
                f"{name!r} was imported from {file or 'a namespace package'}, not from the source "
                f"root {root}: the sample measured other code than the root's (is the package "
                "missing from the root, or does something on sys.path shadow it?)"
            )
        files[name] = str(Path(file).resolve())
    return files


def _wrong_source(message: str) -> NoReturn:
    print(f"coldstart_child: {message}", file=sys.stderr, flush=True)
    raise SystemExit(WRONG_SOURCE_EXIT)


def _modules_under(root: Path) -> dict[str, ModuleType]:
    modules: dict[str, ModuleType] = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            modules[name] = module
    return modules


def _has_bytecode(module: ModuleType) -> bool:
    cached = getattr(module, "__cached__", None)
    return cached is not None and Path(cached).is_file()


if __name__ == "__main__":
    main(sys.argv[1:])
