# The run ledger: the (default) Firestore database in native mode (shared/adapters/ledger.py).

resource "google_firestore_database" "ledger" {
  count = var.create_firestore_database ? 1 : 0

  project     = var.project_id
  name        = "(default)"
  location_id = coalesce(var.firestore_location, var.region)
  type        = "FIRESTORE_NATIVE"
  # The ledger is what keeps triggers exactly-once: never delete it with the stack.
  deletion_policy = "ABANDON"

  depends_on = [google_project_service.enabled]
}

# `vertex-dispatch status` lists the newest runs of some statuses: an `in` filter on status
# ordered by created_at, descending (Ledger.list_runs(newest_first=True)), which Firestore serves
# only from this composite index. The collection is shared/adapters/ledger.py's DEFAULT_COLLECTION.
resource "google_firestore_index" "runs_by_status_newest_first" {
  project    = var.project_id
  database   = "(default)"
  collection = "vertex-dispatch-runs"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_database.ledger]
}

# The reconciler's round-robin over the active runs: an `in` filter on status ordered by
# created_at, ascending, then by document id, after a cursor (Ledger.next_runs, fields in
# shared/adapters/ledger.py's ROUND_ROBIN_INDEX). Firestore serves it only from this index; the
# document id order is implicit in it. Without it every reconcile tick fails with
# FAILED_PRECONDITION ("The query requires an index").
resource "google_firestore_index" "runs_by_status_oldest_first" {
  project    = var.project_id
  database   = "(default)"
  collection = "vertex-dispatch-runs"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "ASCENDING"
  }

  depends_on = [google_firestore_database.ledger]
}

# Run history of one template, newest first (Ledger.recent_runs): an equality filter on template
# ordered by created_at, descending. Learned placement order and GPU-hour budgets read it.
resource "google_firestore_index" "runs_by_template_newest_first" {
  project    = var.project_id
  database   = "(default)"
  collection = "vertex-dispatch-runs"

  fields {
    field_path = "template"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_database.ledger]
}
