"""GPU quota through the real aiplatform_v1 clients (REST and gRPC) and `PUT /emulator/v1/quota`.

Without enough quota "Vertex AI keeps the job queued until you have sufficient quotas" (Google,
"Understand the custom training service"): the job the quota has no room for stays QUEUED, with
free GPUs in the region, until the job holding the quota ends.
"""

from __future__ import annotations

import pytest
from emulator_test_support import (
    PARENT,
    PROVISIONING_SECONDS,
    REGION,
    RUN_SECONDS,
    flex_start_job,
    raw_rest_call,
)
from google.cloud import aiplatform_v1

pytestmark = pytest.mark.integration

JobState = aiplatform_v1.JobState
A100 = "NVIDIA_TESLA_A100"


def _quota(kind: str, count: int | None) -> dict[str, object]:
    return {"kind": kind, "region": REGION, "acceleratorType": A100, "count": count}


def test_a_flex_start_job_over_its_quota_stays_queued_until_quota_frees(job_client, admin):
    admin.set_capacity(A100, 2)  # GPUs for both jobs...
    assert admin.call("PUT", "quota", _quota("preemptible", 1)) == _quota("preemptible", 1)
    first = job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job("first"))
    second = job_client.create_custom_job(
        parent=PARENT, custom_job=flex_start_job("second", max_wait_seconds=0)
    )

    admin.advance_clock(PROVISIONING_SECONDS + RUN_SECONDS - 1)  # ...but quota for one
    assert job_client.get_custom_job(name=first.name).state == JobState.JOB_STATE_RUNNING
    waiting = job_client.get_custom_job(name=second.name)
    assert waiting.state == JobState.JOB_STATE_QUEUED
    state = admin.call("GET", "state")
    assert state["quota"] == {
        "preemptible": {REGION: {A100: {"limit": 1, "used": 1, "remaining": 0}}}
    }
    assert state["capacity"][REGION][A100] == {"total": 2, "held": 1, "free": 1}

    admin.advance_clock(1)  # the first ends: its quota goes to the second
    assert job_client.get_custom_job(name=first.name).state == JobState.JOB_STATE_SUCCEEDED
    assert job_client.get_custom_job(name=second.name).state == JobState.JOB_STATE_PENDING
    admin.advance_clock(PROVISIONING_SECONDS + RUN_SECONDS)
    assert job_client.get_custom_job(name=second.name).state == JobState.JOB_STATE_SUCCEEDED


def test_lifting_the_limit_starts_the_waiting_job_at_once(job_client, admin):
    admin.set_capacity(A100, 1)
    admin.call("PUT", "quota", _quota("preemptible", 0))
    job = job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job())
    admin.advance_clock(60)
    assert job_client.get_custom_job(name=job.name).state == JobState.JOB_STATE_QUEUED

    admin.call("PUT", "quota", _quota("preemptible", None))

    assert job_client.get_custom_job(name=job.name).state == JobState.JOB_STATE_PENDING
    assert admin.call("GET", "state")["quota"] == {}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_quota("spot", 1), id="unknown-kind"),
        pytest.param({**_quota("on_demand", 1), "acceleratorType": "NVIDIA_GTX_1080"}, id="gpu"),
        pytest.param(_quota("on_demand", -1), id="negative"),
        pytest.param(_quota("on_demand", "8"), id="count-not-an-integer"),
        pytest.param({"kind": "on_demand", "region": REGION, "count": 1}, id="no-accelerator"),
        pytest.param({**_quota("on_demand", 1), "zone": "a"}, id="unknown-field"),
    ],
)
def test_bad_quota_calls_are_refused_with_400(emulator_server, admin, body):
    status, answer = raw_rest_call(emulator_server.rest_url, "PUT", "/emulator/v1/quota", body)
    assert (status, answer["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert admin.call("GET", "state")["quota"] == {}
