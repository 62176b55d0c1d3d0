# Topics, and the push subscriptions that feed the Pub/Sub functions.
#
# The functions fed by Pub/Sub get push subscriptions this module owns rather than Eventarc
# Pub/Sub triggers: an Eventarc trigger's subscription cannot carry a dead-letter policy, and a
# message that fails forever must end up somewhere a human can read it. The push URL ends in
# /projects/P/topics/T because functions-framework takes the CloudEvent's source from that path
# when it converts a push body into a messagePublished CloudEvent.

resource "google_pubsub_topic" "topics" {
  for_each = local.topic_ids

  project = var.project_id
  name    = each.value

  depends_on = [google_project_service.enabled]
}

resource "google_pubsub_subscription" "push" {
  for_each = local.pushed_functions

  project = var.project_id
  name    = "${local.function_names[each.key]}-push"
  topic   = google_pubsub_topic.topics[each.value.listens_to].id

  ack_deadline_seconds       = min(600, var.function_timeout_seconds)
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.pushed[each.key].service_config[0].uri}/projects/${var.project_id}/topics/${google_pubsub_topic.topics[each.value.listens_to].name}"

    oidc_token {
      service_account_email = google_service_account.pusher.email
      audience              = google_cloudfunctions2_function.pushed[each.key].service_config[0].uri
    }
  }

  # A raised (transient) error is retried with backoff; after max_delivery_attempts the message
  # is parked on the dead-letter topic instead of retrying forever.
  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topics["dead-letter"].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = "" # never expires, however quiet the topic
  }
}

# The dead-letter topic keeps what it receives until someone reads it.
resource "google_pubsub_subscription" "dead_letter" {
  project = var.project_id
  name    = "${var.name_prefix}-dead-letter-hold"
  topic   = google_pubsub_topic.topics["dead-letter"].id

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  expiration_policy {
    ttl = ""
  }
}
