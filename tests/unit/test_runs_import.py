"""shared.model.runs, the run model, is cloud-free; shared.adapters.ledger still offers every name
it moved."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shared.adapters import ledger
from shared.model import runs

MOVED_NAMES = (
    "INTENT_STATE",
    "CREATE_FAILED_STATE",
    "REOPENABLE_STATUSES",
    "LedgerConflict",
    "InvalidTransition",
    "RunNotFound",
    "LedgerRejected",
    "RunStatus",
    "Attempt",
    "RetryPlan",
    "Run",
    "RunSnapshot",
    "AttemptOutcome",
    "utc_now",
    "with_claimed_attempt",
    "with_job",
    "with_attempt_state",
    "with_reopened",
    "with_status",
    "with_alert",
    "with_observed_state",
    "with_decision",
    "with_notice",
    "run_to_document",
    "run_from_document",
)


def test_importing_runs_imports_no_google_library() -> None:
    # The google and google.cloud namespace packages are preloaded by .pth files: count the rest.
    probe = (
        "import sys; before = set(sys.modules); import shared.model.runs;"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith(('google', 'grpc'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("name", MOVED_NAMES)
def test_the_ledger_re_exports_each_moved_name(name: str) -> None:
    assert getattr(ledger, name) is getattr(runs, name)
    assert name in ledger.__all__
