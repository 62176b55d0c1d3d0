"""The benchmark runs and prints its table and JSON (``--smoke``: no emulator, a few seconds).

Nothing here compares a time with a target: timings belong to ``python -m bench``, not to tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

TABLE_HEADER = "| figure | measured | target | verdict |"


def test_smoke_run_prints_the_table_and_writes_the_json(tmp_path: Path) -> None:
    json_path = tmp_path / "results" / "smoke.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--json", str(json_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == TABLE_HEADER
    assert any(line.startswith("| floor: hello-world") for line in lines)
    assert any("(4) reconcile" in line and "not run" in line for line in lines)
    results = json.loads(json_path.read_text())
    assert results["settings"]["smoke"] is True
    assert set(results["cold_start"]) == {"floor", "vertex-dispatch"}
    ours = results["cold_start"]["vertex-dispatch"]["unmatched"]
    assert ours["samples"] == 1
    assert ours["median_seconds"] > 0
    assert ours["median_rss_mib"] > 0
    # Run as deployed: from the bundle deploy/bundle.py built, with its bytecode.
    sample = ours["raw"][0]
    bundle_shared = Path(sample["loaded_from"]["shared"])
    assert bundle_shared.parts[-3:] == ("vertex-dispatch", "shared", "__init__.py")
    assert not bundle_shared.is_relative_to(REPO_ROOT)
    assert sample["root_modules_without_bytecode"] == []
    # With the config the bundle ships, as deployed: JSON, read without PyYAML.
    assert results["source_roots"]["vertex-dispatch"]["env"] == {
        "VERTEX_DISPATCH_CONFIG": "config/config.json"
    }
    assert sample["pyyaml_imported"] is False
    assert results["source_roots"]["vertex-dispatch"]["pyc_files"] > 40
    assert results["source_roots"]["floor"]["pyc_files"] == 1
    assert len(results["table"]) == len(lines) - 2
