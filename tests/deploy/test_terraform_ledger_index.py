"""The Firestore composite indexes in deploy/terraform serve the ledger's ordered queries: the one
``Ledger.list_runs(newest_first=True)`` sends for `vertex-dispatch status` (status in ...,
ordered by created_at descending), and the reconciler's round-robin ``Ledger.next_runs`` (status
in ..., ordered by created_at ascending, after a cursor), on the collection the functions write.
The Firestore emulator serves any query without an index: this test is what keeps them in step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hcl2

from shared.adapters.ledger import DEFAULT_COLLECTION, NEWEST_FIRST_FIELD, ROUND_ROBIN_INDEX

FIRESTORE_TF = (
    Path(__file__).resolve().parents[2] / "deploy/terraform/modules/vertex-dispatch/firestore.tf"
)


def _indexes() -> dict[str, Any]:
    options = hcl2.SerializationOptions(
        strip_string_quotes=True, explicit_blocks=False, with_comments=False
    )
    parsed = hcl2.loads(FIRESTORE_TF.read_text(encoding="utf-8"), serialization_options=options)
    return {
        name: index
        for block in parsed["resource"]
        for name, index in block.get("google_firestore_index", {}).items()
    }


def test_the_status_query_has_its_composite_index() -> None:
    index = _indexes()["runs_by_status_newest_first"]

    assert index["collection"] == DEFAULT_COLLECTION
    assert index["database"] == "(default)"
    assert [(field["field_path"], field["order"]) for field in index["fields"]] == [
        ("status", "ASCENDING"),
        (NEWEST_FIRST_FIELD, "DESCENDING"),
    ]


def test_the_reconcilers_round_robin_has_its_composite_index() -> None:
    index = _indexes()["runs_by_status_oldest_first"]

    assert index["collection"] == DEFAULT_COLLECTION
    assert index["database"] == "(default)"
    fields = [(field["field_path"], field["order"]) for field in index["fields"]]
    assert fields == list(ROUND_ROBIN_INDEX)
    # What the query filters on (an `in` on status), then what it orders on, ascending.
    assert fields == [("status", "ASCENDING"), (NEWEST_FIRST_FIELD, "ASCENDING")]
