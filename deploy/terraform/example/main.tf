# Example root: deploys vertex-dispatch for one config into one project.
#
#   vertex-dispatch deploy-plan --config my-config.yaml --tfvars config.auto.tfvars.json
#   python deploy/bundle.py --config my-config.yaml --zip build/vertex-dispatch-source.zip
#   terraform -chdir=deploy/terraform/example init
#   terraform -chdir=deploy/terraform/example apply
#
# deploy/deploy.sh runs these four steps (docs/deploy.md).

terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}

module "vertex_dispatch" {
  source = "../modules/vertex-dispatch"

  project_id  = var.project_id
  region      = var.region
  name_prefix = var.name_prefix

  source_zip = var.source_zip

  requests_topic    = var.requests_topic
  alerts_topic      = var.alerts_topic
  job_events_topic  = var.job_events_topic
  completions_topic = var.completions_topic

  dataset_buckets           = var.dataset_buckets
  schedules                 = var.schedules
  training_service_accounts = var.training_service_accounts

  alert_notification_channels = var.alert_notification_channels
}

output "function_names" {
  value = module.vertex_dispatch.function_names
}

output "service_accounts" {
  value = module.vertex_dispatch.service_accounts
}

output "config_path" {
  value = module.vertex_dispatch.config_path
}

output "dashboard_url" {
  value = module.vertex_dispatch.dashboard_url
}
