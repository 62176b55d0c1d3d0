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
