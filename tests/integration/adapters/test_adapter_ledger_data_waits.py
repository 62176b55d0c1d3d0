"""The ledger's writes for runs waiting for their data, on the Firestore emulator."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from shared.adapters.ledger import Ledger, LedgerConflict, Run, RunStatus
from shared.model.data_waits import ManifestWait

SINCE = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
WAIT = ManifestWait("gs://b/d/manifest.json", 2, 1, ("gs://b/d/part-1",), SINCE)


def waiting_run() -> Run:
    return Run(
        "r-" + "0a" * 12,
        "gcs:b/d/@1",
        "manifests",
        "flex-a100",
        {},
        status=RunStatus.WAITING_DATA,
        data_wait=WAIT,
    )


def test_ending_a_data_wait_never_fails_a_run_another_tick_started(ledger: Ledger) -> None:
    read_by_a_late_tick, _ = ledger.open_run(waiting_run())
    complete = replace(WAIT, missing_count=0, missing=())
    ledger.data_ready(read_by_a_late_tick, complete, SINCE)  # another tick found it complete

    with pytest.raises(LedgerConflict):
        ledger.fail_data_wait(read_by_a_late_tick)

    stored = ledger.get_run(waiting_run().run_id)
    assert stored is not None and stored.run.status is RunStatus.ACCEPTED


def test_ending_a_data_wait_survives_an_alert_claim_in_between(ledger: Ledger) -> None:
    snapshot, _ = ledger.open_run(waiting_run())
    assert ledger.record_alert(snapshot.run.run_id, "data_timeout")  # moves update_time

    ended = ledger.fail_data_wait(snapshot)

    assert ended.run.status is RunStatus.FAILED
    assert ledger.fail_data_wait(ended).run.status is RunStatus.FAILED  # again: unchanged
