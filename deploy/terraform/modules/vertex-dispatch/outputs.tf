output "function_names" {
  description = "Deployed function names, by role."
  value = merge(
    { for name, fn in google_cloudfunctions2_function.pushed : name => fn.name },
    { for bucket, fn in google_cloudfunctions2_function.object_finalized : "object-finalized:${bucket}" => fn.name },
  )
}

output "service_accounts" {
  description = "The service account of each function."
  value       = { for name, account in google_service_account.function : name => account.email }
}

output "topics" {
  description = "Topic ids, by role."
  value       = { for role, topic in google_pubsub_topic.topics : role => topic.id }
}

output "config_path" {
  description = "Where the functions read their config (VERTEX_DISPATCH_CONFIG): a path in the source bundle."
  value       = local.config_path
}

output "dashboard_id" {
  description = "The Cloud Monitoring dashboard's resource name (projects/NUMBER/dashboards/ID); null without enable_dashboard."
  value       = var.enable_dashboard ? google_monitoring_dashboard.runs[0].id : null
}

output "dashboard_url" {
  description = "Where to open the dashboard in the Google Cloud console; null without enable_dashboard."
  value = (
    var.enable_dashboard
    ? "https://console.cloud.google.com/monitoring/dashboards/builder/${element(split("/", google_monitoring_dashboard.runs[0].id), 3)}?project=${var.project_id}"
    : null
  )
}

output "log_metrics" {
  description = "The log-based metric types the module declares, by the dashboard's name for each."
  value       = { for key, name in local.dashboard_metrics : key => "logging.googleapis.com/user/${name}" }
}
