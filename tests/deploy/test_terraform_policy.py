"""The Terraform in deploy/terraform, read as data: formatting, and the least-privilege policy of
issue 6 (own service account per function, no primitive roles, no public members, dead-letter
policies on push subscriptions, retried event triggers, publisher grants on every topic a
function writes), and agreement with tooling/deployplan.py's table."""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest

from tooling import deployplan

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "deploy" / "terraform"
MODULE = TERRAFORM / "modules" / "vertex-dispatch"
TF_FILES = sorted(TERRAFORM.rglob("*.tf"))
PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
OPTIONS = hcl2.SerializationOptions(
    strip_string_quotes=True, explicit_blocks=False, with_comments=False
)


@functools.cache
def _parse(path: Path) -> dict[str, Any]:
    return hcl2.loads(path.read_text(encoding="utf-8"), serialization_options=OPTIONS)


@functools.cache
def _module() -> dict[str, Any]:
    """Every top-level block of the module's files, merged by kind."""
    merged: dict[str, list[Any]] = {}
    for path in sorted(MODULE.glob("*.tf")):
        for kind, blocks in _parse(path).items():
            merged.setdefault(kind, []).extend(blocks)
    return merged


def _resources(kind: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for block in _module().get("resource", []):
        for resource_kind, by_name in block.items():
            if resource_kind == kind:
                found.update(by_name)
    return found


def _locals() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for block in _module().get("locals", []):
        merged.update(block)
    return merged


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _one(value: Any) -> Any:
    """A nested block parses as a list of one mapping."""
    return value[0] if isinstance(value, list) else value


def test_terraform_files_exist_for_module_and_example() -> None:
    names = {path.relative_to(TERRAFORM).as_posix() for path in TF_FILES}
    assert {"modules/vertex-dispatch/iam.tf", "example/main.tf"} <= names


@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: p.relative_to(TERRAFORM).as_posix())
def test_hcl_parses_and_is_canonically_laid_out(path: Path) -> None:
    # Without the terraform binary, these are the parts of `terraform fmt` a text check can
    # prove: it indents with two spaces, never tabs, leaves no trailing blanks, ends in newline.
    text = path.read_text(encoding="utf-8")
    assert _parse(path), f"{path} holds no block"
    assert "\t" not in text
    assert all(line == line.rstrip() for line in text.splitlines())
    assert text.endswith("\n") and not text.endswith("\n\n")


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform is not installed")
def test_terraform_fmt_check_passes() -> None:
    result = subprocess.run(
        ["terraform", "fmt", "-check", "-recursive", "-diff", str(TERRAFORM)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_primitive_role_anywhere() -> None:
    roles = {s for path in TF_FILES for s in _strings(_parse(path)) if s.startswith("roles/")}
    assert roles, "the module grants no role at all: the parse found nothing to check"
    assert not roles & PRIMITIVE_ROLES


def test_no_public_member_anywhere() -> None:
    for path in TF_FILES:
        public = [s for s in _strings(_parse(path)) if any(m in s for m in PUBLIC_MEMBERS)]
        assert not public, f"{path}: {public}"


def test_every_push_subscription_dead_letters() -> None:
    subscriptions = _resources("google_pubsub_subscription")
    pushed = {name: s for name, s in subscriptions.items() if "push_config" in s}
    assert pushed, "no push subscription found"
    for name, subscription in pushed.items():
        policy = _one(subscription.get("dead_letter_policy"))
        assert policy, f"google_pubsub_subscription.{name} has no dead_letter_policy"
        assert "dead-letter" in policy["dead_letter_topic"]
        assert policy["max_delivery_attempts"]
        assert _one(subscription["push_config"])["oidc_token"], f"{name} pushes unauthenticated"


def test_every_event_trigger_retries() -> None:
    functions = _resources("google_cloudfunctions2_function")
    triggered = {name: f for name, f in functions.items() if "event_trigger" in f}
    assert triggered, "no function with an event trigger found"
    for name, function in triggered.items():
        trigger = _one(function["event_trigger"])
        assert trigger["retry_policy"] == "RETRY_POLICY_RETRY", name
        assert "google_service_account.eventarc" in trigger["service_account_email"]


@pytest.mark.parametrize(
    ("resource", "account_key"),
    [
        ("object_finalized", '"object-finalized"'),
        ("pushed", "each.key"),
    ],
)
def test_each_function_runs_as_its_own_account(resource: str, account_key: str) -> None:
    function = _resources("google_cloudfunctions2_function")[resource]
    service = _one(function["service_config"])
    assert service["service_account_email"] == (
        f"${{google_service_account.function[{account_key}].email}}"
    )
    assert service["ingress_settings"] == "ALLOW_INTERNAL_ONLY"
    accounts = _resources("google_service_account")["function"]
    assert accounts["for_each"] == "${local.functions}"


def test_pushed_functions_are_the_ones_with_a_topic_and_storage_one_is_not() -> None:
    # `pushed` covers local.pushed_functions (listens_to set); object-finalized has none, so the
    # two resources never share a service account key.
    table = _locals()["functions"]
    assert table["object-finalized"]["listens_to"] is None
    assert all(spec["listens_to"] for key, spec in table.items() if key != "object-finalized")


def _table_of_hcl() -> dict[str, dict[str, Any]]:
    return {
        key: {
            "entry_point": spec["entry_point"],
            "project_roles": tuple(spec["project_roles"]),
            "publishes": tuple(spec["publishes"]),
            "reads_datasets": spec["reads_datasets"],
            "acts_as_training_accounts": spec["acts_as_training_accounts"],
            "listens_to": spec["listens_to"],
        }
        for key, spec in _locals()["functions"].items()
    }


def test_function_table_matches_deployplan() -> None:
    from_python = {
        spec.key: {
            "entry_point": spec.entry_point,
            "project_roles": spec.project_roles,
            "publishes": spec.publishes,
            "reads_datasets": spec.reads_datasets,
            "acts_as_training_accounts": spec.acts_as_training_accounts,
            "listens_to": spec.listens_to,
        }
        for spec in deployplan.FUNCTIONS
    }
    assert _table_of_hcl() == from_python


def test_every_topic_a_function_publishes_to_is_created_and_granted() -> None:
    # topic_ids is a merge(...) expression (completions only when configured): read its keys.
    topic_roles = set(re.findall(r'"([a-z-]+)" =', _locals()["topic_ids"]))
    assert {"requests", "alerts", "job-events", "completions", "dead-letter"} <= topic_roles
    grant = _resources("google_pubsub_topic_iam_member")["function_publishes"]
    assert grant["for_each"] == "${local.publisher_grants}"
    assert grant["role"] == "roles/pubsub.publisher"
    for key, spec in _table_of_hcl().items():
        assert set(spec["publishes"]) <= topic_roles, key
        if spec["listens_to"]:
            assert spec["listens_to"] in topic_roles, key


# What each function's code publishes, as the modules that publish say (a change there must
# change the grants): dispatch alerts; the job-state function and the reconciler also publish
# retries on the requests topic and completions (the reconciler records states itself).
CODE_PUBLISHES = [
    ("object-finalized", {"alerts"}),
    ("request", {"alerts"}),
    ("job-event", {"alerts", "requests", "completions"}),
    ("reconcile", {"alerts", "requests", "completions"}),
]


@pytest.mark.parametrize(("function", "topics"), CODE_PUBLISHES)
def test_function_is_granted_every_topic_its_code_publishes(
    function: str, topics: set[str]
) -> None:
    assert topics <= set(_table_of_hcl()[function]["publishes"])


def _entry_points_in_main() -> set[str]:
    tree = ast.parse((REPO / "functions" / "main.py").read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize(
    "entry_point",
    [
        "on_object_finalized",
        "on_request",
        "on_job_event",
        "reconcile",
    ],
)
def test_terraform_entry_point_exists_in_main(entry_point: str) -> None:
    assert entry_point in {spec["entry_point"] for spec in _table_of_hcl().values()}
    assert entry_point in _entry_points_in_main()


def test_scheduler_tick_says_it_is_a_schedule() -> None:
    job = _resources("google_cloud_scheduler_job")["schedule"]
    target = _one(job["pubsub_target"])
    assert target["attributes"] == {"vertex_dispatch_kind": "schedule"}
    assert 'topics["requests"]' in target["topic_name"]


def test_every_function_build_keeps_bytecode_valid() -> None:
    """SOURCE_DATE_EPOCH makes the buildpack write checked-hash .pyc (docs/deploy.md)."""
    text = (MODULE / "functions.tf").read_text(encoding="utf-8")
    assert 'SOURCE_DATE_EPOCH = "' in text
    assert text.count("environment_variables = local.build_config.environment") == 2


def test_functions_read_the_config_the_bundle_ships() -> None:
    """VERTEX_DISPATCH_CONFIG names the config inside the source bundle (deploy/bundle.py
    --config), relative to the source root: no Cloud Storage read on a cold start."""
    from bundle_test_support import bundle_module

    assert _locals()["function_environment"]["VERTEX_DISPATCH_CONFIG"] == "${local.config_path}"
    assert _locals()["config_path"] == bundle_module.BUNDLED_CONFIG
    text = (MODULE / "functions.tf").read_text(encoding="utf-8")
    assert text.count("environment_variables          = local.function_environment") == 2
    # Nothing else holds the config: no config bucket, object or grant on one.
    assert set(_resources("google_storage_bucket")) == {"source", "dataset"}
    assert set(_resources("google_storage_bucket_object")) == {"source"}
    assert "function_reads_config" not in _resources("google_storage_bucket_iam_member")
    assert not any("var.config_file" in s for s in _strings(_module()))


def test_deploy_script_ships_its_config_in_the_bundle() -> None:
    script = (REPO / "deploy" / "deploy.sh").read_text(encoding="utf-8")
    assert '.venv/bin/python deploy/bundle.py --config "$config" --zip "$SOURCE_ZIP"' in script
