"""`timings.error_delay`: a failed job's `error` comes after its end, as on the real service.

Google's "Understand the custom training service" page: "About one minute after a job ends,
Vertex AI sets the error code on the training job object, based on the exit code." With
`error_delay` set, the emulator ends the job FAILED with no error and sets the error that much
simulated time later (its `update_time` moves then, its `end_time` does not). The timings can be
changed at run time (`Emulator.set_timings`, `PUT /emulator/v1/timings`) until the next reset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from core_builders import PARENT, at, flex_job, job, new_emulator, persistent_resource_config, pool

from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.errors import EmulatorError

NO_H100 = {"us-central1": {"NVIDIA_H100_80GB": 0}}


def _h100_pools() -> list[dict[str, Any]]:
    return [pool("a3-highgpu-8g", "NVIDIA_H100_80GB", 8)]


def _user_error(emulator: Emulator) -> str:
    emulator.add_outcome_rule({"result": "user_error", "exit_code": 1, "duration": "1m"})
    return emulator.create_custom_job(PARENT, job()).name  # ends at 120 + 60


def _internal_error(emulator: Emulator) -> str:
    emulator.add_outcome_rule({"result": "internal_error", "duration": "1m"})
    return emulator.create_custom_job(PARENT, job()).name


def _wait_expired(emulator: Emulator) -> str:
    return emulator.create_custom_job(PARENT, flex_job("180s", pools=_h100_pools())).name


def _stockout(emulator: Emulator) -> str:
    return emulator.create_custom_job(PARENT, job(pools=_h100_pools())).name  # after provisioning


def _resource_full(emulator: Emulator) -> str:
    body = {"persistentResourceId": "a100-pool"}
    emulator.create_custom_job(PARENT, job(**body))
    return emulator.create_custom_job(PARENT, job(display_name="late", **body)).name


@pytest.mark.parametrize(
    ("make_job", "ends_at", "code"),
    [
        pytest.param(_user_error, 180, 3, id="user-error"),
        pytest.param(_internal_error, 180, 13, id="internal-error"),
        pytest.param(_wait_expired, 180, 8, id="flex-start-wait-expired"),
        pytest.param(_stockout, 120, 8, id="stockout"),
        pytest.param(_resource_full, 0, 8, id="persistent-resource-full-rejected"),
    ],
)
def test_a_failed_jobs_error_comes_error_delay_after_its_end(
    make_job: Callable[[Emulator], str], ends_at: float, code: int
) -> None:
    emulator = new_emulator(
        capacity=NO_H100,
        persistent_resources=[persistent_resource_config(replicas=1)],
        persistent_resource_when_full="reject",
        timings={"error_delay": "60s"},
    )
    name = make_job(emulator)
    emulator.advance_clock(ends_at)

    ended = emulator.get_custom_job(name)
    assert ended.state.name == "JOB_STATE_FAILED"
    assert (ended.error.code, ended.error.message) == (0, "")
    assert ended.end_time == ended.update_time == at(ends_at)

    emulator.advance_clock(59)
    assert emulator.get_custom_job(name).error.code == 0
    emulator.advance_clock(1)
    settled = emulator.get_custom_job(name)
    assert settled.error.code == code and settled.error.message
    assert (settled.end_time, settled.update_time) == (at(ends_at), at(ends_at + 60))


def test_without_error_delay_the_error_comes_with_the_state() -> None:
    emulator = new_emulator()
    name = _user_error(emulator)
    emulator.advance_clock(180)

    ended = emulator.get_custom_job(name)
    assert (ended.state.name, ended.error.code) == ("JOB_STATE_FAILED", 3)
    assert ended.update_time == ended.end_time == at(180)


def test_a_cancelled_job_is_not_delayed() -> None:
    emulator = new_emulator(timings={"error_delay": "60s", "cancel": "5s"})
    name = emulator.create_custom_job(PARENT, job()).name
    emulator.cancel_custom_job(name)
    emulator.advance_clock(5)

    cancelled = emulator.get_custom_job(name)
    assert (cancelled.state.name, cancelled.error.code) == ("JOB_STATE_CANCELLED", 1)


def test_a_job_deleted_before_its_error_came_leaves_no_event_behind() -> None:
    emulator = new_emulator(timings={"error_delay": "60s"})
    name = _user_error(emulator)
    emulator.advance_clock(180)
    emulator.delete_custom_job(name)
    emulator.advance_clock(60)  # the ERROR_SET event finds no job: ignored

    assert emulator.state_snapshot()["jobs"] == []


def test_timings_change_at_run_time_until_the_next_reset() -> None:
    emulator = new_emulator(timings={"provisioning": "90s"})
    assert emulator.timings() == {
        "provisioning": 90.0,
        "persistent_start": 5.0,
        "cancel": 5.0,
        "error_delay": 0.0,
    }

    changed = emulator.set_timings({"error_delay": "1m"})
    assert changed == {**emulator.timings(), "provisioning": 90.0, "error_delay": 60.0}
    name = _user_error(emulator)
    emulator.advance_clock(90 + 60)
    assert emulator.get_custom_job(name).error.code == 0  # the new delay applies

    emulator.reset()
    assert emulator.timings()["error_delay"] == 0.0


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"boot": "1s"}, "timings: unknown key(s) boot"),
        ({"error_delay": "soon"}, "timings.error_delay"),
        ({"error_delay": -1}, "timings.error_delay"),
    ],
)
def test_bad_timings_are_refused_naming_the_key(changes: dict[str, Any], names: str) -> None:
    emulator = new_emulator()
    with pytest.raises(EmulatorError, match=names.replace("(", r"\(").replace(")", r"\)")):
        emulator.set_timings(changes)
    assert emulator.timings()["error_delay"] == 0.0
