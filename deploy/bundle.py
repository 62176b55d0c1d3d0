"""Build the Cloud Functions source bundle: what Terraform uploads and `gcloud functions deploy`
takes, one directory (and its zip) made the same way for both.

The bundle is the source root Cloud Functions builds from:

- ``main.py``: a copy of ``functions/main.py`` (the runtime's default entry module);
- ``shared/``: the library package, every file but caches;
- ``requirements.txt``: the runtime dependencies pinned to the versions installed in the Python
  running this script, with everything they pull in, so production runs what the tests ran.

Run it with the project's virtual environment, from anywhere::

    .venv/bin/python deploy/bundle.py --out build/bundle --zip build/vertex-dispatch-source.zip

Only the standard library and ``packaging`` (a runtime dependency of the Google clients) are used:
this is a build tool, not part of what is deployed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parent.parent
PROJECT_DISTRIBUTION = "vertex-dispatch"
ENTRY_MODULE = Path("functions/main.py")
LIBRARY_PACKAGE = Path("shared")
SKIPPED_NAMES = ("__pycache__", "*.pyc", "*.pyo")
# Zip entries carry this date so the same files always make the same zip (and the same object
# name in Terraform, which names the upload by its MD5).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
REQUIREMENTS_HEADER = (
    "# Pinned from the environment that built this bundle (deploy/bundle.py); do not edit.\n"
)


class BundleError(Exception):
    """The bundle cannot be built; the message says what is missing and how to get it."""


@dataclass(frozen=True)
class Bundle:
    """A built bundle: its directory, its zip (when asked for) and its pinned requirements."""

    directory: Path
    zip_path: Path | None
    requirements: tuple[str, ...]


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


def build_bundle(
    out_dir: Path, *, zip_path: Path | None = None, repo_root: Path = REPO_ROOT
) -> Bundle:
    """Write the bundle into ``out_dir`` (emptied first) and, when asked, zip it."""
    entry = repo_root / ENTRY_MODULE
    library = repo_root / LIBRARY_PACKAGE
    for needed in (entry, library / "__init__.py"):
        if not needed.is_file():
            raise BundleError(f"{needed} is missing: build the bundle from a vertex-dispatch clone")
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
    if zip_path is not None:
        write_zip(out_dir, zip_path)
    return Bundle(out_dir, zip_path, requirements)


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
    args = parser.parse_args(argv)
    try:
        bundle = build_bundle(args.out.resolve(), zip_path=args.zip and args.zip.resolve())
    except BundleError as error:
        print(f"bundle: error: {error}", file=sys.stderr)
        return 1
    where = f"{bundle.directory}" + (f" and {bundle.zip_path}" if bundle.zip_path else "")
    count = len(bundle.requirements)
    print(f"bundle written to {where}: main.py, shared/, {count} pinned requirements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
