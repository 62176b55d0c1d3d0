"""The dashboards as code (deploy/terraform/modules/vertex-dispatch/dashboards.tf), read as data.

Every log-based metric reads only our functions' entries and only fields and labels the code
writes (as the registry ``shared.model.loglines`` declares them, with the types a metric needs);
every line of the registry is read by a metric; every metric the dashboard charts is declared,
and every label it groups or filters by is one of that metric's. The registry itself is held to
the code by tests/unit/test_loglines.py (the log calls) and
tests/integration/jobstate/test_jobstate_log_lines.py (the lines as logged).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from log_metrics import (
    DASHBOARD_TEMPLATE,
    MODULE,
    PREFIX,
    LogMetric,
    function_entries_filter,
    module_locals,
    module_metrics,
    resources,
)

from shared.model import loglines

# The JSON type a label or value of each metric type is extracted from.
TYPE_OF_LABEL = {"STRING": str, "INT64": int}
_PLACEHOLDER = re.compile(r"\$\{(?P<name>[^}]*)\}")
_METRIC_TYPE = re.compile(r'metric\.type="logging\.googleapis\.com/user/(?P<name>[^"]+)"')
_METRIC_LABEL = re.compile(r"metric\.label\.(?P<key>\w+)")


def _line_read_by(metric: LogMetric) -> loglines.LogLine | None:
    """The registry line a metric's filter selects: by exact message, else by key field."""
    for clause in metric.clauses:
        if clause.path == "jsonPayload.message" and clause.op == "=":
            by_message = [line for line in loglines.LINES if line.message == clause.value]
            assert by_message, f"metric {metric.name} counts {clause.value!r}, not in the registry"
            return by_message[0]
    for clause in metric.clauses:
        for line in loglines.LINES:
            if line.key is not None and clause.path == f"jsonPayload.{line.key}":
                return line
    return None


def _json_paths(metric: LogMetric) -> set[str]:
    return {
        p.removeprefix("jsonPayload.") for p in metric.paths_read() if p.startswith("jsonPayload.")
    }


def _label_paths(metric: LogMetric) -> set[str]:
    return {p.removeprefix("labels.") for p in metric.paths_read() if p.startswith("labels.")}


def _metric_ids() -> list[str]:
    return sorted(module_metrics())


def test_the_module_declares_the_metrics_of_the_issue() -> None:
    assert set(module_metrics()) == {
        "runs_started",
        "runs_ended",
        "time_to_running",
        "alerts",
        "hints_dropped",
        "function_errors",
    }
    assert {m.name for m in module_metrics().values()} == {
        f"{PREFIX}-runs-started",
        f"{PREFIX}-runs-ended",
        f"{PREFIX}-time-to-running",
        f"{PREFIX}-alerts",
        f"{PREFIX}-hints-dropped",
        f"{PREFIX}-function-errors",
    }


def test_our_entries_are_those_of_the_prefixed_cloud_run_services() -> None:
    assert function_entries_filter() == (
        f'resource.type="cloud_run_revision" AND resource.labels.service_name=~"^{PREFIX}-"'
    )


@pytest.mark.parametrize("resource", _metric_ids())
def test_each_metric_reads_only_our_functions_entries(resource: str) -> None:
    metric = module_metrics()[resource]
    assert metric.filter.startswith(function_entries_filter() + " AND "), metric.filter
    assert metric.raw["filter"].startswith("${local.function_entries} AND ")


@pytest.mark.parametrize("resource", _metric_ids())
def test_each_field_and_label_a_metric_reads_is_one_the_code_writes(resource: str) -> None:
    metric = module_metrics()[resource]
    line = _line_read_by(metric)
    fields, labels = _json_paths(metric), _label_paths(metric)
    if line is None:
        # Only a metric of entries as such (severity, resource) may select no registry line.
        assert not fields and not labels, f"metric {metric.name} reads {fields | labels} of no line"
        return
    assert fields - {"message"} <= set(line.fields), (metric.name, fields, set(line.fields))
    assert labels <= line.labels, (metric.name, labels, line.labels)
    for clause in metric.clauses:
        path = clause.path.removeprefix("jsonPayload.")
        if clause.path.startswith("jsonPayload.") and path in loglines.KEY_VALUES:
            assert clause.value == loglines.KEY_VALUES[path], clause
        if clause.path.startswith("jsonPayload.") and isinstance(clause.value, float):
            assert line.fields[path] in (int, float), f"{metric.name} compares {path} to a number"


@pytest.mark.parametrize("resource", _metric_ids())
def test_each_label_is_extracted_from_a_field_of_its_type(resource: str) -> None:
    metric = module_metrics()[resource]
    assert set(metric.labels) == set(metric.label_extractors), metric.name
    line = _line_read_by(metric)
    for key, path in metric.label_extractors.items():
        assert line is not None
        expected = TYPE_OF_LABEL[metric.labels[key]]
        if path.startswith("labels."):
            assert expected is str, f"{metric.name}: entry labels are strings ({key})"
        else:
            assert line.fields[path.removeprefix("jsonPayload.")] is expected, (metric.name, key)


def test_time_to_running_is_a_distribution_of_a_number_in_seconds() -> None:
    metric = module_metrics()["time_to_running"]
    assert metric.value_type == "DISTRIBUTION"
    assert metric.value_extractor == "jsonPayload.time_to_running_s"
    assert loglines.JOB_RUNNING.fields["time_to_running_s"] is float
    assert metric.raw["metric_descriptor"][0]["unit"] == "s"
    buckets = metric.raw["bucket_options"][0]["exponential_buckets"][0]
    # Up to at least 7 days, the longest a FLEX_START job may wait.
    top = buckets["scale"] * buckets["growth_factor"] ** buckets["num_finite_buckets"]
    assert top >= 7 * 24 * 3600


def test_the_counters_count_entries() -> None:
    for resource, metric in module_metrics().items():
        if resource != "time_to_running":
            assert metric.value_type == "INT64" and metric.value_extractor is None, resource


def test_every_line_of_the_registry_is_read_by_a_metric() -> None:
    read = {line.name for metric in module_metrics().values() if (line := _line_read_by(metric))}
    assert read == {line.name for line in loglines.LINES}


def test_runs_started_counts_first_attempts_only() -> None:
    clauses = module_metrics()["runs_started"].clauses
    assert any(c.path == "jsonPayload.attempt" and c.value == 1.0 for c in clauses)


# The dashboard.


def _rendered_template() -> dict[str, Any]:
    """dashboard.json.tftpl as templatefile renders it with the module's metric names."""
    names = {key: _declared_name(ref) for key, ref in module_locals()["dashboard_metrics"].items()}

    def substitute(match: re.Match[str]) -> str:
        name = match["name"]
        if name == "prefix":
            return PREFIX
        assert name.startswith("metric."), f"the template interpolates {name!r}"
        return names[name.removeprefix("metric.")]

    text = DASHBOARD_TEMPLATE.read_text(encoding="utf-8")
    assert "%{" not in text, "no template directives: the JSON must read as it is"
    rendered: dict[str, Any] = json.loads(_PLACEHOLDER.sub(substitute, text))
    return rendered


def _declared_name(reference: str) -> str:
    match = re.fullmatch(r"\$\{google_logging_metric\.(\w+)\.name\}", reference)
    assert match, f"dashboard_metrics must name a declared metric's name, not {reference!r}"
    return module_metrics()[match[1]].name


def _chart_filters(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for tile in dashboard["mosaicLayout"]["tiles"]:
        for data_set in tile["widget"]["xyChart"]["dataSets"]:
            query = data_set["timeSeriesQuery"]["timeSeriesFilter"]
            found.append((query["filter"], query.get("aggregation", {})))
    return found


def test_every_metric_the_dashboard_charts_is_declared_and_every_one_is_charted() -> None:
    by_name = {metric.name: metric for metric in module_metrics().values()}
    charted = set()
    for text, _ in _chart_filters(_rendered_template()):
        types = _METRIC_TYPE.findall(text)
        assert len(types) == 1, text
        assert types[0] in by_name, f"the dashboard charts {types[0]}, which is not declared"
        assert 'resource.type="cloud_run_revision"' in text
        charted.add(types[0])
    assert charted == set(by_name)


def test_every_label_the_dashboard_groups_or_filters_by_is_one_of_its_metric() -> None:
    by_name = {metric.name: metric for metric in module_metrics().values()}
    for text, aggregation in _chart_filters(_rendered_template()):
        metric = by_name[_METRIC_TYPE.findall(text)[0]]
        keys = set(_METRIC_LABEL.findall(text))
        for field in aggregation.get("groupByFields", []):
            if field.startswith("metric.label."):
                keys.add(field.removeprefix("metric.label."))
            else:
                assert field == "resource.label.service_name", field
        assert keys <= set(metric.labels), (metric.name, keys)


def test_distribution_charts_align_by_delta_and_counters_by_sum() -> None:
    by_name = {metric.name: metric for metric in module_metrics().values()}
    for text, aggregation in _chart_filters(_rendered_template()):
        metric = by_name[_METRIC_TYPE.findall(text)[0]]
        aligner = aggregation["perSeriesAligner"]
        assert aligner == ("ALIGN_DELTA" if metric.value_type == "DISTRIBUTION" else "ALIGN_SUM")


def test_the_dashboard_json_is_a_monitoring_dashboard_message() -> None:
    """The JSON reads as the Monitoring API's Dashboard, every key and enum value known to it
    (``terraform validate`` cannot run here: the Google provider cannot be downloaded)."""
    from google.cloud.monitoring_dashboard_v1.types import Dashboard

    dashboard = Dashboard.from_json(json.dumps(_rendered_template()), ignore_unknown_fields=False)
    charts = [tile.widget.xy_chart for tile in dashboard.mosaic_layout.tiles]
    assert len(charts) == len(_chart_filters(_rendered_template())) == 10
    assert all(chart.data_sets for chart in charts)
    tiles = dashboard.mosaic_layout.tiles
    assert all(t.x_pos + t.width <= dashboard.mosaic_layout.columns for t in tiles)


def test_the_dashboard_is_gated_and_its_address_is_an_output() -> None:
    [dashboard] = resources("google_monitoring_dashboard").values()
    assert dashboard["count"] == "${var.enable_dashboard ? 1 : 0}"
    variables = (MODULE / "variables.tf").read_text(encoding="utf-8")
    assert re.search(r'variable "enable_dashboard" \{[^}]*default\s*=\s*true', variables)
    outputs = (MODULE / "outputs.tf").read_text(encoding="utf-8")
    for name in ("dashboard_id", "dashboard_url"):
        assert f'output "{name}"' in outputs
    assert "dashboard.json.tftpl" in dashboard["dashboard_json"]
    assert "local.dashboard_metrics" in dashboard["dashboard_json"]


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform is not installed")
def test_terraform_renders_the_template_as_the_tests_read_it(tmp_path: Path) -> None:
    """Terraform's own templatefile (no provider needed) gives the JSON the tests above check."""
    names = {key: _declared_name(ref) for key, ref in module_locals()["dashboard_metrics"].items()}
    metric_map = ", ".join(f'{key} = "{name}"' for key, name in names.items())
    (tmp_path / "main.tf").write_text(
        'output "dashboard" {\n'
        f'  value = templatefile("{DASHBOARD_TEMPLATE}", {{ prefix = "{PREFIX}", '
        f"metric = {{ {metric_map} }} }})\n"
        "}\n",
        encoding="utf-8",
    )
    env = {"TF_CLI_CONFIG_FILE": "/dev/null", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    for command in (
        ["terraform", "init", "-input=false", "-no-color"],
        ["terraform", "apply", "-auto-approve", "-input=false", "-no-color"],
    ):
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    shown = subprocess.run(
        ["terraform", "output", "-raw", "dashboard"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(shown.stdout) == _rendered_template()
