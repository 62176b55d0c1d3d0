# Dashboards as code: log-based metrics over the log lines shared/model/loglines.py declares, and
# one Cloud Monitoring dashboard over them (dashboard.json.tftpl). Every metric reads only our
# functions' entries (their Cloud Run services, named with the module's prefix, as the alert
# policy in monitoring.tf), and each selects its line by exact message or by the field the line
# is known by. tests/deploy/test_terraform_dashboards.py checks every field or label read here
# against the registry, and every metric the dashboard charts against the ones declared here.

locals {
  function_entries = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=~\"^${var.name_prefix}-\""

  # The metrics the dashboard template charts, by the name it uses for each.
  dashboard_metrics = {
    runs_started    = google_logging_metric.runs_started.name
    runs_ended      = google_logging_metric.runs_ended.name
    time_to_running = google_logging_metric.time_to_running.name
    alerts          = google_logging_metric.alerts.name
    hints_dropped   = google_logging_metric.hints_dropped.name
    function_errors = google_logging_metric.function_errors.name
  }
}

resource "google_logging_metric" "runs_started" {
  project     = var.project_id
  name        = "${var.name_prefix}-runs-started"
  description = "Runs started: the first attempt's job created (the \"job created\" line of attempt 1)."
  filter      = "${local.function_entries} AND jsonPayload.message=\"job created\" AND jsonPayload.attempt=1"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "vertex-dispatch runs started"

    labels {
      key        = "template"
      value_type = "STRING"
    }
    labels {
      key        = "placement_kind"
      value_type = "STRING"
    }
  }

  label_extractors = {
    template       = "EXTRACT(labels.template)"
    placement_kind = "EXTRACT(jsonPayload.placement_kind)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "runs_ended" {
  project     = var.project_id
  name        = "${var.name_prefix}-runs-ended"
  description = "Job ends decided (the \"job decided\" line), by outcome class and what the run became: WAITING_RETRY is an attempt retried, any other status the run's end."
  filter      = "${local.function_entries} AND jsonPayload.message=\"job decided\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "vertex-dispatch job ends decided"

    labels {
      key        = "outcome"
      value_type = "STRING"
    }
    labels {
      key        = "run_status"
      value_type = "STRING"
    }
    labels {
      key        = "template"
      value_type = "STRING"
    }
  }

  label_extractors = {
    outcome    = "EXTRACT(jsonPayload.outcome)"
    run_status = "EXTRACT(jsonPayload.run_status)"
    template   = "EXTRACT(labels.template)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "time_to_running" {
  project     = var.project_id
  name        = "${var.name_prefix}-time-to-running"
  description = "Seconds from a job's creation to its start (the \"job running\" line), by placement kind and region."
  filter      = "${local.function_entries} AND jsonPayload.message=\"job running\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "s"
    display_name = "vertex-dispatch time to RUNNING"

    labels {
      key        = "placement_kind"
      value_type = "STRING"
    }
    labels {
      key        = "region"
      value_type = "STRING"
    }
  }

  value_extractor = "EXTRACT(jsonPayload.time_to_running_s)"
  label_extractors = {
    placement_kind = "EXTRACT(jsonPayload.placement_kind)"
    region         = "EXTRACT(jsonPayload.region)"
  }

  # 1 s to about 12 days (2^20 s): a FLEX_START job may wait up to 7 days for its GPUs.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 20
      growth_factor      = 2
      scale              = 1
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "alerts" {
  project     = var.project_id
  name        = "${var.name_prefix}-alerts"
  description = "Alerts sent to humans (the alert line, known by its body's schema), by reason."
  filter      = "${local.function_entries} AND jsonPayload.alert.schema=\"vertex-dispatch.alert.v1\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "vertex-dispatch alerts"

    labels {
      key        = "reason"
      value_type = "STRING"
    }
    labels {
      key        = "template"
      value_type = "STRING"
    }
  }

  label_extractors = {
    reason   = "EXTRACT(labels.reason)"
    template = "EXTRACT(labels.template)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "hints_dropped" {
  project     = var.project_id
  name        = "${var.name_prefix}-hints-dropped"
  description = "Job-state hints dropped without a Vertex AI read (lines with jsonPayload.hint_dropped), by reason."
  filter      = "${local.function_entries} AND jsonPayload.hint_dropped:*"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "vertex-dispatch hints dropped"

    labels {
      key        = "reason"
      value_type = "STRING"
    }
  }

  label_extractors = {
    reason = "EXTRACT(jsonPayload.hint_dropped)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "function_errors" {
  project     = var.project_id
  name        = "${var.name_prefix}-function-errors"
  description = "ERROR and CRITICAL lines of the functions (the lines the alert policy fires on); the chart splits them by service."
  filter      = "${local.function_entries} AND severity>=ERROR"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "vertex-dispatch error lines"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_monitoring_dashboard" "runs" {
  count = var.enable_dashboard ? 1 : 0

  project = var.project_id
  dashboard_json = templatefile("${path.module}/dashboard.json.tftpl", {
    prefix = var.name_prefix
    metric = local.dashboard_metrics
  })

  depends_on = [google_project_service.enabled]
}
