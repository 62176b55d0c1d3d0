"""Job lifecycles in the simulation: FLEX_START queueing, stockouts, outcomes, cancel, delete."""

from __future__ import annotations

import grpc
import pytest
from core_builders import (
    CANONICAL_PARENT,
    PARENT,
    SEED_BODY,
    at,
    flex_job,
    job,
    new_emulator,
    pool,
    state_of,
)
from google.cloud import aiplatform_v1
from google.protobuf import empty_pb2

from vertex_ai_emulator.errors import EmulatorError

H100 = {"us-central1": {"NVIDIA_H100_80GB": 0}}


def h100_flex_job(replicas: int = 1, gpus: int = 8, **kwargs: object) -> aiplatform_v1.CustomJob:
    pools = [pool("a3-highgpu-8g", "NVIDIA_H100_80GB", gpus, 1)]
    if replicas > 1:
        pools.append(pool("a3-highgpu-8g", "NVIDIA_H100_80GB", gpus, replicas - 1))
    return flex_job(pools=pools, **kwargs)


def test_seed_body_is_accepted_verbatim_and_runs_to_success() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(
        "projects/p/locations/us-central1", aiplatform_v1.CustomJob.from_json(SEED_BODY)
    )
    assert created.state == aiplatform_v1.JobState.JOB_STATE_QUEUED
    emulator.advance_clock(2 * 60 + 10 * 60)
    assert state_of(emulator, created.name) == "JOB_STATE_SUCCEEDED"


def test_flex_start_waits_for_capacity_then_runs_with_exact_timestamps() -> None:
    emulator = new_emulator(capacity=H100, timings={"provisioning": "2m"})
    created = emulator.create_custom_job(PARENT, h100_flex_job(replicas=2, max_wait="7200s"))
    assert created.name.startswith(f"{CANONICAL_PARENT}/customJobs/")
    assert created.create_time == at(0)

    emulator.advance_clock(600)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"
    emulator.set_capacity("us-central1", "NVIDIA_H100_80GB", 8)  # one replica's worth: not enough
    emulator.advance_clock(60)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"
    emulator.set_capacity("us-central1", "NVIDIA_H100_80GB", 16)  # at 11 minutes

    pending = emulator.get_custom_job(created.name)
    assert pending.state == aiplatform_v1.JobState.JOB_STATE_PENDING
    assert pending.update_time == at(660)
    assert emulator.state_snapshot()["capacity"]["us-central1"]["NVIDIA_H100_80GB"] == {
        "total": 16,
        "held": 16,
        "free": 0,
    }

    emulator.advance_clock(3600)  # far past the end: events still land at their own instants
    finished = emulator.get_custom_job(created.name)
    assert finished.state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    assert finished.start_time == at(660 + 120)
    assert finished.end_time == at(660 + 120 + 600)
    assert finished.update_time == finished.end_time
    assert emulator.state_snapshot()["capacity"]["us-central1"]["NVIDIA_H100_80GB"]["held"] == 0


def test_capacity_timeline_starts_a_waiting_job_at_its_offset() -> None:
    emulator = new_emulator(
        capacity=H100,
        capacity_timeline=[
            {"at": "2h", "region": "us-central1", "accelerator": "NVIDIA_H100_80GB", "set": 8}
        ],
    )
    created = emulator.create_custom_job(PARENT, h100_flex_job(max_wait="10800s"))
    emulator.advance_clock(5 * 3600)
    finished = emulator.get_custom_job(created.name)
    assert finished.start_time == at(2 * 3600 + 120)
    assert finished.state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED


def test_flex_start_fails_with_resource_exhausted_when_max_wait_passes() -> None:
    emulator = new_emulator(capacity=H100)
    created = emulator.create_custom_job(PARENT, h100_flex_job(max_wait="1800s"))
    emulator.advance_clock(1799)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"
    emulator.advance_clock(1)
    failed = emulator.get_custom_job(created.name)
    assert failed.state == aiplatform_v1.JobState.JOB_STATE_FAILED
    assert failed.end_time == at(1800)
    assert failed.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert "Resources are insufficient in region: us-central1" in failed.error.message
    assert "1800s" in failed.error.message


@pytest.mark.parametrize(
    ("max_wait", "still_queued_after", "fails_at"),
    [
        ("0s", 30 * 86400, None),  # 0 waits forever
        (None, 86400 - 1, 86400),  # unset: the documented default of 1 day
    ],
)
def test_flex_start_max_wait_defaults(
    max_wait: str | None, still_queued_after: float, fails_at: float | None
) -> None:
    emulator = new_emulator(capacity=H100)
    created = emulator.create_custom_job(PARENT, h100_flex_job(max_wait=max_wait))
    emulator.advance_clock(still_queued_after)
    assert state_of(emulator, created.name) == "JOB_STATE_QUEUED"
    if fails_at is not None:
        emulator.advance_clock(fails_at - still_queued_after)
        assert state_of(emulator, created.name) == "JOB_STATE_FAILED"


def test_flex_start_queue_is_first_in_first_out() -> None:
    emulator = new_emulator(capacity={"us-central1": {"NVIDIA_H100_80GB": 8}})
    running = emulator.create_custom_job(PARENT, h100_flex_job(display_name="running"))
    big = emulator.create_custom_job(PARENT, h100_flex_job(2, display_name="big", max_wait="0s"))
    small = emulator.create_custom_job(PARENT, h100_flex_job(display_name="small", max_wait="0s"))
    emulator.advance_clock(60)
    assert [state_of(emulator, j.name) for j in (running, big, small)] == [
        "JOB_STATE_PENDING",
        "JOB_STATE_QUEUED",
        "JOB_STATE_QUEUED",  # fits in the 8 GPUs freed later, but waits behind "big"
    ]
    emulator.set_capacity("us-central1", "NVIDIA_H100_80GB", 16)  # 8 free: still not 16 for big
    assert state_of(emulator, small.name) == "JOB_STATE_QUEUED"
    emulator.advance_clock(120 + 600)  # "running" ends: big takes all 16
    assert [state_of(emulator, j.name) for j in (running, big, small)] == [
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_PENDING",
        "JOB_STATE_QUEUED",
    ]
    assert emulator.state_snapshot()["queues"] == {"us-central1/NVIDIA_H100_80GB": [small.name]}


def test_on_demand_job_without_capacity_stocks_out_after_provisioning() -> None:
    emulator = new_emulator(capacity=H100, timings={"provisioning": "90s"})
    created = emulator.create_custom_job(
        PARENT, job(pools=[pool("a3-highgpu-8g", "NVIDIA_H100_80GB", 8)])
    )
    emulator.advance_clock(1)
    assert state_of(emulator, created.name) == "JOB_STATE_PENDING"
    emulator.advance_clock(89)
    failed = emulator.get_custom_job(created.name)
    assert failed.state == aiplatform_v1.JobState.JOB_STATE_FAILED
    assert failed.end_time == at(90)
    assert failed.error.code == 8
    assert failed.error.message.startswith(
        "Resources are insufficient in region: us-central1. Please try a different region."
    )


def test_cpu_only_jobs_never_lack_capacity() -> None:
    emulator = new_emulator(unlisted_capacity=0)
    created = emulator.create_custom_job(PARENT, job(pools=[pool("n1-standard-4", None)]))
    emulator.advance_clock(120)
    assert state_of(emulator, created.name) == "JOB_STATE_RUNNING"


@pytest.mark.parametrize(
    ("rule", "state", "code", "message_start", "ends_at"),
    [
        ({"result": "succeeded", "duration": "30m"}, "JOB_STATE_SUCCEEDED", 0, "", 120 + 1800),
        (
            {"result": "user_error", "exit_code": 137, "duration": "1m"},
            "JOB_STATE_FAILED",
            3,
            "The replica workerpool0-0 exited with a non-zero status of 137. To find out more",
            120 + 60,
        ),
        (
            {"result": "internal_error", "duration": "5m"},
            "JOB_STATE_FAILED",
            13,
            "Internal error occurred for the current attempt.",
            120 + 300,
        ),
        (
            {"result": "stockout"},
            "JOB_STATE_FAILED",
            8,
            "Resources are insufficient in region: us-central1",
            120,
        ),
    ],
)
def test_outcome_rules_decide_how_a_job_ends(
    rule: dict, state: str, code: int, message_start: str, ends_at: float
) -> None:
    emulator = new_emulator()
    emulator.add_outcome_rule(rule)
    created = emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(86400)
    ended = emulator.get_custom_job(created.name)
    assert (ended.state.name, ended.error.code) == (state, code)
    assert ended.error.message.startswith(message_start)
    assert ended.end_time == at(ends_at)


def test_outcome_rule_with_times_is_spent_and_first_match_wins() -> None:
    emulator = new_emulator(
        outcome_rules=[
            {"labels": {"team": "vision"}, "result": "user_error", "times": 1},
            {"display_name": "^resnet-", "result": "internal_error"},
        ]
    )
    first = emulator.create_custom_job(PARENT, job("resnet-1", labels={"team": "vision"}))
    second = emulator.create_custom_job(PARENT, job("resnet-2", labels={"team": "vision"}))
    other = emulator.create_custom_job(PARENT, job("bert-1", labels={"team": "vision"}))
    emulator.advance_clock(3600)
    assert [emulator.get_custom_job(j.name).error.code for j in (first, second, other)] == [
        3,
        13,
        0,
    ]
    assert [rule.get("display_name") for rule in emulator.state_snapshot()["outcome_rules"]] == [
        "^resnet-"
    ]


def test_outcome_rule_matches_on_placement() -> None:
    emulator = new_emulator()
    emulator.add_outcome_rule({"placement": "flex_start", "result": "internal_error"})
    flex = emulator.create_custom_job(PARENT, flex_job())
    on_demand = emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(3600)
    assert state_of(emulator, flex.name) == "JOB_STATE_FAILED"
    assert state_of(emulator, on_demand.name) == "JOB_STATE_SUCCEEDED"


def test_invalid_outcome_rule_is_rejected() -> None:
    emulator = new_emulator()
    with pytest.raises(EmulatorError) as raised:
        emulator.add_outcome_rule({"result": "exploded"})
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "result" in raised.value.message


@pytest.mark.parametrize("cancel_after", [0, 60, 600])  # QUEUED, PENDING, RUNNING
def test_cancel_ends_cancelled_and_releases_gpus(cancel_after: float) -> None:
    emulator = new_emulator(
        capacity={"us-central1": {"NVIDIA_TESLA_A100": 1}}, timings={"cancel": "5s"}
    )
    created = emulator.create_custom_job(PARENT, flex_job())
    emulator.advance_clock(cancel_after)
    emulator.cancel_custom_job(created.name)
    assert state_of(emulator, created.name) == "JOB_STATE_CANCELLING"
    emulator.cancel_custom_job(created.name)  # cancelling twice changes nothing
    emulator.advance_clock(5)
    cancelled = emulator.get_custom_job(created.name)
    assert cancelled.state == aiplatform_v1.JobState.JOB_STATE_CANCELLED
    assert (cancelled.error.code, cancelled.error.message) == (1, "CustomJob was cancelled.")
    assert cancelled.end_time == at(cancel_after + 5)
    assert emulator.state_snapshot()["capacity"]["us-central1"]["NVIDIA_TESLA_A100"]["free"] == 1


def test_cancelling_an_ended_job_is_a_failed_precondition() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(3600)
    with pytest.raises(EmulatorError) as raised:
        emulator.cancel_custom_job(created.name)
    assert raised.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_delete_only_ended_jobs_and_return_a_done_operation() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(PARENT, job())
    with pytest.raises(EmulatorError) as raised:
        emulator.delete_custom_job(created.name)
    assert raised.value.code == grpc.StatusCode.FAILED_PRECONDITION

    emulator.advance_clock(3600)
    operation = emulator.delete_custom_job(created.name)
    assert operation.done
    assert operation.name.startswith(f"{created.name}/operations/")
    assert operation.response.Is(empty_pb2.Empty.DESCRIPTOR)
    assert emulator.get_operation(operation.name) == operation
    with pytest.raises(EmulatorError) as raised:
        emulator.get_custom_job(created.name)
    assert raised.value.code == grpc.StatusCode.NOT_FOUND


def test_names_accept_the_project_id_or_number() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(PARENT, job())
    by_id = created.name.replace("123456789012", "acme-ml")
    assert emulator.get_custom_job(by_id).name == created.name


def test_output_only_fields_sent_on_create_are_ignored() -> None:
    emulator = new_emulator()
    sent = job()
    sent.name = "projects/x/locations/y/customJobs/1"
    sent.state = aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    sent.create_time = at(-86400)
    sent.error = {"code": 13, "message": "bogus"}
    created = emulator.create_custom_job(PARENT, sent)
    assert created.state == aiplatform_v1.JobState.JOB_STATE_QUEUED
    assert created.create_time == at(0)
    assert created.name.startswith(CANONICAL_PARENT)
    assert created.error.code == 0
