"""The bundle's bytecode (deploy/bundle.py): one unchecked-hash ``.pyc`` per module for the
runtime's Python, loaded by a cold interpreter whatever the files' mtimes, reproducible, and
skipped with a reason for an interpreter the runtime would not use.

Also pinned here, because docs/deploy.md relies on it: what Cloud Functions' Python buildpack does
to the source (``compileall -f``) and its image export (every mtime set to 1980-01-01T00:00:01Z)
leave a cold instance, with and without ``SOURCE_DATE_EPOCH`` in the build environment. The slow
test measures the cold import of the on_request path in each case and prints FIGURES lines."""

from __future__ import annotations

import importlib.util
import re
import shutil
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from bundle_test_support import (
    ON_REQUEST_IMPORTS,
    REPO,
    buildpack_compile,
    bundle_module,
    cold_env,
    copy_source_only,
    modules_loaded,
    normalize_mtimes,
)

RUNTIME = bundle_module.RUNTIME
MAJOR, MINOR = bundle_module.runtime_python(RUNTIME)
CACHE_TAG = f"cpython-{MAJOR}{MINOR}"
UNCHECKED_HASH_FLAGS = 0b01  # PEP 552: hash-based, do not check the source
CHECKED_HASH_FLAGS = 0b11


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bytecode-bundle")
    return bundle_module.build_bundle(out / "source", zip_path=out / "source.zip")


def _expected_pycs(directory: Path) -> set[str]:
    return {
        (source.parent / "__pycache__" / f"{source.stem}.{CACHE_TAG}.pyc")
        .relative_to(directory)
        .as_posix()
        for source in directory.rglob("*.py")
    }


def _pyc_header(pyc: Path) -> tuple[bytes, int, bytes]:
    data = pyc.read_bytes()
    return data[:4], int.from_bytes(data[4:8], "little"), data[8:16]


def test_the_runtime_is_the_one_terraform_deploys() -> None:
    # The .pyc are for RUNTIME's Python: if the functions run on another, they are dead weight.
    functions_tf = REPO / "deploy/terraform/modules/vertex-dispatch/functions.tf"
    runtimes = set(re.findall(r'\bruntime\s*=\s*"([^"]+)"', functions_tf.read_text()))
    assert runtimes == {RUNTIME}


def test_the_build_interpreter_is_the_runtimes() -> None:
    # Not a check of the bundle: the tests below need the bytecode to be written.
    assert sys.version_info[:2] == (MAJOR, MINOR), f"run the tests with Python {MAJOR}.{MINOR}"


def test_every_module_has_exactly_one_pyc_for_the_runtime(built) -> None:
    shipped = {p.relative_to(built.directory).as_posix() for p in built.directory.rglob("*.pyc")}
    assert shipped == _expected_pycs(built.directory)
    assert set(built.bytecode.files) == shipped
    assert built.bytecode.skipped is None
    assert len(shipped) > 40  # main.py and the whole shared package, not a stray file or two


def test_each_pyc_is_unchecked_hash_of_its_source(built) -> None:
    for relative in built.bytecode.files:
        pyc = built.directory / relative
        source = pyc.parent.parent / f"{pyc.name.split('.')[0]}.py"
        magic, flags, source_hash = _pyc_header(pyc)
        assert magic == importlib.util.MAGIC_NUMBER, relative
        assert flags == UNCHECKED_HASH_FLAGS, relative
        assert source_hash == importlib.util.source_hash(source.read_bytes()), relative


def test_the_zip_carries_the_bytecode(built) -> None:
    with zipfile.ZipFile(built.zip_path) as archive:
        names = set(archive.namelist())
    assert set(built.bytecode.files) <= names


def test_the_bytecode_does_not_depend_on_the_building_process(built, tmp_path: Path) -> None:
    # Terraform names the upload by its MD5: a build from the command line (a fresh process) and
    # one from this test process (which has imported much more) must give the same zip.
    zip_path = tmp_path / "cli.zip"
    script = REPO / "deploy" / "bundle.py"
    subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path / "cli"), "--zip", str(zip_path)],
        check=True,
        capture_output=True,
    )
    assert zip_path.read_bytes() == built.zip_path.read_bytes()


def test_a_cold_instance_loads_every_module_from_the_bytecode_whatever_the_mtimes(
    built, tmp_path: Path
) -> None:
    deployed = tmp_path / "workspace"
    shutil.copytree(built.directory, deployed)
    normalize_mtimes(deployed)  # as the image export leaves them (and as unzip may)
    loaded = modules_loaded(deployed)
    assert loaded.from_source == set()
    assert {
        "main.py",
        "shared/handlers/dispatch.py",
        "shared/handlers/submission.py",
    } <= loaded.from_bytecode


@pytest.mark.parametrize(
    ("runtime", "writes"),
    [
        (RUNTIME, True),
        (f"python{MAJOR}{MINOR + 1}", False),  # the interpreter here would write the wrong tag
        (f"python{MAJOR}{MINOR - 1}", False),
    ],
)
def test_bytecode_only_for_the_runtimes_python(tmp_path: Path, runtime: str, writes: bool) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("VALUE = 1\n")
    bytecode = bundle_module.compile_bytecode(tmp_path, runtime=runtime)
    assert bool(list(tmp_path.rglob("*.pyc"))) is writes
    assert bool(bytecode.files) is writes
    if not writes:
        assert f"{MAJOR}.{MINOR}" in bytecode.skipped and runtime in bytecode.skipped


@pytest.mark.parametrize("runtime", ["nodejs20", "python3", "python", "python3x"])
def test_a_runtime_that_is_not_python_is_refused(runtime: str) -> None:
    with pytest.raises(bundle_module.BundleError, match="not a Cloud Functions Python runtime"):
        bundle_module.runtime_python(runtime)


def test_a_module_that_does_not_compile_fails_the_build(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def f(:\n")
    with pytest.raises(bundle_module.BundleError, match=r"broken\.py"):
        bundle_module.compile_bytecode(tmp_path)


def test_the_command_line_says_when_bytecode_is_skipped(tmp_path: Path) -> None:
    out = tmp_path / "b"
    result = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "bundle.py"), "--out", str(out), "--no-bytecode"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "no .pyc" in result.stdout
    assert not list(out.rglob("*.pyc"))


# What the Python buildpack leaves a cold instance: (environment of its compileall, the header
# flags it writes, whether the modules then load from bytecode once the export reset the mtimes).
BUILDPACK_CASES = [
    pytest.param({}, 0, False, id="as-deployed-timestamp-pyc-made-stale-by-the-export"),
    pytest.param(
        {"SOURCE_DATE_EPOCH": "315532801"}, CHECKED_HASH_FLAGS, True, id="with-source-date-epoch"
    ),
]


@pytest.mark.parametrize(("build_env", "flags", "from_bytecode"), BUILDPACK_CASES)
def test_what_the_buildpack_compile_leaves_a_cold_instance(
    built, tmp_path: Path, build_env: dict[str, str], flags: int, from_bytecode: bool
) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(built.directory, workspace)
    buildpack_compile(workspace, **build_env)  # overwrites the bundle's own .pyc (-f)
    assert (
        _pyc_header(workspace / "shared/handlers/__pycache__" / f"dispatch.{CACHE_TAG}.pyc")[1]
        == flags
    )
    normalize_mtimes(workspace)
    loaded = modules_loaded(workspace)
    assert bool(loaded.from_bytecode) is from_bytecode
    assert bool(loaded.from_source) is not from_bytecode


def _variants(built, root: Path) -> dict[str, Path]:
    """The same bundle as a cold instance may find it, each with mtimes as the image has them."""
    unchecked = shutil.copytree(built.directory, root / "unchecked")
    variants = {
        "no .pyc": copy_source_only(built.directory, root / "source"),
        "buildpack as deployed (timestamp .pyc, stale)": copy_source_only(
            built.directory, root / "timestamp"
        ),
        "buildpack with SOURCE_DATE_EPOCH (checked-hash .pyc)": copy_source_only(
            built.directory, root / "checked"
        ),
        "bundle's .pyc (unchecked-hash)": unchecked,
    }
    buildpack_compile(variants["buildpack as deployed (timestamp .pyc, stale)"])
    buildpack_compile(
        variants["buildpack with SOURCE_DATE_EPOCH (checked-hash .pyc)"],
        SOURCE_DATE_EPOCH="315532801",
    )
    for directory in variants.values():
        normalize_mtimes(directory)
    return variants


# Wall time is what a request waits for; CPU time is the same work measured without what the
# other processes of this shared machine take from it.
TIMED_CHILD = (
    "import time\nwall, cpu = time.perf_counter(), time.process_time()\n"
    + ON_REQUEST_IMPORTS
    + "\nprint(time.perf_counter() - wall, time.process_time() - cpu)"
)


# The work the bytecode saves, measured alone: compiling the modules the path loads, in a fresh
# process (the compiler as cold as on a new instance); CPU time, so steadier than the wall times.
COMPILE_CHILD = (
    "import sys, time\nsources = [(name, open(name, 'rb').read()) for name in sys.argv[1:]]\n"
    "cpu = time.process_time()\nfor name, text in sources: compile(text, name, 'exec')\n"
    "print(time.process_time() - cpu)"
)


@pytest.mark.slow
def test_cold_import_figures(built, tmp_path: Path) -> None:
    # Not a timed test: it prints the figures (docs/performance.md) and checks what was loaded.
    variants = _variants(built, tmp_path)
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(15):  # interleaved, so a slow moment of the shared machine spreads over all
        for name, directory in variants.items():
            result = subprocess.run(
                [sys.executable, "-c", TIMED_CHILD],
                cwd=directory,
                env=cold_env(),
                capture_output=True,
                text=True,
                check=True,
            )
            seconds, cpu_seconds = result.stdout.strip().splitlines()[-1].split()
            wall[name].append(float(seconds))
            cpu[name].append(float(cpu_seconds))
    reference = statistics.median(cpu["no .pyc"])
    for name, directory in variants.items():
        loaded = modules_loaded(directory)
        median_cpu = statistics.median(cpu[name])
        print(
            f"FIGURES bytecode cold import of main + on_request path, {name}: "
            f"wall median={statistics.median(wall[name]):.3f}s min={min(wall[name]):.3f}s "
            f"max={max(wall[name]):.3f}s; cpu median={median_cpu:.3f}s min={min(cpu[name]):.3f}s "
            f"({median_cpu / reference:.2f}x no .pyc; n={len(cpu[name])}); modules from "
            f"bytecode={len(loaded.from_bytecode)}, from source={len(loaded.from_source)}"
        )
        expect_bytecode = "SOURCE_DATE_EPOCH" in name or "unchecked" in name
        assert bool(loaded.from_bytecode) is expect_bytecode, name
    compiled = sorted(modules_loaded(variants["no .pyc"]).from_source)
    compile_cpu = [
        float(
            subprocess.run(
                [sys.executable, "-c", COMPILE_CHILD, *compiled],
                cwd=variants["no .pyc"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for _ in range(10)
    ]
    print(
        f"FIGURES bytecode compile of the {len(compiled)} modules of main + on_request path in a "
        f"fresh process (saved by .pyc): cpu median={statistics.median(compile_cpu):.3f}s "
        f"min={min(compile_cpu):.3f}s max={max(compile_cpu):.3f}s (n={len(compile_cpu)})"
    )
