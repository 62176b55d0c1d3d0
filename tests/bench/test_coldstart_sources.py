"""Cold starts run as deployed: from a bundle built by deploy/bundle.py, with its bytecode, and
``main``/``shared`` really imported from it (never from the repository or the editable install).

Nothing here compares a time with a target: timings belong to ``python -m bench``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT

from bench import coldstart
from bench.coldstart import COLD_CASES, ColdCase, Scenario, SourceRoot, Subject
from bench.coldstart_child import WRONG_SOURCE_EXIT

CONFIG = REPO_ROOT / "bench" / "dispatch-config.yaml"


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SourceRoot]:
    directory = tmp_path_factory.mktemp("sources")
    return coldstart.build_source_roots(directory, [Subject.FLOOR, Subject.OURS])


def env() -> dict[str, str]:
    return coldstart.child_environment({"VERTEX_DISPATCH_CONFIG": str(CONFIG)})


def unmatched(subject: str) -> ColdCase:
    return next(c for c in COLD_CASES if c.subject == subject and c.scenario == Scenario.UNMATCHED)


def test_ours_is_the_bundle_with_its_bytecode(roots: dict[str, SourceRoot]) -> None:
    ours = roots[Subject.OURS]
    assert (ours.directory / "main.py").read_bytes() == (
        REPO_ROOT / "functions" / "main.py"
    ).read_bytes()
    assert (ours.directory / "shared" / "__init__.py").is_file()
    assert ours.bytecode_skipped is None
    assert ours.pyc_files == len(list(ours.directory.rglob("*.py")))
    assert ours.libraries == ("shared",)


def test_ours_reads_the_config_shipped_in_the_bundle(roots: dict[str, SourceRoot]) -> None:
    # As deploy/deploy.sh builds it and Terraform points at it: bench/dispatch-config.yaml,
    # validated and written as JSON, read by a path relative to the root.
    ours = roots[Subject.OURS]
    assert ours.env == {"VERTEX_DISPATCH_CONFIG": "config/config.json"}
    shipped = json.loads((ours.directory / "config" / "config.json").read_text(encoding="utf-8"))
    assert shipped == yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert roots[Subject.FLOOR].env == {}


def test_the_floor_is_its_module_as_main_with_bytecode(roots: dict[str, SourceRoot]) -> None:
    floor = roots[Subject.FLOOR]
    assert (floor.directory / "main.py").read_bytes() == (
        REPO_ROOT / "bench" / "floor_function.py"
    ).read_bytes()
    assert floor.pyc_files == 1
    assert floor.bytecode_skipped is None


@pytest.mark.parametrize("subject", [Subject.FLOOR, Subject.OURS])
def test_the_child_imports_main_and_shared_from_the_root_and_its_bytecode(
    roots: dict[str, SourceRoot], subject: str
) -> None:
    root = roots[subject]
    result = coldstart.run_child(
        unmatched(subject), root, coldstart.event_json("shard", "7"), env()
    )
    loaded = {name: Path(str(file)) for name, file in dict(result["loaded_from"]).items()}
    expected = {"main", *root.libraries}
    assert set(loaded) == expected
    for file in loaded.values():
        assert file.is_relative_to(root.directory.resolve())
    if subject == Subject.OURS:
        assert loaded["shared"] == root.directory.resolve() / "shared" / "__init__.py"
        assert int(str(result["root_modules"])) > 10  # the unmatched path's shared modules
    assert result["root_modules_without_bytecode"] == []
    assert result["cloud_clients_imported"] == []
    assert result["pyyaml_imported"] is False  # the bundle's config is JSON


def test_a_shared_found_outside_the_root_fails_the_sample_loudly(tmp_path: Path) -> None:
    # A root whose main.py imports shared but ships none: the editable install serves the
    # repository's shared, which must not pass for the bundle's.
    (tmp_path / "main.py").write_text("import shared\n\n\ndef on_event(event):\n    pass\n")
    root = SourceRoot("vertex-dispatch", tmp_path, ("shared",), 0, None)
    case = ColdCase(Subject.OURS, Scenario.UNMATCHED, "on_event", "shard")
    with pytest.raises(coldstart.ColdStartFailed) as failure:
        coldstart.run_child(case, root, coldstart.event_json("shard", "7"), env())
    message = str(failure.value)
    assert f"exited {WRONG_SOURCE_EXIT}" in message
    assert "'shared' was imported from" in message
    assert str(REPO_ROOT / "shared") in message


def test_the_child_does_not_see_the_repository_or_pythonpath(tmp_path: Path) -> None:
    # The repository (on PYTHONPATH here, and the folder of the child script) holds the
    # ``bench`` package: the root's main.py must not be able to import it.
    (tmp_path / "main.py").write_text(
        "import importlib.util\n"
        "import sys\n\n\n"
        "def on_event(event):\n"
        f"    shadowing = [p for p in sys.path if p in ('', {str(REPO_ROOT)!r})]\n"
        "    if shadowing or importlib.util.find_spec('bench') is not None:\n"
        "        raise SystemExit(f'the repository is importable: {sys.path}')\n"
    )
    root = SourceRoot("floor", tmp_path, (), 0, None)
    polluted = {**env(), "PYTHONPATH": str(REPO_ROOT), "PYTHONPYCACHEPREFIX": str(tmp_path)}
    result = coldstart.run_child(
        unmatched(Subject.FLOOR), root, coldstart.event_json("shard", "7"), polluted
    )
    assert result["loaded_from"] == {"main": str((tmp_path / "main.py").resolve())}
    cold = coldstart.cold_environment(polluted)
    assert "PYTHONPATH" not in cold
    assert "PYTHONPYCACHEPREFIX" not in cold
    assert cold["PYTHONDONTWRITEBYTECODE"] == "1"
    command = coldstart.child_command(root, "on_event", "[]")
    assert command[:3] == [sys.executable, "-P", str(coldstart.CHILD_SCRIPT)]


def test_events_travel_as_json_the_child_can_rebuild() -> None:
    attributes, data = json.loads(coldstart.event_json("marker", "42"))
    assert attributes["type"] == "google.cloud.storage.object.v1.finalized"
    assert data["name"].endswith("/_SUCCESS")
    assert data["generation"] == "42"
    attributes, data = json.loads(coldstart.event_json("job_state", "projects/p/jobs/1", "m-1"))
    assert attributes["id"] == "m-1"
    with pytest.raises(ValueError, match="event kind"):
        coldstart.event_json("tick", "1")
