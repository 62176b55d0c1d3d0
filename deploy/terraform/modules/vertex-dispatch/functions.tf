# The Cloud Functions (2nd gen): one source bundle, four entry points, each under its own
# service account.
#
# on_object_finalized is deployed once per dataset bucket, because a function has one Eventarc
# trigger and a storage trigger names one bucket; every copy runs as the same service account.
# The others are fed by the push subscriptions of pubsub.tf.

locals {
  function_environment = {
    # The config ships in the source bundle (deploy/bundle.py --config) and is read from there,
    # relative to the source root, which is a function's working directory: a cold instance
    # reads no Cloud Storage object and imports no PyYAML. A changed config is a new bundle, a
    # new source object, so a new revision of every function.
    VERTEX_DISPATCH_CONFIG = local.config_path
    GOOGLE_CLOUD_PROJECT   = var.project_id
    LOG_EXECUTION_ID       = "true"
  }

  build_config = {
    runtime = "python311"
    bucket  = google_storage_bucket.source.name
    object  = google_storage_bucket_object.source.name
    # The buildpack recompiles our source and the image export resets every mtime, which makes
    # timestamp .pyc stale; with SOURCE_DATE_EPOCH set (any value) it writes checked-hash .pyc,
    # which stay valid, so a cold instance does not compile our modules (docs/deploy.md).
    environment = { SOURCE_DATE_EPOCH = "315532801" }
  }
}

resource "google_cloudfunctions2_function" "object_finalized" {
  for_each = var.dataset_buckets

  project  = var.project_id
  location = var.region
  # One function per bucket, named by a hash: bucket names may be longer than a service name.
  name = "${local.function_names["object-finalized"]}-${substr(sha256(each.key), 0, 8)}"

  build_config {
    runtime               = local.build_config.runtime
    environment_variables = local.build_config.environment
    entry_point           = local.functions["object-finalized"].entry_point
    service_account       = google_service_account.build.id

    source {
      storage_source {
        bucket = local.build_config.bucket
        object = local.build_config.object
      }
    }
  }

  service_config {
    available_memory               = var.function_memory
    timeout_seconds                = var.function_timeout_seconds
    max_instance_count             = var.function_max_instances
    ingress_settings               = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.function["object-finalized"].email
    environment_variables          = local.function_environment
  }

  event_trigger {
    trigger_region        = each.value
    event_type            = "google.cloud.storage.object.v1.finalized"
    retry_policy          = "RETRY_POLICY_RETRY"
    service_account_email = google_service_account.eventarc.email

    event_filters {
      attribute = "bucket"
      value     = each.key
    }
  }

  labels = { "vertex-dispatch" = "object-finalized" }

  depends_on = [
    google_project_iam_member.eventarc_receiver,
    google_project_iam_member.storage_agent_publishes,
    google_storage_bucket.dataset,
  ]
}

resource "google_cloudfunctions2_function" "pushed" {
  for_each = local.pushed_functions

  project  = var.project_id
  location = var.region
  name     = local.function_names[each.key]

  build_config {
    runtime               = local.build_config.runtime
    environment_variables = local.build_config.environment
    entry_point           = each.value.entry_point
    service_account       = google_service_account.build.id

    source {
      storage_source {
        bucket = local.build_config.bucket
        object = local.build_config.object
      }
    }
  }

  service_config {
    available_memory               = var.function_memory
    timeout_seconds                = var.function_timeout_seconds
    max_instance_count             = var.function_max_instances
    ingress_settings               = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.function[each.key].email
    environment_variables          = local.function_environment
  }

  labels = { "vertex-dispatch" = each.key }

  depends_on = [google_project_service.enabled]
}
