"""`vertex-dispatch deploy-plan`: what a deployment of a config creates, and the Terraform
variables it writes (every one the example root declares)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import hcl2
import pytest

import tooling
from shared.adapters.config_source import load_config
from shared.config.model import Config, ScheduleRoute
from tooling import deployplan

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = REPO / "examples" / "config.yaml"
EXAMPLE_VARIABLES = REPO / "deploy" / "terraform" / "example" / "variables.tf"


@pytest.fixture(scope="module")
def config() -> Config:
    return load_config(str(EXAMPLE_CONFIG))


def test_one_storage_function_per_dataset_bucket(config: Config) -> None:
    plan = deployplan.deploy_plan(config)
    storage = [f for f in plan.functions if f.entry_point == "on_object_finalized"]
    assert plan.dataset_buckets == ("acme-datasets", "acme-eval")
    assert [f.name for f in storage] == [
        deployplan.object_function_name("vd", bucket) for bucket in plan.dataset_buckets
    ]
    assert {f.service_account for f in storage} == {
        "vd-object-finalized@acme-ml.iam.gserviceaccount.com"
    }


@pytest.mark.parametrize(
    ("entry_point", "trigger"),
    [
        ("on_request", "push subscription on topic training-requests"),
        ("on_job_event", "push subscription on topic training-job-events"),
        ("reconcile", "push subscription on topic vd-reconcile-ticks"),
    ],
)
def test_pubsub_functions_and_their_topics(config: Config, entry_point: str, trigger: str) -> None:
    plan = deployplan.deploy_plan(config)
    (function,) = [f for f in plan.functions if f.entry_point == entry_point]
    assert function.trigger == trigger


def test_scheduler_jobs_per_schedule_with_cron(config: Config) -> None:
    plan = deployplan.deploy_plan(config)
    jobs = {job.name: job for job in plan.scheduler_jobs}
    assert set(jobs) == {
        "vd-reconcile",
        "vd-schedule-weekly-dws-check",
        "vd-schedule-weekly-retrain-pipeline",
    }
    weekly = jobs["vd-schedule-weekly-dws-check"]
    assert (weekly.cron, weekly.topic) == ("0 6 * * 1", "training-requests")
    assert json.loads(weekly.body) == {"schedule": "weekly-dws-check"}
    assert any("nightly-retrain has no cron" in note for note in plan.notes)


def test_every_function_account_is_distinct_and_grants_no_primitive_role(config: Config) -> None:
    plan = deployplan.deploy_plan(config)
    emails = [account.email for account in plan.service_accounts]
    assert len(emails) == len(set(emails))
    roles = {grant.role for account in plan.service_accounts for grant in account.grants}
    assert not roles & {"roles/owner", "roles/editor", "roles/viewer"}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"requests_topic": None}, "requests_topic: required to deploy"),
        (
            {"alerts_topic": "projects/other-project/topics/alerts"},
            "alerts_topic: projects/other-project/topics/alerts is in project other-project",
        ),
    ],
)
def test_undeployable_configs_say_what_to_change(
    config: Config, change: dict, problem: str
) -> None:
    plan = deployplan.deploy_plan(replace(config, **change))
    assert not plan.deployable
    assert any(p.startswith(problem) for p in plan.problems), plan.problems


def test_a_cronless_schedule_makes_no_job_but_a_note(config: Config) -> None:
    routes = (ScheduleRoute("only", "adhoc", "resnet-a100"),)
    plan = deployplan.deploy_plan(replace(config, routes=routes))
    assert [job.name for job in plan.scheduler_jobs] == ["vd-reconcile"]
    assert any("schedule adhoc has no cron" in note for note in plan.notes)


def test_tfvars_fill_every_variable_of_the_example_root(config: Config, tmp_path: Path) -> None:
    declared = {
        name
        for block in hcl2.loads(EXAMPLE_VARIABLES.read_text(encoding="utf-8"))["variable"]
        for name in block
    }
    variables = deployplan.tfvars(
        deployplan.deploy_plan(config), source_zip=tmp_path / "source.zip"
    )
    declared = {name.strip('"') for name in declared}
    assert declared - set(variables) == {"alert_notification_channels"}
    assert set(variables) <= declared
    assert variables["schedules"] == [
        {"name": "weekly-dws-check", "cron": "0 6 * * 1"},
        {"name": "weekly-retrain-pipeline", "cron": "0 3 * * 0"},
    ]


def test_no_function_reads_a_config_bucket(config: Config) -> None:
    # The config ships in the bundle (deploy/bundle.py --config): no bucket holds it.
    plan = deployplan.deploy_plan(config)
    resources = {grant.resource for a in plan.service_accounts for grant in a.grants}
    assert not any(resource.endswith("-config") for resource in resources)
    assert "config bucket" not in deployplan.plan_text(plan)


@pytest.mark.parametrize(
    ("arguments", "status", "expected"),
    [
        ([], 0, "vd-request@acme-ml.iam.gserviceaccount.com (runs on_request)"),
        (["--prefix", "ml"], 0, "ml-reconcile: '* * * * *' -> topic ml-reconcile-ticks"),
        (["--json"], 0, '"deployable": true'),
    ],
)
def test_cli_prints_the_plan(
    capsys: pytest.CaptureFixture[str], arguments: list[str], status: int, expected: str
) -> None:
    assert tooling.main(["deploy-plan", "--config", str(EXAMPLE_CONFIG), *arguments]) == status
    assert expected in capsys.readouterr().out


def test_cli_writes_tfvars(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "vertex-dispatch.auto.tfvars.json"
    assert tooling.main(["deploy-plan", "--config", str(EXAMPLE_CONFIG), "--tfvars", str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["dataset_buckets"] == {
        "acme-datasets": "us-central1",
        "acme-eval": "us-central1",
    }
    assert written["training_service_accounts"] == ["trainer@acme-ml.iam.gserviceaccount.com"]
