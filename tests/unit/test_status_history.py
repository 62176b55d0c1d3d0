"""``status RUN --history``'s pure parts: each attempt's timeline as text and its readings as JSON
(``tooling.history_view``), and the refusal of ``--history`` without a run id."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from cli_test_support import EXAMPLE_CONFIG
from run_builders import NOW, PARENT, a_run, an_attempt

from shared.model.runs import CREATE_FAILED_STATE, CREATED_EVENT, AttemptEvent, RunStatus
from tooling import main
from tooling.history_view import history_document, history_text, with_history_documents
from tooling.operator import run_document

A100 = "a2-highgpu-1g+NVIDIA_TESLA_A100x1"


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


CAPACITY_END = replace(
    an_attempt(
        1,
        placement={"flex_start": {"max_wait": "3600s"}},
        job_name=f"{PARENT}/customJobs/41",
        state="JOB_STATE_FAILED",
        error={"code": 8, "message": "stockout", "class": "capacity"},
    ),
    machine=A100,
    gpus=8,
    job_created_at=NOW,
    events=(
        AttemptEvent(CREATED_EVENT, NOW),
        AttemptEvent("JOB_STATE_QUEUED", NOW),
        AttemptEvent("JOB_STATE_FAILED", NOW + minutes(60)),
    ),
    ended_at=NOW + minutes(60),
)
SUCCESS = replace(
    an_attempt(
        2,
        placement={"persistent_resource": "a100-pool"},
        job_name=f"{PARENT}/customJobs/42",
        state="JOB_STATE_SUCCEEDED",
    ),
    machine="a100-pool",
    gpus=1,
    job_created_at=NOW + minutes(61),
    events=(
        AttemptEvent(CREATED_EVENT, NOW + minutes(61)),
        AttemptEvent("JOB_STATE_PENDING", NOW + minutes(62)),
        AttemptEvent("JOB_STATE_RUNNING", NOW + minutes(65)),
        AttemptEvent("JOB_STATE_SUCCEEDED", NOW + minutes(125)),
    ),
    started_at=NOW + minutes(65),
    ended_at=NOW + minutes(125),
)
RUN = a_run(RunStatus.SUCCEEDED, CAPACITY_END, SUCCESS)


def test_the_history_prints_each_attempt_s_timeline() -> None:
    text = history_text([RUN], NOW + minutes(200))

    assert text.splitlines() == [
        "run r-0123456789abcdef01234567  SUCCEEDED  template resnet-a100  2 attempts",
        f"attempt 1  flex_start  us-central1  {A100}  8 GPUs  CustomJob 41",
        "    2026-12-01T12:00:00Z  CREATED",
        "    2026-12-01T12:00:00Z  QUEUED   +0s",
        "    2026-12-01T13:00:00Z  FAILED   +1h00m00s",
        "    never started · outcome capacity",
        "attempt 2  persistent_resource  us-central1  a100-pool  1 GPU  CustomJob 42",
        "    2026-12-01T13:01:00Z  CREATED",
        "    2026-12-01T13:02:00Z  PENDING    +1m00s",
        "    2026-12-01T13:05:00Z  RUNNING    +4m00s",
        "    2026-12-01T14:05:00Z  SUCCEEDED  +1h04m00s",
        "    time to start 4m00s · ran 1h00m00s · 1.00 GPU-hours · outcome succeeded",
    ]


@pytest.mark.parametrize(
    ("attempt", "line"),
    [
        (an_attempt(1), "claimed; no job yet"),
        (
            an_attempt(1, state=CREATE_FAILED_STATE, error={"message": "quota\n  exceeded"}),
            "create failed: quota exceeded",
        ),
        (
            an_attempt(1, job_name=f"{PARENT}/customJobs/7", state="JOB_STATE_RUNNING"),
            "RUNNING (no history recorded: written before run history)",
        ),
    ],
    ids=["intent", "create-failed", "before-history"],
)
def test_an_attempt_without_history_says_why(attempt: object, line: str) -> None:
    run = a_run(RunStatus.SUBMITTING, attempt)  # type: ignore[arg-type]

    assert history_text([run], NOW).splitlines()[-1] == f"    {line}"


def test_a_running_attempt_counts_its_gpu_hours_up_to_now() -> None:
    running = replace(SUCCESS, state="JOB_STATE_RUNNING", events=SUCCESS.events[:3], ended_at=None)

    summary = history_text([a_run(RunStatus.RUNNING, running)], NOW + minutes(95)).splitlines()[-1]

    assert summary == "    time to start 4m00s · ran 30m00s so far · 0.50 GPU-hours · not ended"


def test_the_json_adds_each_attempt_s_readings_beside_its_stored_history() -> None:
    document = with_history_documents(run_document(RUN), RUN, NOW + minutes(200))

    first, second = document["attempts"]
    assert first["history"] == {
        "placement_kind": "flex_start",
        "created_at": "2026-12-01T12:00:00+00:00",
        "time_to_start_s": None,
        "gpu_hours": 0.0,
        "outcome": "capacity",
    }
    assert second["history"]["time_to_start_s"] == 240.0
    assert second["history"]["gpu_hours"] == 1.0
    assert second["events"][2] == {"state": "JOB_STATE_RUNNING", "at": "2026-12-01T13:05:00+00:00"}
    assert (second["machine"], second["gpus"]) == ("a100-pool", 1)
    assert history_document(SUCCESS, NOW)["outcome"] == "succeeded"


def test_history_without_a_run_id_is_refused_before_any_client(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared.adapters import clients

    def built(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a Google Cloud client was built")

    monkeypatch.setattr(clients, "firestore_client", built)

    assert main(["status", "--history", "--config", EXAMPLE_CONFIG]) == 1
    assert "--history shows the timelines of the runs named" in capsys.readouterr().err
