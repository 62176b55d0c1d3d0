"""Build the Cloud Functions source bundle: what Terraform uploads and `gcloud functions deploy`
takes, one directory (and its zip) made the same way for both.

The bundle is the source root Cloud Functions builds from:

- ``main.py``: a copy of ``functions/main.py`` (the runtime's default entry module);
- ``shared/``: the library package, every file but caches;
- ``requirements.txt``: the runtime dependencies pinned to the versions installed in the Python
  running this script, with everything they pull in, so production runs what the tests ran;
- ``config/config.json`` (with ``--config FILE``): the config, validated here as the function
  loads it (a broken config builds no bundle), written as JSON (JSON is YAML, and a cold instance
  reads it without importing PyYAML: see ``shared.config.yamlfile``), with every local file its
  templates refer to (``gcloud_config``, ``rest_body``) at the same path relative to it, also as
  JSON. The function reads it by ``VERTEX_DISPATCH_CONFIG=config/config.json``, relative to the
  source root, which is a function's working directory (``BUNDLED_CONFIG``);
- ``__pycache__/*.cpython-311.pyc`` beside every module: bytecode for the runtime's Python, so a
  cold instance does not compile our modules on import.

The bytecode is unchecked-hash (PEP 552): valid whatever happens to the files' modification times
(the zip, the upload and the container image all rewrite them), and never re-validated against the
source. It is written only when the Python running this script is the runtime's minor version
(``RUNTIME``: a 3.12 interpreter writes ``cpython-312`` files that 3.11 ignores); otherwise the
bundle is built without it and says so. Cloud Functions' Python buildpack recompiles the source
itself (``compileall -f``, for syntax errors), replacing these files: see docs/deploy.md for the
build variable that keeps its bytecode valid in the image.

Run it with the project's virtual environment, from anywhere::

    .venv/bin/python deploy/bundle.py --config my-config.yaml --zip build/vertex-dispatch-source.zip

Only the standard library, ``packaging`` (a runtime dependency of the Google clients) and, for
``--config``, the project's own config loader are used: this is a build tool, not part of what is
deployed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parent.parent
PROJECT_DISTRIBUTION = "vertex-dispatch"
ENTRY_MODULE = Path("functions/main.py")
LIBRARY_PACKAGE = Path("shared")
# Caches in the clone are never copied: they may be timestamp-based, stale or for another Python.
SKIPPED_NAMES = ("__pycache__", "*.pyc", "*.pyo")
# The Cloud Functions runtime the bundle is built for: the Terraform module's build_config.runtime
# (tests/deploy/test_bundle.py checks that the two agree).
RUNTIME = "python311"
# Zip entries carry this date so the same files always make the same zip (and the same object
# name in Terraform, which names the upload by its MD5).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
REQUIREMENTS_HEADER = (
    "# Pinned from the environment that built this bundle (deploy/bundle.py); do not edit.\n"
)
# Where the config goes in the bundle, relative to its root: the value of VERTEX_DISPATCH_CONFIG
# the Terraform module sets (tests/deploy/test_bundle.py checks that the two agree). A function's
# working directory is its source root, and a relative path is read from there.
BUNDLED_CONFIG = "config/config.json"
GCS_SCHEME = "gs://"


class BundleError(Exception):
    """The bundle cannot be built; the message says what is missing and how to get it."""


@dataclass(frozen=True)
class Bytecode:
    """The ``.pyc`` files written into a bundle (relative paths), or why none were."""

    files: tuple[str, ...]
    skipped: str | None = None


@dataclass(frozen=True)
class BundledConfig:
    """The config shipped in a bundle: where it came from, and the files written for it."""

    source: Path
    path: str  # BUNDLED_CONFIG, relative to the bundle's root
    files: tuple[str, ...]  # the files its templates refer to, relative to the bundle's root
    remote: tuple[str, ...]  # gs:// files its templates refer to: read from there at run time


@dataclass(frozen=True)
class Bundle:
    """A built bundle: its directory, its zip (when asked for), its pinned requirements, the
    bytecode and the config shipped with it."""

    directory: Path
    zip_path: Path | None
    requirements: tuple[str, ...]
    bytecode: Bytecode
    config: BundledConfig | None = None


def runtime_requirements(distribution: str = PROJECT_DISTRIBUTION) -> list[Requirement]:
    """The project's own runtime requirements, extras (``dev``) left out."""
    try:
        declared = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise BundleError(
            f"distribution {distribution!r} is not installed in {sys.executable}; run this "
            "script with the project's virtual environment (.venv/bin/python, after ./dev setup)"
        ) from None
    requirements = [Requirement(text) for text in declared]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def pinned_closure(roots: Iterable[Requirement]) -> list[str]:
    """``name==version`` for every installed distribution the roots need, transitively, sorted.

    Markers are evaluated for this interpreter and platform, which match the runtime (Linux,
    the same Python minor version) when the bundle is built on the development machine.
    """
    pins: dict[str, str] = {}
    pending = [(requirement, frozenset(requirement.extras)) for requirement in roots]
    while pending:
        requirement, extras = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in pins:
            continue
        try:
            distribution = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            raise BundleError(
                f"requirement {requirement} is not installed in {sys.executable}; reinstall the "
                "project (./dev setup) so the bundle can pin it"
            ) from None
        if not requirement.specifier.contains(distribution.version, prereleases=True):
            raise BundleError(
                f"installed {requirement.name} {distribution.version} does not satisfy "
                f"{requirement}; reinstall the project (./dev setup)"
            )
        pins[name] = f"{distribution.metadata['Name']}=={distribution.version}"
        for text in distribution.requires or []:
            child = Requirement(text)
            if _applies(child, extras):
                pending.append((child, frozenset(child.extras)))
    return sorted(pins.values(), key=str.lower)


def _applies(requirement: Requirement, extras: frozenset[str]) -> bool:
    if requirement.marker is None:
        return True
    environment = dict(default_environment())
    return any(
        requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras | {""}
    )


def runtime_python(runtime: str = RUNTIME) -> tuple[int, int]:
    """``python311`` -> ``(3, 11)``: the Python minor version a Cloud Functions runtime runs."""
    digits = runtime.removeprefix("python")
    if not (runtime.startswith("python3") and digits.isdigit() and len(digits) >= 2):
        raise BundleError(f"{runtime!r} is not a Cloud Functions Python runtime (e.g. python311)")
    return int(digits[0]), int(digits[1:])


# Run in a fresh interpreter: marshal's output depends on the reference counts of the objects it
# writes, so the same source compiled in a process that has imported more (a test run, say) gives
# other bytes, and the zip would change although no file did. PYTHONHASHSEED pins anything that
# still depends on string hashing. The .pyc path is given explicitly so that PYTHONPYCACHEPREFIX
# cannot send it elsewhere, and the path recorded in the code objects is the bundle-relative one
# (the import system replaces it with the real location on load), so it does not depend on where
# the bundle was built either.
_COMPILE_SCRIPT = """
import json, py_compile, sys
from pathlib import Path
from typing import Any
root = Path(sys.argv[1])
written = []
for source in sorted(root.rglob("*.py")):
    relative = source.relative_to(root)
    cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(
        str(source), cfile=str(cached), dfile=relative.as_posix(), doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    written.append(cached.relative_to(root).as_posix())
print(json.dumps(written))
"""


def compile_bytecode(directory: Path, *, runtime: str = RUNTIME) -> Bytecode:
    """Write an unchecked-hash ``.pyc`` for every module under ``directory`` with this
    interpreter, when it is the runtime's CPython minor version; otherwise write none, and say
    why (the runtime would ignore bytecode of another version and compile from source anyway)."""
    wanted = runtime_python(runtime)
    have = sys.version_info[:2]
    if sys.implementation.name != "cpython" or have != wanted:
        return Bytecode(
            (),
            skipped=(
                f"{sys.executable} is {sys.implementation.name} {have[0]}.{have[1]}, the "
                f"{runtime} runtime loads only CPython {wanted[0]}.{wanted[1]} bytecode: no .pyc "
                f"shipped (each cold instance compiles the modules); build with a "
                f"{wanted[0]}.{wanted[1]} interpreter to ship them"
            ),
        )
    result = subprocess.run(
        [sys.executable, "-s", "-c", _COMPILE_SCRIPT, str(directory)],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        # A module that does not compile would fail the Cloud Functions build too.
        raise BundleError(f"compiling the bundle's modules failed:\n{result.stderr.strip()}")
    return Bytecode(tuple(json.loads(result.stdout)))


def build_bundle(
    out_dir: Path,
    *,
    zip_path: Path | None = None,
    repo_root: Path = REPO_ROOT,
    runtime: str = RUNTIME,
    bytecode: bool = True,
    config: Path | None = None,
) -> Bundle:
    """Write the bundle into ``out_dir`` (emptied first), with bytecode for ``runtime`` unless
    told not to, the ``config`` file (validated; see ``bundle_config``) when given, and, when
    asked, zip it. A config that does not load builds nothing."""
    entry = repo_root / ENTRY_MODULE
    library = repo_root / LIBRARY_PACKAGE
    for needed in (entry, library / "__init__.py"):
        if not needed.is_file():
            raise BundleError(f"{needed} is missing: build the bundle from a vertex-dispatch clone")
    shipped = None if config is None else read_config(config)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    shutil.copyfile(entry, out_dir / "main.py")
    shutil.copytree(
        library, out_dir / LIBRARY_PACKAGE, ignore=shutil.ignore_patterns(*SKIPPED_NAMES)
    )
    requirements = tuple(pinned_closure(runtime_requirements()))
    (out_dir / "requirements.txt").write_text(
        REQUIREMENTS_HEADER + "".join(f"{line}\n" for line in requirements), encoding="utf-8"
    )
    bundled = None if shipped is None else write_config(shipped, out_dir)
    compiled = (
        compile_bytecode(out_dir, runtime=runtime)
        if bytecode
        else Bytecode((), skipped="not asked for")
    )
    if zip_path is not None:
        write_zip(out_dir, zip_path)
    return Bundle(out_dir, zip_path, requirements, compiled, bundled)


@dataclass(frozen=True)
class ConfigToShip:
    """A validated config, ready to be written into a bundle: its file, the loaded config, and
    the JSON text of it and of each local file its templates refer to (by reference)."""

    source: Path
    loaded: Any  # shared.config.model.Config
    text: str
    files: dict[str, str]
    remote: tuple[str, ...]


def read_config(config_file: Path) -> ConfigToShip:
    """Load ``config_file`` the way a function does (``BundleError`` with the loader's message
    when it does not load), and render it and the files its templates read as JSON that the
    function reads back without PyYAML (``shared.config.yamlfile.parse_json_object``)."""
    from shared.adapters.config_source import read_source, reader_beside
    from shared.config.loader import parse_config
    from shared.config.yamlfile import parse_yaml
    from shared.model.errors import DispatchError

    source = str(config_file)
    if source.startswith(GCS_SCHEME):
        raise BundleError(f"--config takes a local file, not {source}: copy the config here")
    read: list[str] = []
    try:
        text = read_source(source)
        base_dir = config_file.resolve().parent
        read_beside = reader_beside(source, base_dir)

        def recording_reader(reference: str) -> str:
            read.append(reference)
            return read_beside(reference)

        loaded = parse_config(text, source, base_dir, read_file=recording_reader)
    except DispatchError as error:  # ConfigError, or a gs:// file that cannot be read now
        raise BundleError(str(error)) from None
    files: dict[str, str] = {}
    for reference in dict.fromkeys(read):
        if reference.startswith(GCS_SCHEME):
            continue
        where = _bundled_path(reference)
        files[where] = _as_json(parse_yaml(read_beside(reference)), f"{source}: {reference}")
    return ConfigToShip(
        source=config_file,
        loaded=loaded,
        text=_as_json(parse_yaml(text), source),
        files=files,
        remote=tuple(r for r in dict.fromkeys(read) if r.startswith(GCS_SCHEME)),
    )


def _bundled_path(reference: str) -> str:
    """Where a file a template refers to goes in the bundle: at the same path relative to the
    config, which must stay beside or below it (so inside the bundle's ``config/``)."""
    config_dir = posixpath.dirname(BUNDLED_CONFIG)
    where = posixpath.normpath(posixpath.join(config_dir, reference))
    if posixpath.isabs(reference) or not where.startswith(f"{config_dir}/"):
        raise BundleError(
            f"a template refers to {reference!r}, which is not beside or below the config: the "
            "bundle ships the files a config refers to at the same path relative to it; move "
            "the file into the config's directory (or below) and refer to it from there"
        )
    if where == BUNDLED_CONFIG:
        raise BundleError(
            f"a template refers to {reference!r}, the name the bundle gives the config itself "
            f"({BUNDLED_CONFIG}); rename that file"
        )
    return where


# A float JSON writes with an exponent but no "." (1e-05): YAML 1.1 would read it as text, so the
# config's reader leaves such text to PyYAML; written as 1.0e-05 it is a number to both. Strings
# are matched first, so nothing inside one is touched.
_BARE_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![\d.])(-?\d+)(e[-+]\d+)')


def _as_json(document: object, name: str) -> str:
    """``document`` as JSON text that ``parse_json_object`` reads back equal to it; otherwise
    ``BundleError`` naming ``name``."""
    from shared.config.yamlfile import parse_json_object, yaml_reads_as_itself

    try:
        text = json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:  # a date, a set, NaN: not JSON
        raise BundleError(f"{name} cannot be written as JSON: {error}") from None
    # Characters the reader leaves to YAML (line breaks, controls) go as escapes, read the same.
    text = "".join(c if yaml_reads_as_itself(c) else f"\\u{ord(c):04x}" for c in text)
    text = _BARE_EXPONENT.sub(lambda m: m[0] if m[1] is None else f"{m[1]}.0{m[2]}", text)
    if parse_json_object(text) != document:
        raise BundleError(
            f"{name} does not read back the same from JSON (a non-text key, or a character "
            "JSON and YAML read differently); write it in plain YAML types"
        )
    return text + "\n"


def write_config(config: ConfigToShip, out_dir: Path) -> BundledConfig:
    """Write ``config`` into the bundle at ``out_dir``, then load it from there as the function
    will, and check it is the config that was validated."""
    from shared.adapters.config_source import load_config
    from shared.model.errors import ConfigError

    for relative, text in {BUNDLED_CONFIG: config.text, **config.files}.items():
        target = out_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    bundled = out_dir / BUNDLED_CONFIG
    try:
        reloaded = load_config(str(bundled))
    except ConfigError as error:
        raise BundleError(f"the bundled config does not load: {error}") from None
    if dataclasses.replace(reloaded, source=config.loaded.source) != config.loaded:
        raise BundleError(
            f"the bundled config {bundled} does not load as the same config as {config.source}"
        )
    return BundledConfig(config.source, BUNDLED_CONFIG, tuple(sorted(config.files)), config.remote)


def write_zip(directory: Path, zip_path: Path) -> None:
    """Zip ``directory``'s files at the archive root, byte-identical for identical files."""
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(path for path in directory.rglob("*") if path.is_file())
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            entry = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time=ZIP_DATE)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, path.read_bytes())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "build" / "bundle", help="bundle directory"
    )
    parser.add_argument("--zip", type=Path, help="also write the bundle as this zip file")
    parser.add_argument(
        "--no-bytecode", action="store_true", help=f"ship no .pyc (default: compiled for {RUNTIME})"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"validate this config and ship it as {BUNDLED_CONFIG} (set VERTEX_DISPATCH_CONFIG "
        "to that path); without it, the functions read the config VERTEX_DISPATCH_CONFIG names",
    )
    args = parser.parse_args(argv)
    try:
        bundle = build_bundle(
            args.out.resolve(),
            zip_path=args.zip and args.zip.resolve(),
            bytecode=not args.no_bytecode,
            config=args.config,
        )
    except BundleError as error:
        print(f"bundle: error: {error}", file=sys.stderr)
        return 1
    where = f"{bundle.directory}" + (f" and {bundle.zip_path}" if bundle.zip_path else "")
    count = len(bundle.requirements)
    if bundle.bytecode.skipped:
        if not args.no_bytecode:
            print(f"bundle: warning: {bundle.bytecode.skipped}", file=sys.stderr)
        pyc = "no .pyc"
    else:
        pyc = f"{len(bundle.bytecode.files)} .pyc for {RUNTIME} (unchecked-hash)"
    shipped = ""
    if bundle.config is not None:
        files = len(bundle.config.files)
        shipped = f", the config as {bundle.config.path}" + (
            f" with {files} file{'s' if files != 1 else ''} its templates read" if files else ""
        )
        for uri in bundle.config.remote:
            print(
                f"bundle: note: a template reads {uri}: not bundled, each cold instance reads it "
                "from Cloud Storage",
                file=sys.stderr,
            )
    print(
        f"bundle written to {where}: main.py, shared/, {count} pinned requirements, {pyc}{shipped}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
