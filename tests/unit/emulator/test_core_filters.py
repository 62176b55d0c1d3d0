"""The ListCustomJobs filter parser: valid filters select the right jobs, bad ones are refused."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest
from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import EmulatorError
from vertex_ai_emulator.filters import parse_filter


def stored_job(
    name: str, state: str, created: str, labels: dict[str, str]
) -> aiplatform_v1.CustomJob:
    moment = datetime.fromisoformat(created).replace(tzinfo=UTC)
    return aiplatform_v1.CustomJob(
        display_name=name,
        state=aiplatform_v1.JobState[state],
        create_time=moment,
        update_time=moment,
        labels=labels,
    )


JOBS = [
    stored_job(
        "resnet-1", "JOB_STATE_RUNNING", "2025-01-01T10:00:00", {"run-key": "a", "team": "cv"}
    ),
    stored_job(
        "resnet-2", "JOB_STATE_FAILED", "2025-01-02T10:00:00", {"run-key": "b", "team": "cv"}
    ),
    stored_job("bert", "JOB_STATE_SUCCEEDED", "2025-01-03T10:00:00", {"team": "nlp"}),
    stored_job("my job", "JOB_STATE_QUEUED", "2025-01-04T10:00:00", {}),
]


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        ("", ["resnet-1", "resnet-2", "bert", "my job"]),
        ("display_name=bert", ["bert"]),
        ('display_name="my job"', ["my job"]),
        ("display_name != bert", ["resnet-1", "resnet-2", "my job"]),
        ("display_name:resnet", ["resnet-1", "resnet-2"]),
        ('display_name:"*-2"', ["resnet-2"]),
        ("state=JOB_STATE_RUNNING", ["resnet-1"]),
        ("state!=JOB_STATE_RUNNING", ["resnet-2", "bert", "my job"]),
        ('create_time>"2025-01-02T10:00:00Z"', ["bert", "my job"]),
        ("create_time>=2025-01-02T10:00:00Z", ["resnet-2", "bert", "my job"]),
        ("update_time<2025-01-02T00:00:00+00:00", ["resnet-1"]),
        ('create_time="2025-01-03T10:00:00Z"', ["bert"]),
        ("labels.run-key=a", ["resnet-1"]),
        ('labels.run-key="b"', ["resnet-2"]),
        ("labels.team='cv'", ["resnet-1", "resnet-2"]),
        ("labels.team!=cv", ["bert", "my job"]),
        ("labels.run-key:*", ["resnet-1", "resnet-2"]),
        ("labels.team:nlp", ["bert"]),
        ("labels:run-key", ["resnet-1", "resnet-2"]),
        ("labels.team=cv AND state=JOB_STATE_FAILED", ["resnet-2"]),
        ("labels.team=cv state=JOB_STATE_FAILED", ["resnet-2"]),
        ("state=JOB_STATE_RUNNING OR state=JOB_STATE_QUEUED", ["resnet-1", "my job"]),
        ("NOT labels.team:*", ["my job"]),
        ("-labels.team=cv", ["bert", "my job"]),
        ("NOT (labels.team=cv OR display_name=bert)", ["my job"]),
        # AIP-160: OR binds tighter than AND.
        (
            "labels.team=cv AND state=JOB_STATE_RUNNING OR state=JOB_STATE_FAILED",
            ["resnet-1", "resnet-2"],
        ),
        ("(labels.team=nlp) OR (labels.team=cv AND display_name:2)", ["resnet-2", "bert"]),
        ('  labels.team = "cv"  AND  display_name = "resnet-1" ', ["resnet-1"]),
        ('display_name="a \\"quoted\\" name"', []),
    ],
)
def test_valid_filters_select_jobs(text: str, selected: list[str]) -> None:
    predicate = parse_filter(text)
    assert [job.display_name for job in JOBS if predicate.matches(job)] == selected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("owner=me", 'unsupported field "owner"'),
        ("labels=x", 'operator "=" is not supported for field "labels"'),
        ("state=RUNNING", '"RUNNING" is not a job state'),
        ("state>JOB_STATE_RUNNING", 'operator ">" is not supported for field "state"'),
        ("display_name<b", 'operator "<" is not supported'),
        ("create_time>yesterday", "not an RFC 3339 timestamp"),
        ("create_time>2025-01-01T00:00:00", "needs a time zone"),
        ("state=", "expected a value"),
        ("state JOB_STATE_RUNNING", "expected an operator"),
        ("(state=JOB_STATE_RUNNING", "missing ')'"),
        ("state=JOB_STATE_RUNNING)", "unexpected ')'"),
        ("AND state=JOB_STATE_RUNNING", "expected a field name"),
        ("state=JOB_STATE_RUNNING AND", "expected a field name"),
        ('display_name="unterminated', "expected a value"),
    ],
)
def test_invalid_filters_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(EmulatorError) as raised:
        parse_filter(text)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in raised.value.message
