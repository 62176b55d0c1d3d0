"""Helpers for the bundle tests: deploy/bundle.py loaded as a module (it is a script, not a
package), and what a fresh interpreter really loads from a bundle: bytecode or source."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "config.yaml"
# The modification time the Cloud Native Buildpacks lifecycle gives every file of the image it
# exports (archive.NormalizingTarWriter: 1980-01-01T00:00:01Z), the app's source included.
IMAGE_MTIME = 315532801
# What on_request imports on a cold instance: the entry module, then what dispatch imports lazily
# once a request matches (the ledger, the submission, validation, the Vertex AI client module).
ON_REQUEST_IMPORTS = (
    "import main\n"
    "from shared.adapters import alerts, ledger, retry_messages\n"
    "from shared.handlers import rejections, submission\n"
    "from shared.policy import records"
)


def _load_bundle_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vd_bundle", REPO / "deploy" / "bundle.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building the class
    spec.loader.exec_module(module)
    return module


bundle_module = _load_bundle_module()


def cold_env(**extra: str) -> dict[str, str]:
    """The environment of a cold instance run here: nothing written back (so every sample is as
    cold as the first), no cache prefix, nothing on PYTHONPATH ahead of the bundle."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPYCACHEPREFIX"}
    env.update(
        PYTHONDONTWRITEBYTECODE="1", PYTHONPATH="", VERTEX_DISPATCH_CONFIG=str(CONFIG), **extra
    )
    return env


def normalize_mtimes(directory: Path) -> None:
    """Give every file the mtime the buildpack's image export gives it."""
    for path in directory.rglob("*"):
        if path.is_file():
            os.utime(path, (IMAGE_MTIME, IMAGE_MTIME))


def copy_source_only(bundle: Path, destination: Path) -> Path:
    """A copy of the bundle without its bytecode: what the upload holds before any build step."""
    shutil.copytree(bundle, destination, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def buildpack_compile(directory: Path, **env: str) -> None:
    """What Google's Python functions buildpack runs on the source before installing anything:
    ``python3 -m compileall -f -q .`` (a syntax check that leaves its .pyc behind)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-f", "-q", "."],
        cwd=directory,
        env={**cold_env(), **env},
        check=True,
        stdout=subprocess.DEVNULL,
    )


@dataclass(frozen=True)
class Loaded:
    """The bundle's modules a fresh interpreter loaded, by source path relative to the bundle."""

    from_bytecode: frozenset[str]
    from_source: frozenset[str]


def modules_loaded(directory: Path, code: str = ON_REQUEST_IMPORTS) -> Loaded:
    """Run ``code`` in a fresh ``python -v`` in ``directory``; sort the bundle modules it loaded
    by where their code object came from (``-v`` prints one line per module)."""
    result = subprocess.run(
        [sys.executable, "-v", "-c", code],
        cwd=directory,
        env=cold_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    from_bytecode: set[str] = set()
    from_source: set[str] = set()
    root = directory.resolve()
    for line in result.stderr.splitlines():
        if not line.startswith("# code object from "):
            continue
        path = Path(line.removeprefix("# code object from ").strip("'"))
        if not path.is_relative_to(root):
            continue  # the standard library and site-packages
        if path.suffix == ".pyc":  # .../__pycache__/NAME.cpython-311.pyc
            source = path.parent.parent / f"{path.name.split('.')[0]}.py"
            from_bytecode.add(source.relative_to(root).as_posix())
        else:
            from_source.add(path.relative_to(root).as_posix())
    return Loaded(frozenset(from_bytecode), frozenset(from_source))
