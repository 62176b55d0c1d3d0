"""The job-log sink in deploy/terraform routes exactly what on_job_event is written for: its
filter is ``shared.decode.hints.SINK_FILTER`` (the local log-sink stand-in evaluates the same
constant), so Terraform, the stand-in and the code cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import hcl2

from shared.decode.hints import SINK_FILTER

MONITORING_TF = (
    Path(__file__).resolve().parents[2] / "deploy/terraform/modules/vertex-dispatch/monitoring.tf"
)


def test_the_sink_filter_is_the_one_the_code_states() -> None:
    options = hcl2.SerializationOptions(
        strip_string_quotes=True, explicit_blocks=False, with_comments=False
    )
    parsed = hcl2.loads(MONITORING_TF.read_text(encoding="utf-8"), serialization_options=options)
    sinks = {
        name: sink
        for block in parsed["resource"]
        for name, sink in block.get("google_logging_project_sink", {}).items()
    }

    assert list(sinks) == ["job_logs"]
    assert sinks["job_logs"]["filter"] == SINK_FILTER
    assert SINK_FILTER == 'resource.type="ml_job" AND resource.labels.task_name="service"'
