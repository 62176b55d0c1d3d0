"""``python -m bench capacity`` end to end on the emulators, in its quick form (20 triggers over
one simulated day, about 40 s): it prints the table and writes the JSON with the contract keys.

Nothing here compares a figure with a target: the figures belong to docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from bench import capacity_summary as summary


@pytest.mark.integration
def test_a_quick_capacity_run_prints_the_table_and_writes_every_contract_key(
    tmp_path: Path,
) -> None:
    json_path = tmp_path / "capacity.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "capacity",
            "--triggers",
            "20",
            "--days",
            "1",
            "--json",
            str(json_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["figure", *summary.POLICIES]
    results = json.loads(json_path.read_text())
    assert set(results["policies"]) == set(summary.POLICIES)
    for name, figures in results["policies"].items():
        assert set(summary.CONTRACT_KEYS) <= set(figures), name
        assert figures["triggers"] == 20
        assert 0.0 <= figures["success_rate"] <= 1.0
    for ours in ("static", "learned"):
        figures = results["policies"][ours]
        # Every trigger opened exactly one run, and no job is left without an owner.
        assert sum(figures["run_statuses"].values()) == 20
        assert figures["jobs_not_owned"] == 0
        assert figures["duplicate_gpu_hours"] == 0.0
