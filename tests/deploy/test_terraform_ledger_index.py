"""The Firestore composite index in deploy/terraform serves the ledger's ordered query: the one
``Ledger.list_runs(newest_first=True)`` sends for `vertex-dispatch status` (status in ...,
ordered by created_at descending) on the collection the functions write."""

from __future__ import annotations

from pathlib import Path

import hcl2

from shared.adapters.ledger import DEFAULT_COLLECTION, NEWEST_FIRST_FIELD

FIRESTORE_TF = (
    Path(__file__).resolve().parents[2] / "deploy/terraform/modules/vertex-dispatch/firestore.tf"
)


def test_the_status_query_has_its_composite_index() -> None:
    options = hcl2.SerializationOptions(
        strip_string_quotes=True, explicit_blocks=False, with_comments=False
    )
    parsed = hcl2.loads(FIRESTORE_TF.read_text(encoding="utf-8"), serialization_options=options)
    indexes = {
        name: index
        for block in parsed["resource"]
        for name, index in block.get("google_firestore_index", {}).items()
    }

    index = indexes["runs_by_status_newest_first"]

    assert index["collection"] == DEFAULT_COLLECTION
    assert index["database"] == "(default)"
    assert [(field["field_path"], field["order"]) for field in index["fields"]] == [
        ("status", "ASCENDING"),
        (NEWEST_FIRST_FIELD, "DESCENDING"),
    ]
