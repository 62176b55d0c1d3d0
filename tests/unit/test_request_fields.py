"""A job request fills declared params only: it can never change a sweep's trials, parameters or
metrics, nor any other part of the job (shared.decode.routing).

Before this rule a body key other than ``template`` and ``params`` was ignored; a sender who
wrote ``"max_trials": 100`` believed it had changed the sweep. Now such a request is refused
(``RequestRejected``, permanent: dispatch records it and alerts once), naming the key.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.model import (
    Config,
    FlexStartPlacement,
    HyperparameterTuning,
    MetricGoal,
    ParameterType,
    PubSubRoute,
    Template,
    TuningParameter,
)
from shared.decode.routing import REQUEST_REFUSED_KEYS, RequestRejected, route
from shared.model.errors import PermanentError
from shared.model.triggers import JobRequest

JOB_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {
                "machineType": "a2-highgpu-1g",
                "acceleratorType": "NVIDIA_TESLA_A100",
                "acceleratorCount": 1,
            },
            "replicaCount": "1",
            "containerSpec": {
                "imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4",
                "args": ["--data={dataset_uri}"],
            },
        }
    ]
}
SWEEP = Template(
    name="resnet-sweep",
    display_name="resnet-sweep-{run_id}",
    job_spec=JOB_SPEC,
    placements=(FlexStartPlacement(max_wait=timedelta(hours=2)),),
    params=("dataset_uri",),
    hyperparameter_tuning=HyperparameterTuning(
        metrics=(("accuracy", MetricGoal.MAXIMIZE),),
        parameters=(TuningParameter("learning_rate", ParameterType.DOUBLE, min=0.0001, max=0.1),),
        max_trials=20,
        parallel_trials=4,
    ),
)
CONFIG = Config(
    project="acme-ml",
    region="us-central1",
    source="tests/config.yaml",
    alerts_topic="projects/acme-ml/topics/training-alerts",
    routes=(
        # a route that matches on a body key a request could not otherwise send
        PubSubRoute(
            name="by-model", body_field="model.family", body_value="resnet", template="resnet-sweep"
        ),
        PubSubRoute(name="train", attributes={"kind": "train"}),
    ),
    templates={"resnet-sweep": SWEEP},
)
GOOD = {"template": "resnet-sweep", "params": {"dataset_uri": "gs://acme-datasets/sweeps/1/"}}


def request(body: dict[str, object]) -> JobRequest:
    return JobRequest(
        message_id="9876543210",
        attributes={"kind": "train"},
        body=body,
        publish_time=datetime(2026, 12, 1, 2, 0, 3, tzinfo=UTC),
        idempotency_key=None,
    )


def test_a_request_filling_declared_params_is_accepted() -> None:
    match = route(request(GOOD), CONFIG)

    assert match is not None
    assert match.params["dataset_uri"] == "gs://acme-datasets/sweeps/1/"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"max_trials": 100}, "body.max_trials"),
        ({"parallel_trials": 50}, "body.parallel_trials"),
        ({"max_failed_trials": 20}, "body.max_failed_trials"),
        ({"trials": 100}, "body.trials"),
        ({"parameters": {"learning_rate": {"double": {"min": 1, "max": 2}}}}, "body.parameters"),
        ({"metrics": {"loss": "minimize"}}, "body.metrics"),
        ({"algorithm": "grid"}, "body.algorithm"),
        ({"hyperparameter_tuning": {"max_trials": 100}}, "body.hyperparameter_tuning"),
        ({"maxTrialCount": "100"}, "body.maxTrialCount"),
        ({"studySpec": {"metrics": []}}, "body.studySpec"),
        ({"training_pipeline": {}}, "body.training_pipeline"),
        ({"model": {"display_name": "x"}}, "body.model"),
        ({"trainingTaskInputs": {}}, "body.trainingTaskInputs"),
    ],
)
def test_a_request_setting_a_part_of_the_job_is_refused_naming_the_key(
    extra: dict[str, object], named: str
) -> None:
    with pytest.raises(RequestRejected) as caught:
        route(request({**GOOD, **extra}), CONFIG)

    message = str(caught.value)
    assert message.startswith(f"job request {named}: a request may fill only the template's")
    assert "template 'resnet-sweep' declares: dataset_uri" in message
    assert isinstance(caught.value, PermanentError)  # recorded and alerted once, not retried


def test_every_refused_key_is_named_at_once() -> None:
    body = {**GOOD, "metrics": {}, "max_trials": 5, "parameters": {}}

    with pytest.raises(RequestRejected) as caught:
        route(request(body), CONFIG)

    assert str(caught.value).endswith("remove body.max_trials, body.metrics, body.parameters")


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"learning_rate": "0.5"},
            "body.params.learning_rate: template 'resnet-sweep' tunes this parameter: the sweep "
            "gives each trial its own value",
        ),
        (
            {"max_trials": "100"},
            "body.params.max_trials: template 'resnet-sweep' does not declare this parameter",
        ),
    ],
)
def test_params_may_not_set_what_the_sweep_tunes(params: dict[str, str], expected: str) -> None:
    body = {"template": "resnet-sweep", "params": {"dataset_uri": "gs://a/b/", **params}}

    with pytest.raises(RequestRejected) as caught:
        route(request(body), CONFIG)

    assert expected in str(caught.value)


def test_a_route_may_match_on_a_key_a_request_could_not_set() -> None:
    body = {"model": {"family": "resnet"}, "params": GOOD["params"]}

    match = route(request(body), CONFIG)

    assert match is not None and match.route == "by-model"


@pytest.mark.parametrize(
    "extra",
    [
        {"worker_pools": [{"image": "evil"}]},
        {"placement": [{"on_demand": {}}]},
        {"timeout": "7d"},
        {"service_account": "root@evil.iam.gserviceaccount.com"},
        {"jobSpec": {}},
        {"labels": {"vd-run": "r-000000000000000000000000"}},
    ],
    ids=lambda extra: next(iter(extra)),
)
def test_a_customjob_key_in_a_request_has_no_effect_as_documented(extra: dict[str, object]) -> None:
    """The CustomJob's own keys were documented as having no effect before sweeps existed:
    senders that carry them keep working (the property tests check the job is the template's)."""
    match = route(request({**GOOD, **extra}), CONFIG)

    assert match is not None and match.template == "resnet-sweep"
    assert match.params["dataset_uri"] == "gs://acme-datasets/sweeps/1/"


def test_other_body_keys_stay_allowed_for_routes_to_match_on() -> None:
    assert not {"template", "params", "job", "kind", "team", "request_id"} & REQUEST_REFUSED_KEYS
    match = route(request({**GOOD, "job": {"kind": "sweep"}, "request_id": "42"}), CONFIG)
    assert match is not None and match.template == "resnet-sweep"
