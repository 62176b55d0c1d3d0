"""The source bundle (deploy/bundle.py): built from the repo, it holds what Cloud Functions
needs, the validated config as JSON (read without PyYAML), pins the runtime dependencies, zips
reproducibly, and, served by functions-framework, answers a real-shaped event. A broken config
builds no bundle. The fresh-virtualenv variant installs requirements.txt from PyPI (about a
minute) and is marked slow."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bundle_test_support import CONFIG, REPO, bundle_module

from shared.adapters.config_source import load_config

RUNTIME_DEPENDENCIES = (
    "functions-framework",
    "cloudevents",
    "google-cloud-aiplatform",
    "google-cloud-pubsub",
    "google-cloud-storage",
    "google-cloud-firestore",
    "google-cloud-compute",
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


# The environment Terraform gives every function (functions.tf): the config by its path in the
# bundle, relative to the source root, the function's working directory.
DEPLOYED_ENV = {"VERTEX_DISPATCH_CONFIG": bundle_module.BUNDLED_CONFIG, "PYTHONPATH": ""}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bundle")
    return bundle_module.build_bundle(out / "source", zip_path=out / "source.zip", config=CONFIG)


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


def test_the_config_ships_as_json_with_the_files_its_templates_read(built) -> None:
    assert built.config.path == "config/config.json"
    bundled = built.directory / built.config.path
    assert json.loads(bundled.read_text(encoding="utf-8")) == yaml.safe_load(
        CONFIG.read_text(encoding="utf-8")
    )
    # At the same path relative to the config as beside the original, as JSON too.
    references = ["templates/dws-gcloud-config.yaml", "templates/dws-rest-body.json"]
    assert built.config.files == tuple(f"config/{name}" for name in references)
    for name in references:
        original = yaml.safe_load((CONFIG.parent / name).read_text(encoding="utf-8"))
        assert json.loads((bundled.parent / name).read_text(encoding="utf-8")) == original
    assert built.config.remote == ()
    with zipfile.ZipFile(built.zip_path) as archive:
        assert {"config/config.json", *built.config.files} <= set(archive.namelist())


def test_the_bundled_config_is_the_validated_one(built) -> None:
    from dataclasses import replace

    bundled = load_config(str(built.directory / built.config.path))
    assert replace(bundled, source=str(CONFIG)) == load_config(str(CONFIG))


def _run_in_deployed_source(source_root: Path, code: str) -> str:
    """What ``code`` prints in a fresh interpreter in the source root, with the environment
    Terraform sets."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=source_root,
        env={**os.environ, **DEPLOYED_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_function_reads_the_bundled_config_without_pyyaml(built) -> None:
    # A fresh interpreter in the source root, with the environment Terraform sets.
    code = (
        "import sys\n"
        "import main\n"
        "from shared.adapters.config_source import config_from_env\n"
        "config = config_from_env()\n"
        "print(config.source, len(config.templates), 'yaml' in sys.modules)\n"
    )
    stdout = _run_in_deployed_source(built.directory, code)
    source, templates, yaml_imported = stdout.split()
    assert source == "config/config.json"
    assert int(templates) == len(load_config(str(CONFIG)).templates)
    assert yaml_imported == "False"


def test_the_entry_module_loads_the_library_without_collecting_and_leaves_gc_on(built) -> None:
    # functions/main.py freezes what the library creates at load (it lives as long as the
    # instance) instead of letting collections scan it: the collector must be on afterwards.
    code = (
        "import gc, json\n"
        "import functions_framework  # loaded first, as on Cloud Functions: it loads main\n"
        "gc.collect()\n"
        "collections = []\n"
        "gc.callbacks.append(lambda phase, info: collections.append(phase))\n"
        "import main\n"
        "print(json.dumps([gc.isenabled(), gc.get_freeze_count(), len(collections)]))\n"
    )
    stdout = _run_in_deployed_source(built.directory, code)
    enabled, frozen, collections = json.loads(stdout)
    assert enabled is True
    assert frozen > 1000  # the library's modules, classes and functions
    assert collections == 0


def test_without_a_config_the_bundle_ships_none(tmp_path: Path) -> None:
    bundle = bundle_module.build_bundle(tmp_path / "source", bytecode=False)
    assert bundle.config is None
    assert not (tmp_path / "source" / "config").exists()


def _broken_copy(directory: Path) -> Path:
    """examples/config.yaml with one broken value, beside the files its templates read."""
    shutil.copytree(CONFIG.parent / "templates", directory / "templates")
    broken = directory / "config.yaml"
    text = CONFIG.read_text(encoding="utf-8")
    broken.write_text(text.replace("region: us-central1", "region: moon-base-1", 1))
    return broken


def test_a_broken_config_builds_no_bundle_and_says_what_the_loader_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = _broken_copy(tmp_path)
    with pytest.raises(Exception) as loading:
        load_config(str(broken))
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "previous").write_text("a bundle built earlier stays as it was")
    with pytest.raises(bundle_module.BundleError) as building:
        bundle_module.build_bundle(out, config=broken)
    assert str(building.value) == str(loading.value)
    assert "region" in str(building.value)
    assert [p.name for p in out.iterdir()] == ["previous"]
    status = bundle_module.main(["--out", str(out), "--config", str(broken)])
    assert status == 1
    assert capsys.readouterr().err == f"bundle: error: {loading.value}\n"


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("../outside.yaml", "not beside or below the config"),
        ("config.json", "the name the bundle gives the config itself"),
    ],
)
def test_a_file_the_bundle_cannot_place_builds_no_bundle(
    tmp_path: Path, reference: str, problem: str
) -> None:
    config_dir = tmp_path / "configs"
    config_dir.mkdir()
    spec = (CONFIG.parent / "templates" / "dws-rest-body.json").read_text(encoding="utf-8")
    (config_dir / reference).write_text(spec, encoding="utf-8")
    text = CONFIG.read_text(encoding="utf-8").replace("templates/dws-rest-body.json", reference)
    shutil.copytree(CONFIG.parent / "templates", config_dir / "templates")
    config = config_dir / "config.yaml"
    config.write_text(text, encoding="utf-8")
    load_config(str(config))  # a valid config: only its layout cannot be bundled
    with pytest.raises(bundle_module.BundleError, match=problem):
        bundle_module.build_bundle(tmp_path / "bundle", config=config, bytecode=False)


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
        env = {**os.environ, **DEPLOYED_ENV}
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
        env={**os.environ, **DEPLOYED_ENV},
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
