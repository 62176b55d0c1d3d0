# Cloud Scheduler: the reconcile tick every minute, and one job per schedule of the config.
# Scheduler cannot template a body, so a schedule tick names its schedule in a fixed body and
# says what it is in the vertex_dispatch_kind attribute (docs/messages.md).

resource "google_cloud_scheduler_job" "reconcile" {
  project   = var.project_id
  region    = var.region
  name      = "${var.name_prefix}-reconcile"
  schedule  = var.reconcile_cron
  time_zone = "Etc/UTC"

  pubsub_target {
    topic_name = google_pubsub_topic.topics["reconcile-ticks"].id
    data       = base64encode(jsonencode({ tick = "reconcile" }))
  }

  depends_on = [google_project_service.enabled]
}

resource "google_cloud_scheduler_job" "schedule" {
  for_each = { for schedule in var.schedules : schedule.name => schedule }

  project   = var.project_id
  region    = var.region
  name      = "${var.name_prefix}-schedule-${each.key}"
  schedule  = each.value.cron
  time_zone = each.value.time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.topics["requests"].id
    data       = base64encode(jsonencode({ schedule = each.key }))
    attributes = { vertex_dispatch_kind = "schedule" }
  }

  depends_on = [google_project_service.enabled]
}
