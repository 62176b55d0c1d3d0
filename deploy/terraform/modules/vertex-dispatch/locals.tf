# The one table of what each function is, runs as, may do and listens to. Every IAM grant in
# iam.tf is derived from it; cli/deployplan.py holds the same table and
# tests/deploy/ checks that the two agree.

locals {
  functions = {
    "object-finalized" = {
      entry_point = "on_object_finalized"
      # Creates jobs and reads persistent resources; records runs in the ledger; reads a named
      # reservation (compute.reservations.get) for a reservation placement's live rules.
      project_roles             = ["roles/aiplatform.user", "roles/datastore.user", "roles/compute.viewer"]
      publishes                 = ["alerts"]
      reads_datasets            = true
      acts_as_training_accounts = true
      listens_to                = null # one Eventarc storage trigger per dataset bucket
    }
    "request" = {
      entry_point               = "on_request"
      project_roles             = ["roles/aiplatform.user", "roles/datastore.user", "roles/compute.viewer"]
      publishes                 = ["alerts"]
      reads_datasets            = false
      acts_as_training_accounts = true
      listens_to                = "requests"
    }
    "job-event" = {
      entry_point = "on_job_event"
      # Only reads jobs: retries go back through the requests topic, never a create here.
      project_roles             = ["roles/aiplatform.viewer", "roles/datastore.user"]
      publishes                 = ["requests", "alerts", "completions"]
      reads_datasets            = false
      acts_as_training_accounts = false
      listens_to                = "job-events"
    }
    "reconcile" = {
      entry_point = "reconcile"
      # Lists jobs and cancels the ones the watchdog finds overdue (aiplatform.customJobs.cancel).
      project_roles             = ["roles/aiplatform.user", "roles/datastore.user"]
      publishes                 = ["requests", "alerts", "completions"]
      reads_datasets            = false
      acts_as_training_accounts = false
      listens_to                = "reconcile-ticks"
    }
  }

  topic_ids = merge(
    {
      "requests"        = var.requests_topic
      "alerts"          = var.alerts_topic
      "job-events"      = var.job_events_topic
      "reconcile-ticks" = "${var.name_prefix}-reconcile-ticks"
      "dead-letter"     = "${var.name_prefix}-dead-letter"
    },
    var.completions_topic == null ? {} : { "completions" = var.completions_topic },
  )

  # Functions fed by Pub/Sub, through push subscriptions this module owns (dead-letter policy).
  pushed_functions = { for name, fn in local.functions : name => fn if fn.listens_to != null }

  # (function, topic) pairs: a publisher grant on that topic only. A function never publishes to
  # a topic the config does not have (completions is optional).
  publisher_grants = {
    for pair in flatten([
      for name, fn in local.functions : [
        for topic in fn.publishes : { function = name, topic = topic }
        if contains(keys(local.topic_ids), topic)
      ]
    ]) : "${pair.function}/${pair.topic}" => pair
  }

  project_role_grants = {
    for pair in flatten([
      for name, fn in local.functions : [
        for role in fn.project_roles : { function = name, role = role }
      ]
    ]) : "${pair.function}/${pair.role}" => pair
  }

  training_account_grants = {
    for pair in flatten([
      for name, fn in local.functions : [
        for account in var.training_service_accounts : { function = name, account = account }
      ] if fn.acts_as_training_accounts
    ]) : "${pair.function}/${pair.account}" => pair
  }

  dataset_reader_grants = {
    for pair in flatten([
      for name, fn in local.functions : [
        for bucket in keys(var.dataset_buckets) : { function = name, bucket = bucket }
      ] if fn.reads_datasets
    ]) : "${pair.function}/${pair.bucket}" => pair
  }

  # Where deploy/bundle.py puts the config in the bundle (its BUNDLED_CONFIG), relative to the
  # source root; tests/deploy checks that the two agree.
  config_path    = "config/config.json"
  pubsub_agent   = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  function_names = { for name, _ in local.functions : name => "${var.name_prefix}-${name}" }
}

data "google_project" "this" {
  project_id = var.project_id
}
