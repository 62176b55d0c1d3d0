"""GPU quota: a job over the project's remaining quota stays QUEUED until quota frees.

Google's "Understand the custom training service" page: without enough quota "Vertex AI keeps
the job queued until you have sufficient quotas". The emulator's quota is per (kind, region,
accelerator): `on_demand`, and `preemptible` (Spot and FLEX_START jobs); jobs on a persistent
resource use none. Unlimited unless configured (`quota:`) or set (`Emulator.set_quota`).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from core_builders import (
    PARENT,
    at,
    flex_job,
    job,
    new_emulator,
    persistent_resource_config,
    pool,
    state_of,
)
from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import ConfigError, EmulatorError

REGION = "us-central1"
A100 = "NVIDIA_TESLA_A100"
RUN_SECONDS = 600  # the default outcome: succeeded after 10 minutes
PROVISIONING_SECONDS = 120


def _pools(gpus: int = 8) -> list[dict[str, Any]]:
    return [pool("a2-highgpu-8g", A100, gpus)]


def _on_demand(name: str = "on-demand", gpus: int = 8) -> aiplatform_v1.CustomJob:
    return job(display_name=name, pools=_pools(gpus))


def _flex(name: str = "flex", gpus: int = 8, max_wait: str = "0s") -> aiplatform_v1.CustomJob:
    return flex_job(max_wait, display_name=name, pools=_pools(gpus))


def _spot(name: str = "spot", gpus: int = 8) -> aiplatform_v1.CustomJob:
    return job(display_name=name, pools=_pools(gpus), scheduling={"strategy": "SPOT"})


def _quota(kind: str, limit: int) -> dict[str, Any]:
    return {kind: {REGION: {A100: limit}}}


@pytest.mark.parametrize(
    ("kind", "make_job"),
    [
        pytest.param("on_demand", _on_demand, id="on-demand"),
        pytest.param("preemptible", _flex, id="flex-start"),
        pytest.param("preemptible", _spot, id="spot"),
    ],
)
def test_a_job_over_the_remaining_quota_queues_until_a_job_ends(kind: str, make_job: Any) -> None:
    emulator = new_emulator(quota=_quota(kind, 8))
    first = emulator.create_custom_job(PARENT, make_job("first"))
    second = emulator.create_custom_job(PARENT, make_job("second"))
    first_ends = PROVISIONING_SECONDS + RUN_SECONDS

    emulator.advance_clock(first_ends - 1)
    assert [state_of(emulator, j.name) for j in (first, second)] == [
        "JOB_STATE_RUNNING",
        "JOB_STATE_QUEUED",  # not FAILED: it waits, however long
    ]
    assert emulator.state_snapshot()["quota"] == {
        kind: {REGION: {A100: {"limit": 8, "used": 8, "remaining": 0}}}
    }

    emulator.advance_clock(1)  # the first ends and gives its 8 GPUs of quota back
    started = emulator.get_custom_job(second.name)
    assert started.state.name == "JOB_STATE_PENDING"
    assert started.update_time == at(first_ends)
    emulator.advance_clock(PROVISIONING_SECONDS + RUN_SECONDS)
    finished = emulator.get_custom_job(second.name)
    assert finished.state.name == "JOB_STATE_SUCCEEDED"
    assert finished.start_time == at(first_ends + PROVISIONING_SECONDS)


@pytest.mark.parametrize(
    ("limited", "make_job"),
    [
        pytest.param("on_demand", _flex, id="flex-start-ignores-on-demand-quota"),
        pytest.param("on_demand", _spot, id="spot-ignores-on-demand-quota"),
        pytest.param("preemptible", _on_demand, id="on-demand-ignores-preemptible-quota"),
    ],
)
def test_the_two_kinds_of_quota_are_separate(limited: str, make_job: Any) -> None:
    emulator = new_emulator(quota=_quota(limited, 0))
    created = emulator.create_custom_job(PARENT, make_job())
    emulator.advance_clock(1)
    assert state_of(emulator, created.name) == "JOB_STATE_PENDING"


def test_jobs_on_a_persistent_resource_use_no_quota() -> None:
    emulator = new_emulator(
        quota={"on_demand": {REGION: {A100: 0}}, "preemptible": {REGION: {A100: 0}}},
        persistent_resources=[persistent_resource_config(replicas=1)],
    )
    created = emulator.create_custom_job(PARENT, job(persistentResourceId="a100-pool"))
    emulator.advance_clock(5)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"


def test_without_quota_nothing_is_limited() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(PARENT, _on_demand(gpus=64))
    emulator.advance_clock(1)
    assert state_of(emulator, created.name) == "JOB_STATE_PENDING"
    assert emulator.state_snapshot()["quota"] == {}


def test_a_flex_start_job_waiting_for_quota_still_expires_at_its_max_wait() -> None:
    emulator = new_emulator(quota=_quota("preemptible", 4))  # capacity is plenty: quota is not
    created = emulator.create_custom_job(PARENT, _flex(max_wait="1800s"))
    emulator.advance_clock(1799)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"
    emulator.advance_clock(1)
    failed = emulator.get_custom_job(created.name)
    assert (failed.state.name, failed.error.code, failed.end_time) == (
        "JOB_STATE_FAILED",
        8,
        at(1800),
    )
    assert emulator.state_snapshot()["queues"] == {}


def test_an_on_demand_job_waiting_for_quota_never_expires() -> None:
    emulator = new_emulator(quota=_quota("on_demand", 4))
    created = emulator.create_custom_job(PARENT, _on_demand())
    emulator.advance_clock(30 * 86400)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"


def test_quota_does_not_make_gpus_a_job_gets_them_and_then_finds_no_capacity() -> None:
    # Quota first, then capacity: an on-demand job that had to wait for quota can still stock out.
    emulator = new_emulator(
        quota=_quota("on_demand", 8), capacity={REGION: {A100: 8}}, timings={"provisioning": "2m"}
    )
    first = emulator.create_custom_job(PARENT, _on_demand("first"))
    second = emulator.create_custom_job(PARENT, _on_demand("second"))
    emulator.advance_clock(1)
    emulator.set_quota("on_demand", REGION, A100, 16)  # quota for both, GPUs for one
    emulator.advance_clock(PROVISIONING_SECONDS)
    assert state_of(emulator, first.name) == "JOB_STATE_RUNNING"
    stocked_out = emulator.get_custom_job(second.name)
    assert (stocked_out.state.name, stocked_out.error.code) == ("JOB_STATE_FAILED", 8)
    assert stocked_out.end_time == at(1 + PROVISIONING_SECONDS)


def test_the_quota_queue_is_first_in_first_out() -> None:
    emulator = new_emulator(quota=_quota("on_demand", 8))
    running = emulator.create_custom_job(PARENT, _on_demand("running", gpus=4))
    big = emulator.create_custom_job(PARENT, _on_demand("big", gpus=8))
    small = emulator.create_custom_job(PARENT, _on_demand("small", gpus=4))
    emulator.advance_clock(1)
    assert [state_of(emulator, j.name) for j in (running, big, small)] == [
        "JOB_STATE_PENDING",
        "JOB_STATE_QUEUED",
        "JOB_STATE_QUEUED",  # 4 GPUs of quota are left, but it waits behind "big"
    ]
    queues = emulator.state_snapshot()["queues"]
    assert list(queues.values()) == [[big.name, small.name]]


def test_set_quota_at_run_time_starts_waiting_jobs_and_lasts_until_reset() -> None:
    emulator = new_emulator(quota=_quota("on_demand", 0))
    created = emulator.create_custom_job(PARENT, _on_demand())
    emulator.advance_clock(60)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"

    emulator.set_quota("on_demand", REGION, A100, None)  # lifted: unlimited
    assert state_of(emulator, created.name) == "JOB_STATE_PENDING"
    assert emulator.get_custom_job(created.name).update_time == at(60)
    assert emulator.state_snapshot()["quota"] == {}

    emulator.reset()
    assert emulator.state_snapshot()["quota"]["on_demand"][REGION][A100]["limit"] == 0


def test_cancelling_a_job_waiting_for_quota_lets_the_next_one_start() -> None:
    emulator = new_emulator(quota=_quota("on_demand", 8), timings={"cancel": "5s"})
    running = emulator.create_custom_job(PARENT, _on_demand("running"))
    waiting = emulator.create_custom_job(PARENT, _on_demand("waiting", gpus=8))
    emulator.advance_clock(1)
    emulator.cancel_custom_job(running.name)  # PENDING: it holds the quota until CANCELLED
    emulator.advance_clock(4)
    assert state_of(emulator, waiting.name) == "JOB_STATE_QUEUED"
    emulator.advance_clock(1)
    assert state_of(emulator, running.name) == "JOB_STATE_CANCELLED"
    assert state_of(emulator, waiting.name) == "JOB_STATE_PENDING"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("spot", REGION, A100, 1), "quota kind"),
        (("on_demand", REGION, "NVIDIA_GTX_1080", 1), "AcceleratorType"),
        (("on_demand", REGION, A100, -1), "negative"),
    ],
)
def test_bad_set_quota_calls_are_refused(args: tuple[Any, ...], message: str) -> None:
    emulator = new_emulator()
    with pytest.raises(EmulatorError, match=message):
        emulator.set_quota(*args)


@pytest.mark.parametrize(
    ("quota", "names"),
    [
        ({"spot": {}}, "quota: unknown kind(s) spot"),
        ({"on_demand": {REGION: {"NVIDIA_GTX_1080": 1}}}, "quota.on_demand.us-central1.NVIDIA"),
        ({"preemptible": {REGION: {A100: -2}}}, "quota.preemptible.us-central1.NVIDIA_TESLA_A100"),
        ([], "quota: must be a mapping"),
    ],
)
def test_bad_quota_config_is_refused_naming_the_key(quota: Any, names: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(names)):
        new_emulator(quota=quota)
