# Buckets: the functions' source (which holds the config, see functions.tf), and optionally the
# dataset buckets the gcs routes watch. None is public.

resource "google_storage_bucket" "source" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"

  depends_on = [google_project_service.enabled]
}

resource "google_storage_bucket" "dataset" {
  for_each = var.create_dataset_buckets ? var.dataset_buckets : {}

  project                     = var.project_id
  name                        = each.key
  location                    = each.value
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
}

# Named by content, so a changed bundle is a new object and the functions redeploy.
resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.source.name
  name   = "source/${filemd5(var.source_zip)}.zip"
  source = var.source_zip
}
