"""shared.adapters.ledger: a record the Firestore client itself refuses is LedgerRejected, never a
raw error.

google-cloud-firestore encodes a document before sending it, and refuses some values there, with
errors that are not ``GoogleAPICallError``: ``ValueError`` (an integer beyond int64, an empty map
key), protobuf's ``DecodeError`` (maps nested past its parser's depth) and ``RecursionError``
(deeper still). They escaped the ledger's error translation as raw exceptions (HTTP 500,
redelivered for ever); retrying cannot help, so they are ``LedgerRejected``, a permanent error
that dispatch records and alerts. The client is real and points at an address where nothing
listens: every refusal here happens before a request is sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.cloud import firestore
from run_builders import a_run

from shared.adapters.ledger import Ledger, LedgerRejected


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"n": value}
    return value


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")  # discard port: nothing answers
    return Ledger(firestore.Client(project="acme-ml"), collection="refusals")


@pytest.mark.parametrize(
    ("trigger", "client_error"),
    [
        pytest.param({"body": {"note": 2**64}}, "Value out of range", id="int-above-int64"),
        pytest.param({"body": {"note": -(2**63) - 1}}, "Value out of range", id="int-below-int64"),
        pytest.param({"body": {"": 1}}, "not a string or is empty", id="empty-key"),
        pytest.param({"body": nested(40)}, "MaxDepth", id="protobuf-decode-depth"),
        pytest.param({"body": nested(1000)}, "recursion", id="recursion-depth"),
    ],
)
def test_a_record_the_client_refuses_is_ledger_rejected(
    ledger: Ledger, trigger: dict[str, Any], client_error: str
) -> None:
    run = a_run(trigger=trigger)
    with pytest.raises(LedgerRejected) as caught:
        ledger.open_run(run)
    message = str(caught.value)
    assert f"ledger create of run {run.run_id}" in message
    assert client_error in message
    assert caught.value.__cause__ is not None  # the client's own error stays attached


@pytest.mark.parametrize("operation", ["get", "query"])
def test_a_client_error_on_a_read_is_not_read_as_a_refused_record(operation: str) -> None:
    # A closed channel raises ValueError too: on a read it says nothing about any record.
    from shared.adapters.ledger import _translated_errors

    with pytest.raises(ValueError, match="closed channel"), _translated_errors(operation, "r-1"):
        raise ValueError("Cannot invoke RPC on closed channel!")
