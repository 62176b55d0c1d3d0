# Identities and least privilege. Each function runs as its own service account with exactly
# the grants local.functions lists: project roles (predefined, never primitive), publisher on
# the specific topics it writes, reader on the specific buckets it reads, and
# iam.serviceAccountUser only on the training service accounts the config allows. Nothing grants
# allUsers or allAuthenticatedUsers: the functions accept internal traffic from identities that
# hold run.invoker on them, and only the two delivery identities below hold it.

resource "google_service_account" "function" {
  for_each = local.functions

  project      = var.project_id
  account_id   = local.function_names[each.key]
  display_name = "vertex-dispatch ${each.value.entry_point}"
}

resource "google_project_iam_member" "function" {
  for_each = local.project_role_grants

  project = var.project_id
  role    = each.value.role
  member  = google_service_account.function[each.value.function].member
}

resource "google_pubsub_topic_iam_member" "function_publishes" {
  for_each = local.publisher_grants

  project = var.project_id
  topic   = google_pubsub_topic.topics[each.value.topic].name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.function[each.value.function].member
}

resource "google_storage_bucket_iam_member" "function_reads_dataset" {
  for_each = local.dataset_reader_grants

  bucket = each.value.bucket
  role   = "roles/storage.objectViewer"
  member = google_service_account.function[each.value.function].member

  depends_on = [google_storage_bucket.dataset]
}

# Creating a job that runs as a training service account needs actAs on that account only.
resource "google_service_account_iam_member" "function_acts_as_trainer" {
  for_each = local.training_account_grants

  service_account_id = "projects/${var.project_id}/serviceAccounts/${each.value.account}"
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function[each.value.function].member
}

# --- delivery identities --------------------------------------------------------------------

# Eventarc's storage triggers deliver as this account.
resource "google_service_account" "eventarc" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-eventarc"
  display_name = "vertex-dispatch Eventarc trigger identity"
}

resource "google_project_iam_member" "eventarc_receiver" {
  project = var.project_id
  role    = "roles/eventarc.eventReceiver"
  member  = google_service_account.eventarc.member
}

resource "google_cloud_run_service_iam_member" "eventarc_invokes" {
  for_each = google_cloudfunctions2_function.object_finalized

  project  = var.project_id
  location = var.region
  service  = each.value.service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.eventarc.member
}

# Cloud Storage publishes object events to Eventarc's transport topic as its service agent.
data "google_storage_project_service_account" "storage_agent" {
  project = var.project_id
}

resource "google_project_iam_member" "storage_agent_publishes" {
  project = var.project_id
  role    = "roles/pubsub.publisher"
  member  = data.google_storage_project_service_account.storage_agent.member
}

# The push subscriptions sign their requests as this account.
resource "google_service_account" "pusher" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-pusher"
  display_name = "vertex-dispatch Pub/Sub push identity"
}

resource "google_cloud_run_service_iam_member" "pusher_invokes" {
  for_each = google_cloudfunctions2_function.pushed

  project  = var.project_id
  location = var.region
  service  = each.value.service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.pusher.member
}

# Pub/Sub's service agent mints the push OIDC tokens, and moves undeliverable messages to the
# dead-letter topic (publisher there, subscriber on the subscriptions it takes them from).
resource "google_service_account_iam_member" "pubsub_agent_signs_as_pusher" {
  service_account_id = google_service_account.pusher.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

resource "google_pubsub_topic_iam_member" "pubsub_agent_dead_letters" {
  project = var.project_id
  topic   = google_pubsub_topic.topics["dead-letter"].name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_agent_forwards" {
  for_each = google_pubsub_subscription.push

  project      = var.project_id
  subscription = each.value.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# The job log sink writes as its own identity, on the job-events topic only.
resource "google_pubsub_topic_iam_member" "job_log_sink_publishes" {
  count = var.enable_job_log_sink ? 1 : 0

  project = var.project_id
  topic   = google_pubsub_topic.topics["job-events"].name
  role    = "roles/pubsub.publisher"
  member  = google_logging_project_sink.job_logs[0].writer_identity
}

# --- build identity -------------------------------------------------------------------------

# Cloud Build builds the functions' images as this account instead of the default compute one.
resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "vertex-dispatch function build"
}

resource "google_project_iam_member" "build" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/artifactregistry.writer",
  ])

  project = var.project_id
  role    = each.value
  member  = google_service_account.build.member
}

resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}
