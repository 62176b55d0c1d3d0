# Inputs of the vertex-dispatch module. The config-derived ones (topics, dataset buckets,
# schedules, training service accounts) are written by
# `vertex-dispatch deploy-plan --config FILE --tfvars OUT`, so the deployment follows the config.

variable "project_id" {
  description = "The project the functions, topics and jobs live in (the config's `project`)."
  type        = string
}

variable "region" {
  description = "The region of the functions, the scheduler jobs and the source bucket (the config's `region`)."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of every resource name; short, because service account ids are at most 30 characters."
  type        = string
  default     = "vd"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,9}$", var.name_prefix))
    error_message = "name_prefix: 1-10 lowercase letters, digits or '-', starting with a letter (service account ids are at most 30 characters)."
  }
}

variable "source_zip" {
  description = "The function source bundle, with the config in it: `python deploy/bundle.py --config CONFIG --zip FILE` builds it."
  type        = string
}

variable "requests_topic" {
  description = "Topic id of job requests, scheduler ticks and retries (the config's requests_topic)."
  type        = string
}

variable "alerts_topic" {
  description = "Topic id of alerts (the config's alerts_topic)."
  type        = string
}

variable "job_events_topic" {
  description = "Topic id of job-state hints (the config's job_events_topic)."
  type        = string
}

variable "completions_topic" {
  description = "Topic id of completion messages (the config's completions_topic); null when the config has none."
  type        = string
  default     = null
}

variable "dataset_buckets" {
  description = "Buckets the config's gcs routes watch -> their location (a region, or a multi-region such as `us`)."
  type        = map(string)
  default     = {}
}

variable "create_dataset_buckets" {
  description = "Create the dataset buckets too (false: they exist already and are only watched and read)."
  type        = bool
  default     = false
}

variable "schedules" {
  description = "The config's schedules with a cron: one Cloud Scheduler job each, publishing a tick on the requests topic."
  type = list(object({
    name      = string
    cron      = string
    time_zone = optional(string, "Etc/UTC")
  }))
  default = []
}

variable "training_service_accounts" {
  description = "Emails of the service accounts jobs may run as (guards.service_accounts and each template's service_account)."
  type        = list(string)
  default     = []
}

variable "reconcile_cron" {
  description = "How often the reconciler runs (unix cron)."
  type        = string
  default     = "* * * * *"
}

variable "create_firestore_database" {
  description = "Create the (default) Firestore database in native mode (false when the project has one)."
  type        = bool
  default     = true
}

variable "firestore_location" {
  description = "Location of the Firestore database; null: the region."
  type        = string
  default     = null
}

variable "max_delivery_attempts" {
  description = "Deliveries of one message before it goes to the dead-letter topic (5-100)."
  type        = number
  default     = 10
}

variable "enable_job_log_sink" {
  description = "Route Vertex AI job logs (resource.type=\"ml_job\") to the job-events topic as low-latency hints."
  type        = bool
  default     = true
}

variable "enable_dashboard" {
  description = "Create the Cloud Monitoring dashboard of runs, waits and alerts (dashboards.tf); its log-based metrics are created either way."
  type        = bool
  default     = true
}

variable "alert_notification_channels" {
  description = "Monitoring notification channel ids the log-based alert policy notifies."
  type        = list(string)
  default     = []
}

variable "function_memory" {
  description = "Memory of each function instance (the Vertex AI client alone takes about 110 MiB)."
  type        = string
  default     = "1Gi"
}

variable "function_timeout_seconds" {
  description = "How long one event may take before the platform retries it."
  type        = number
  default     = 300
}

variable "function_max_instances" {
  description = "Upper bound of instances per function."
  type        = number
  default     = 10
}
