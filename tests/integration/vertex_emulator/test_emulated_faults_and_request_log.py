"""Injected faults as the real clients see them, and the request log that records every call."""

from __future__ import annotations

import time

import pytest
from emulator_test_support import PARENT, flex_start_job
from google.api_core import exceptions

pytestmark = pytest.mark.integration

# Over REST the client picks the exception from the HTTP status: 504 is GatewayTimeout, of which
# DeadlineExceeded (the gRPC status's exception) is a subclass.
EXPECTED_EXCEPTION = {
    ("UNAVAILABLE", "grpc"): exceptions.ServiceUnavailable,
    ("UNAVAILABLE", "rest"): exceptions.ServiceUnavailable,
    ("DEADLINE_EXCEEDED", "grpc"): exceptions.DeadlineExceeded,
    ("DEADLINE_EXCEEDED", "rest"): exceptions.GatewayTimeout,
}


def _create(job_client, display_name: str = "flex-job"):
    return job_client.create_custom_job(
        parent=PARENT, custom_job=flex_start_job(display_name), retry=None, timeout=10
    )


def _listed_names(job_client) -> list[str]:
    return [job.display_name for job in job_client.list_custom_jobs(parent=PARENT)]


@pytest.mark.parametrize("code", ["UNAVAILABLE", "DEADLINE_EXCEEDED"])
def test_an_injected_error_reaches_the_client_and_creates_nothing(
    job_client, transport, admin, code
):
    admin.add_fault(method="CreateCustomJob", code=code, count=1)

    with pytest.raises(exceptions.GoogleAPICallError) as failed:
        _create(job_client, "lost")

    assert type(failed.value) is EXPECTED_EXCEPTION[code, transport]
    assert _listed_names(job_client) == []
    assert _create(job_client, "second-try").display_name == "second-try"


def test_a_fault_after_the_work_creates_the_job_although_the_call_failed(job_client, admin):
    admin.add_fault(method="CreateCustomJob", code="UNAVAILABLE", when="after", count=1)

    with pytest.raises(exceptions.ServiceUnavailable):
        _create(job_client, "created-anyway")

    assert _listed_names(job_client) == ["created-anyway"]


def test_latency_alone_delays_the_answer(job_client, admin):
    admin.add_fault(method="ListCustomJobs", latency_ms=300, count=1)

    started = time.monotonic()
    assert _listed_names(job_client) == []
    assert time.monotonic() - started >= 0.3


def test_faults_are_listed_with_their_remaining_count_and_cleared(admin):
    admin.add_fault(method="GetCustomJob", code="NOT_FOUND", count=2)
    assert admin.call("GET", "faults") == {
        "faults": [{"method": "GetCustomJob", "code": "NOT_FOUND", "count": 2, "when": "before"}]
    }
    admin.call("DELETE", "faults")
    assert admin.call("GET", "faults") == {"faults": []}


def test_the_request_log_records_one_create_per_create(job_client, transport, admin):
    job = _create(job_client, "logged")
    job_client.get_custom_job(name=job.name)

    creates = admin.requests("CreateCustomJob")

    assert len(creates) == 1
    assert creates[0]["transport"] == transport
    assert creates[0]["resource"] == PARENT
    assert creates[0]["request"]["customJob"]["displayName"] == "logged"
    assert creates[0]["status"] == "OK"
    assert [entry["method"] for entry in admin.requests()] == ["CreateCustomJob", "GetCustomJob"]


def test_a_failed_call_is_logged_with_its_status(job_client, admin):
    admin.add_fault(method="CreateCustomJob", code="UNAVAILABLE", count=1)
    with pytest.raises(exceptions.ServiceUnavailable):
        _create(job_client)

    [logged] = admin.requests()
    assert (logged["status"], logged["injectedFault"]) == ("UNAVAILABLE", True)


def test_admin_calls_are_not_logged_and_the_log_can_be_cleared(job_client, admin):
    _create(job_client)
    admin.call("GET", "state")
    admin.advance_clock(1)
    assert [entry["method"] for entry in admin.requests()] == ["CreateCustomJob"]

    admin.call("DELETE", "requests")
    assert admin.requests() == []
