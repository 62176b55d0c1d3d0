"""`vertex-dispatch plan ... | head`: a reader that leaves is not a verdict.

`plan` exits 0, 1 or 3 by what it decided; when the reader of its output goes away before all of
it is written, it exits 141 (128 + SIGPIPE, what a shell shows for a command a closed pipe
stopped), whatever it decided, and prints nothing on stderr. Checked with real pipes.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_test_support import EXAMPLE_CONFIG, REPO

from tooling import EXIT_CLOSED_PIPE, EXIT_NO_ROUTE, EXIT_OK, EXIT_PROBLEMS, main

MARKER = {
    "specversion": "1.0",
    "type": "google.cloud.storage.object.v1.finalized",
    "source": "//storage.googleapis.com/projects/_/buckets/acme-datasets",
    "subject": "objects/imagenet/2026-12-01/_SUCCESS",
    "id": "1",
    "data": {
        "bucket": "acme-datasets",
        "name": "imagenet/2026-12-01/_SUCCESS",
        "generation": "1733100000000000",
        "metageneration": "1",
        "size": "0",
    },
}
SHARD = {
    **MARKER,
    "subject": "objects/imagenet/2026-12-01/part-00000.tfrecord",
    "data": {**MARKER["data"], "name": "imagenet/2026-12-01/part-00000.tfrecord", "size": "9"},
}
UNKNOWN_TEMPLATE = {
    "message": {
        "data": base64.b64encode(json.dumps({"template": "no-such-template"}).encode()).decode(),
        "attributes": {"kind": "train"},
        "messageId": "9876543210",
        "publishTime": "2026-12-01T02:00:03.412Z",
    },
    "subscription": "projects/acme-ml/subscriptions/push-requests",
}
CASES = [
    pytest.param(MARKER, EXIT_OK, id="valid"),
    pytest.param(UNKNOWN_TEMPLATE, EXIT_PROBLEMS, id="rejected"),
    pytest.param(SHARD, EXIT_NO_ROUTE, id="no-route"),
]


def _plan_argv(event: dict[str, Any], tmp_path: Path) -> list[str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    argv = ["plan", "--config", EXAMPLE_CONFIG, "--event", str(path)]
    if "message" in event:
        argv += ["--topic", "projects/acme-ml/topics/training-requests"]
    return argv


@pytest.mark.parametrize(("event", "verdict"), CASES)
def test_plan_into_an_open_output_exits_with_its_verdict(
    event: dict[str, Any], verdict: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_plan_argv(event, tmp_path)) == verdict
    assert "verdict:" in capsys.readouterr().out


@pytest.mark.parametrize(("event", "verdict"), CASES)
def test_plan_into_a_closed_pipe_exits_141_quietly_whatever_its_verdict(
    event: dict[str, Any], verdict: int, tmp_path: Path
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before plan writes a byte: every write fails
    try:
        result = subprocess.run(
            [sys.executable, "-m", "tooling", *_plan_argv(event, tmp_path)],
            cwd=REPO,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)

    assert result.stderr.decode() == ""  # no traceback, no "Exception ignored" at exit
    assert result.returncode == EXIT_CLOSED_PIPE != verdict


def test_plan_piped_into_head_never_exits_with_a_wrong_verdict(tmp_path: Path) -> None:
    """As a shell user runs it: the event is valid, so the status is 0 when head read the whole
    output, or 141 when head left first; before, it was 1 ("rejected") about half the time."""
    command = shlex.join([sys.executable, "-m", "tooling", *_plan_argv(MARKER, tmp_path)])
    statuses = set()
    for _ in range(3):
        result = subprocess.run(
            ["bash", "-c", f"{command} | head -n 1; echo ${{PIPESTATUS[0]}} >&2"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.stdout.startswith("event: ")
        statuses.add(int(result.stderr.strip().splitlines()[-1]))

    assert statuses <= {EXIT_OK, EXIT_CLOSED_PIPE}


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["validate", "--help"]])
def test_help_documents_the_closed_pipe_status(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    assert f"{EXIT_CLOSED_PIPE} " in capsys.readouterr().out
