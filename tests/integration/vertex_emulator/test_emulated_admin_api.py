"""The admin API under /emulator/v1/: health, clock, state, reset, and refusals of bad calls."""

from __future__ import annotations

import pytest
from emulator_test_support import PARENT, build_clients, flex_start_job, raw_rest_call
from google.api_core import exceptions

from vertex_ai_emulator.config import EmulatorConfig
from vertex_ai_emulator.server import EmulatorServer

pytestmark = pytest.mark.integration


def test_health_answers_ok(admin):
    assert admin.call("GET", "health") == {"status": "ok"}


def test_the_frozen_clock_moves_only_when_advanced(admin):
    before = admin.call("GET", "clock")
    assert before["timeScale"] == 0
    assert admin.call("GET", "clock") == before

    after = admin.call("POST", "clock:advance", {"seconds": 90})

    assert after["now"] > before["now"]
    assert admin.call("GET", "clock") == after


def test_reset_forgets_jobs_faults_and_requests(job_client, admin):
    job_client.create_custom_job(parent=PARENT, custom_job=flex_start_job())
    admin.add_fault(code="UNAVAILABLE")

    admin.call("POST", "reset")

    assert admin.call("GET", "faults") == {"faults": []}
    assert admin.requests() == []
    assert list(job_client.list_custom_jobs(parent=PARENT)) == []


@pytest.mark.parametrize(
    ("http_method", "path", "body", "status"),
    [
        ("GET", "nothing-here", None, 404),
        ("POST", "health", None, 404),
        ("POST", "clock:advance", {"seconds": -5}, 400),
        ("POST", "clock:advance", {"minutes": 5}, 400),
        ("PUT", "capacity", {"region": "us-central1", "count": 1}, 400),
        ("POST", "faults", {"code": "NOPE"}, 400),
        ("POST", "faults", {"method": "DeleteEverything", "code": "UNAVAILABLE"}, 400),
        ("POST", "outcomes", {"result": "exploded"}, 400),
        ("PUT", "persistentResources", {"name": "x", "bogus": 1}, 400),
        ("PUT", "timings", {"boot": "1s"}, 400),
        ("PUT", "timings", {"error_delay": "soon"}, 400),
        ("PUT", "timings", ["error_delay"], 400),
        ("PUT", "spot", {"preempt_after": "soon"}, 400),
        ("PUT", "spot", {"preempt": "1m"}, 400),
        ("PUT", "reservations", {"name": "a100-res", "count": 1}, 400),
        ("PUT", "reservations", {"name": "projects/p/zones/us-central1-a/reservations/r"}, 400),
        ("PUT", "createRefusals", {"quota_when_exceeded": "wait"}, 400),
        ("PUT", "createRefusals", {"offered_accelerators": {"us-east4": ["A100"]}}, 400),
        ("PUT", "createRefusals", {"refuse": True}, 400),
    ],
)
def test_bad_admin_calls_are_refused_in_the_google_error_shape(
    emulator_server, admin, http_method, path, body, status
):
    answer_status, answer = raw_rest_call(
        emulator_server.rest_url, http_method, f"/emulator/v1/{path}", body
    )
    assert answer_status == status
    assert answer["error"]["code"] == status


def test_faults_from_the_config_apply_from_the_start_and_again_after_reset(transport):
    config = EmulatorConfig.from_dict(
        {"faults": [{"method": "ListCustomJobs", "code": "UNAVAILABLE", "count": 1}]}
    )
    with EmulatorServer(config, time_scale=0) as server:
        client, _ = build_clients(transport, server.rest_url, server.grpc_target)
        for _ in range(2):
            with pytest.raises(exceptions.ServiceUnavailable):
                client.list_custom_jobs(parent=PARENT, retry=None)
            assert list(client.list_custom_jobs(parent=PARENT, retry=None)) == []
            raw_rest_call(server.rest_url, "POST", "/emulator/v1/reset")
