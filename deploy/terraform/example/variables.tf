# The example root's inputs: `vertex-dispatch deploy-plan --tfvars` writes every one of them
# from the config except alert_notification_channels, which you add yourself.

variable "project_id" {
  type = string
}

variable "region" {
  type = string
}

variable "name_prefix" {
  type    = string
  default = "vd"
}

variable "source_zip" {
  type = string
}

variable "requests_topic" {
  type = string
}

variable "alerts_topic" {
  type = string
}

variable "job_events_topic" {
  type = string
}

variable "completions_topic" {
  type    = string
  default = null
}

variable "dataset_buckets" {
  type    = map(string)
  default = {}
}

variable "schedules" {
  type = list(object({
    name      = string
    cron      = string
    time_zone = optional(string, "Etc/UTC")
  }))
  default = []
}

variable "training_service_accounts" {
  type    = list(string)
  default = []
}

variable "alert_notification_channels" {
  type    = list(string)
  default = []
}
