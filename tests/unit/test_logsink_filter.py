"""The log-sink stand-in's filter: the sink's own filter evaluated, anything else refused."""

from __future__ import annotations

from typing import Any

import pytest

from emulator_stack.logsink import SinkFilter, UnsupportedFilter
from shared.decode.hints import SINK_FILTER


def entry(resource_type: str = "ml_job", task: str | None = "service") -> dict[str, Any]:
    labels = {"job_id": "1000000000000000001", "project_id": "acme-ml"}
    if task is not None:
        labels["task_name"] = task
    return {"resource": {"type": resource_type, "labels": labels}, "textPayload": "Job is running."}


@pytest.mark.parametrize(
    ("log_entry", "routed"),
    [
        (entry(), True),
        (entry(task="workerpool0-0"), False),
        (entry(task="workerpool1-0"), False),
        (entry(task=None), False),
        (entry(resource_type="gce_instance"), False),
        ({"textPayload": "Job is running."}, False),
        ({"resource": "ml_job"}, False),
    ],
)
def test_the_sink_filter_takes_only_service_lines_of_ml_jobs(
    log_entry: dict[str, Any], routed: bool
) -> None:
    assert SinkFilter.parse(SINK_FILTER).matches(log_entry) is routed


def test_a_bare_value_and_a_single_term_are_understood() -> None:
    only_type = SinkFilter.parse("resource.type=ml_job")
    assert only_type.terms == ((("resource", "type"), "ml_job"),)
    assert only_type.matches(entry(task="workerpool0-0"))


@pytest.mark.parametrize(
    "text",
    [
        'resource.type="ml_job" OR resource.labels.task_name="service"',
        'resource.type="ml_job" AND NOT resource.labels.task_name="service"',
        'resource.type="ml_job" resource.labels.task_name="service"',  # implicit AND
        'resource.type="ml_job" AND severity>=ERROR',
        'resource.type:"ml_job"',
        'resource.type!="ml_job"',
        'resource.type=~"ml_.*"',
        '(resource.type="ml_job")',
        'resource.type="ml_job" and resource.labels.task_name="service"',
        "",
    ],
)
def test_anything_else_is_refused_loudly(text: str) -> None:
    with pytest.raises(UnsupportedFilter, match="only equalities joined by AND"):
        SinkFilter.parse(text)
