# Observability: the optional log sink that turns Vertex AI job logs into job-state hints, and a
# log-based alert on the functions' ERROR and CRITICAL lines (every alert is also one such line).
#
# The sink takes only the lines Vertex AI itself writes about a job (task_name "service": a few
# per job), never the trainer's output (task_name "workerpool0-0", ...): each routed line is one
# on_job_event invocation. The filter is shared.decode.hints.SINK_FILTER, character for
# character (tests/deploy/test_terraform_job_log_sink.py).

resource "google_logging_project_sink" "job_logs" {
  count = var.enable_job_log_sink ? 1 : 0

  project                = var.project_id
  name                   = "${var.name_prefix}-job-logs"
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.topics["job-events"].id}"
  filter                 = "resource.type=\"ml_job\" AND resource.labels.task_name=\"service\""
  unique_writer_identity = true
}

resource "google_monitoring_alert_policy" "function_errors" {
  project      = var.project_id
  display_name = "vertex-dispatch (${var.name_prefix}): run rejected, failed or alerted"
  combiner     = "OR"

  conditions {
    display_name = "ERROR or CRITICAL log line from a vertex-dispatch function"

    condition_matched_log {
      filter = join(" AND ", [
        "resource.type=\"cloud_run_revision\"",
        "resource.labels.service_name=~\"^${var.name_prefix}-\"",
        "severity>=ERROR",
      ])
      label_extractors = {
        run_id = "EXTRACT(labels.run_id)"
        reason = "EXTRACT(labels.reason)"
      }
    }
  }

  alert_strategy {
    notification_rate_limit {
      period = "300s"
    }
    auto_close = "1800s"
  }

  notification_channels = var.alert_notification_channels

  documentation {
    mime_type = "text/markdown"
    content   = "A vertex-dispatch function logged an error: the entry's message says which run, which rule and what to change. `vertex-dispatch status` lists the runs."
  }

  depends_on = [google_project_service.enabled]
}
