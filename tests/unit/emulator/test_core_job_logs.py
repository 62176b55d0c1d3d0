"""The simulated ml_job log entries: service lines at state changes, chatty trainer output."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from core_builders import PARENT, at, job, new_emulator

from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.errors import EmulatorError

SUCCESS = [
    "Waiting for job to be provisioned.",
    "Vertex AI is provisioning job running framework. First time usage might take couple of "
    "minutes, and subsequent runs can be much faster.",
    "Vertex AI is setting up this job.",
    "Waiting for training program to start.",
    "Job is preparing.",
    "Job is running.",
    "Tearing down training program.",
    "Finished tearing down training program.",
    "Job completed successfully.",
]


def entries(emulator: Emulator, after: int = 0) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        page = emulator.log_entries(after, 500)
        if not page["entries"]:
            return found
        found.extend(page["entries"])
        after = page["cursor"]


def text(entry: dict[str, Any]) -> str:
    return entry.get("textPayload") or entry["jsonPayload"]["message"]


def of_task(found: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    return [e for e in found if e["resource"]["labels"]["task_name"] == task]


def test_a_successful_job_writes_the_known_service_lines_in_order_and_nothing_else() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(2 * 60 + 10 * 60)

    found = entries(emulator)

    assert [text(e) for e in found] == SUCCESS
    job_id = created.name.rsplit("/", 1)[-1]
    assert {e["resource"]["labels"]["job_id"] for e in found} == {job_id}
    assert {e["resource"]["type"] for e in found} == {"ml_job"}
    assert {e["severity"] for e in found} == {"INFO"}
    assert found[0]["timestamp"] == "2025-01-01T00:00:00Z"
    assert found[-1]["timestamp"] == "2025-01-01T00:12:00Z"


def test_a_chatty_trainer_writes_its_lines_while_the_job_runs_in_time_order() -> None:
    emulator = new_emulator(job_logs={"trainer_lines_per_second": 5})
    emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(5 * 60)  # provisioning (2 min), then 3 min running
    half = entries(emulator)
    emulator.advance_clock(10 * 60)
    found = half + entries(emulator, after=len(half))

    trainer = of_task(found, "workerpool0-0")
    assert len(of_task(half, "workerpool0-0")) == 3 * 60 * 5
    assert len(trainer) == 10 * 60 * 5  # the whole 10-minute run, not a line after its end
    times = [datetime.fromisoformat(e["timestamp"]) for e in found]
    assert times == sorted(times)
    assert [text(e) for e in of_task(found, "service")] == SUCCESS
    assert trainer[0]["labels"]["compute.googleapis.com/zone"] == "us-central1-a"


def test_a_failed_job_ends_with_an_error_line_that_carries_its_error() -> None:
    emulator = new_emulator(
        outcome_rules=[{"result": "user_error", "exit_code": 3, "duration": "1m"}]
    )
    emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(4 * 60)

    service = of_task(entries(emulator), "service")

    assert [text(e) for e in service[:6]] == SUCCESS[:6]
    assert [text(e) for e in service[6:8]] == SUCCESS[6:8]
    assert service[-1]["severity"] == "ERROR"
    assert text(service[-1]).startswith("Job failed. ")
    assert "non-zero status of 3" in text(service[-1])


def test_a_cancelled_job_says_so_and_a_job_that_never_ran_tears_nothing_down() -> None:
    emulator = new_emulator()
    created = emulator.create_custom_job(PARENT, job())
    emulator.cancel_custom_job(created.name)
    emulator.advance_clock(60)

    # Admitted at once (PENDING, provisioning), cancelled before it ran.
    assert [text(e) for e in entries(emulator)] == [*SUCCESS[:3], "Job was cancelled."]


def test_the_cursor_goes_on_across_a_reset_and_the_rate_can_change() -> None:
    emulator = new_emulator()
    emulator.create_custom_job(PARENT, job())
    last = emulator.log_entries(0, 1000)["cursor"]
    emulator.reset()
    assert emulator.set_log_settings({"trainer_lines_per_second": 0.5}) == {
        "trainer_lines_per_second": 0.5
    }
    emulator.create_custom_job(PARENT, job())
    emulator.advance_clock(2 * 60 + 10)

    page = emulator.log_entries(last, 1000)
    assert emulator.log_entries(0, 1000) == page  # what came before the reset is gone
    assert page["cursor"] > last
    assert len(of_task(page["entries"], "workerpool0-0")) == 5
    assert datetime.fromisoformat(page["entries"][0]["timestamp"]) >= at(0)


@pytest.mark.parametrize("changes", [{"trainer_lines_per_second": -1}, {"lines": 3}])
def test_a_bad_log_setting_is_refused_naming_the_key(changes: dict[str, Any]) -> None:
    with pytest.raises(EmulatorError, match="job_logs"):
        new_emulator().set_log_settings(changes)
