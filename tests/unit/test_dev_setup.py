"""`./dev setup` says what it installs and how long that takes, since pip itself is kept quiet.

Run on a copy of the script beside a stand-in .venv whose pip does nothing, so nothing is
installed: only what the script prints, and when, is checked.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cli_test_support import REPO


def _dev_setup(directory: Path) -> str:
    result = subprocess.run(
        ["bash", str(directory / "dev"), "setup"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout == ""
    return result.stderr


def test_setup_says_what_it_installs_and_how_long_only_when_it_installs(tmp_path: Path) -> None:
    shutil.copy(REPO / "dev", tmp_path / "dev")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", "pip"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)

    first = _dev_setup(tmp_path).splitlines()
    again = _dev_setup(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    changed = _dev_setup(tmp_path).splitlines()

    assert first[0] == (
        "dev: installing the project and its dependencies into .venv "
        "(first time: about 1 to 2 minutes, once)..."
    )
    assert first[1].startswith("dev: installed in ") and first[1].endswith(" s")
    assert again == ""
    assert changed[0].endswith("(pyproject.toml changed: up to 2 minutes)...")
