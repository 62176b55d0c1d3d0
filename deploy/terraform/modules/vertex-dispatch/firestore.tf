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
