"""The source bundle (deploy/bundle.py): built from the repo, it holds what Cloud Functions
needs, pins the runtime dependencies, zips reproducibly, and, served by functions-framework,
answers a real-shaped event. The fresh-virtualenv variant installs requirements.txt from PyPI
(about a minute) and is marked slow."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from bundle_test_support import CONFIG, REPO, bundle_module

RUNTIME_DEPENDENCIES = (
    "functions-framework",
    "cloudevents",
    "google-cloud-aiplatform",
    "google-cloud-pubsub",
    "google-cloud-storage",
    "google-cloud-firestore",
    "grpcio",
    "PyYAML",
)
DEV_ONLY = ("pytest", "ruff", "hypothesis", "gcp-storage-emulator", "python-hcl2")

# A finalized object in a bucket no route of examples/config.yaml watches: dispatch must
# acknowledge it (200) without touching any cloud service.
UNROUTED_OBJECT_EVENT = {
    "specversion": "1.0",
    "type": "google.cloud.storage.object.v1.finalized",
    "source": "//storage.googleapis.com/projects/_/buckets/unwatched-bucket",
    "subject": "objects/shards/part-00017.tfrecord",
    "id": "8254561364215112",
    "time": "2026-12-01T03:00:00.000Z",
    "datacontenttype": "application/json",
    "data": {
        "bucket": "unwatched-bucket",
        "name": "shards/part-00017.tfrecord",
        "generation": "1733100000000017",
        "metageneration": "1",
        "size": "104857600",
        "contentType": "application/octet-stream",
    },
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bundle")
    return bundle_module.build_bundle(out / "source", zip_path=out / "source.zip")


def test_entry_module_is_functions_main(built) -> None:
    main = (built.directory / "main.py").read_text(encoding="utf-8")
    assert main == (REPO / "functions" / "main.py").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "relative",
    [
        "shared/__init__.py",
        "shared/handlers/dispatch.py",
        "shared/config/loader.py",
        "shared/config/schema.json",
    ],
)
def test_library_files_are_in_the_bundle(built, relative: str) -> None:
    assert (built.directory / relative).is_file()


def test_no_cache_of_the_clone_in_the_bundle(built) -> None:
    # The only bytecode is what the build compiled (tests/deploy/test_bundle_bytecode.py): a
    # clone's caches may be stale, timestamp-based or for another Python.
    cached = {p.relative_to(built.directory).as_posix() for p in built.directory.rglob("*.py[co]")}
    assert cached == set(built.bytecode.files)


@pytest.mark.parametrize("name", RUNTIME_DEPENDENCIES)
def test_runtime_dependency_is_pinned(built, name: str) -> None:
    pinned = {line.split("==")[0].lower() for line in built.requirements}
    assert name.lower() in pinned


def test_every_requirement_is_an_exact_pin_and_no_dev_tool_ships(built) -> None:
    text = (built.directory / "requirements.txt").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == list(built.requirements)
    assert all(line.count("==") == 1 for line in lines)
    names = {line.split("==")[0].lower() for line in lines}
    assert not names & {name.lower() for name in DEV_ONLY}


def test_zip_is_reproducible(built, tmp_path: Path) -> None:
    again = tmp_path / "again.zip"
    bundle_module.write_zip(built.directory, again)
    assert again.read_bytes() == built.zip_path.read_bytes()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def serve(built) -> Iterator:
    """Start functions-framework on the bundle with a given Python; stop its process group."""
    started: list[subprocess.Popen[bytes]] = []

    def start(python: Path, target: str) -> str:
        port = _free_port()
        env = {**os.environ, "VERTEX_DISPATCH_CONFIG": str(CONFIG), "PYTHONPATH": ""}
        process = subprocess.Popen(
            [str(python), "-m", "functions_framework", "--target", target, "--port", str(port)],
            cwd=built.directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        started.append(process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"functions-framework exited: {process.stderr.read()!r}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return f"http://127.0.0.1:{port}/"
            except OSError:
                time.sleep(0.1)
        raise AssertionError("functions-framework did not listen within 30 s")

    yield start
    for process in started:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def _post_cloud_event(url: str, event: dict) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(event).encode(),
        headers={"Content-Type": "application/cloudevents+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def _bundle_imports_its_own_shared(python: Path, directory: Path) -> str:
    result = subprocess.run(
        [str(python), "-c", "import main, shared; print(shared.__file__)"],
        cwd=directory,
        env={**os.environ, "VERTEX_DISPATCH_CONFIG": str(CONFIG)},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_bundle_serves_an_unrouted_object_event(built, serve) -> None:
    # The project's own environment: fast, and proves the bundle's layout (main.py + shared/).
    python = Path(sys.executable)
    assert _bundle_imports_its_own_shared(python, built.directory).startswith(str(built.directory))
    assert _post_cloud_event(serve(python, "on_object_finalized"), UNROUTED_OBJECT_EVENT) == 200


@pytest.mark.slow
def test_bundle_installs_in_a_fresh_venv_and_serves(built, serve, tmp_path: Path) -> None:
    # Installs from PyPI for about a minute: tests/conftest.py runs it only with `-m slow`.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", "requirements.txt"],
        cwd=built.directory,
        check=True,
        timeout=600,
    )
    assert _bundle_imports_its_own_shared(python, built.directory).startswith(str(built.directory))
    assert _post_cloud_event(serve(python, "on_object_finalized"), UNROUTED_OBJECT_EVENT) == 200
