"""Training progress and checkpoints per output directory (progress.py), and through the core.

A job whose outcome has `work` needs that much RUNNING time in all; `checkpoint_every` saves its
progress at each multiple of the interval. A job stopped before its work is done keeps only its
last checkpoint; a job whose env has VERTEX_DISPATCH_PREVIOUS_OUTPUT resumes from that directory's
last checkpoint and redoes only what was lost since: at most one interval.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from composite_builders import job_spec, pipeline, sweep
from core_builders import PARENT, START, job, new_emulator, pool, state_of
from google.cloud import aiplatform_v1

from vertex_ai_emulator.errors import ConfigError
from vertex_ai_emulator.outcomes import Outcome
from vertex_ai_emulator.progress import Progress

OUT = "gs://acme-models/r-1/"
MINUTE = 60.0
HOUR = 3600.0
PROVISIONING = 120
A100 = "NVIDIA_TESLA_A100"


def _play(
    stints: list[tuple[float, bool]], *, every: float | None, work: float = 6 * HOUR
) -> dict[str, Any]:
    """Jobs one after the other on OUT, each running the seconds given (resuming when True),
    the last one to the end of the work; the directory's view at the end."""
    progress = Progress()
    now = START
    for index, (ran, resumes) in enumerate(stints):
        left = progress.start(
            f"job-{index}",
            output_dir=OUT,
            previous_output=OUT if resumes else None,
            work=work,
            checkpoint_every=every,
            gpus=8,
            now=now,
        )
        now += timedelta(seconds=min(ran, left))
        progress.stop(f"job-{index}", now, "JOB_STATE_FAILED")
    (view,) = progress.describe(now)
    return view


@pytest.mark.parametrize(
    ("stints", "every", "redone", "checkpointed"),
    [
        pytest.param(
            [(105 * MINUTE, False), (6 * HOUR, True)],
            30 * MINUTE,
            15 * MINUTE,
            6 * HOUR,
            id="preempted-at-1h45-resumed-redoes-15m",
        ),
        pytest.param(
            [(105 * MINUTE, False), (6 * HOUR, False)],
            30 * MINUTE,
            105 * MINUTE,
            6 * HOUR,
            id="not-resumed-redoes-everything",
        ),
        pytest.param(
            [(105 * MINUTE, False), (6 * HOUR, True)],
            None,
            105 * MINUTE,
            6 * HOUR,
            id="no-checkpoints-nothing-to-resume-from",
        ),
        pytest.param(
            [(2 * HOUR, False), (6 * HOUR, True)],
            30 * MINUTE,
            0.0,
            6 * HOUR,
            id="stopped-on-a-checkpoint-redoes-nothing",
        ),
        pytest.param(
            [(105 * MINUTE, False), (20 * MINUTE, True), (6 * HOUR, True)],
            30 * MINUTE,
            15 * MINUTE + 20 * MINUTE,  # one interval at most per resubmission
            6 * HOUR,
            id="stopped-twice-before-the-next-checkpoint",
        ),
        pytest.param(
            [(105 * MINUTE, False), (30 * MINUTE, True)],
            30 * MINUTE,
            15 * MINUTE,
            2 * HOUR,
            id="resumed-then-stopped-again",
        ),
    ],
)
def test_work_redone_after_a_stop_is_at_most_what_the_last_checkpoint_lost(
    stints: list[tuple[float, bool]], every: float | None, redone: float, checkpointed: float
) -> None:
    view = _play(stints, every=every)
    assert view["redone_seconds"] == pytest.approx(redone)
    assert view["redone_gpu_hours"] == pytest.approx(8 * redone / HOUR)
    assert view["checkpointed_seconds"] == pytest.approx(checkpointed)


def test_a_stopped_job_keeps_its_last_checkpoint_and_loses_the_rest() -> None:
    view = _play([(105 * MINUTE, False)], every=30 * MINUTE)
    assert [c["progress_seconds"] for c in view["checkpoints"]] == [1800, 3600, 5400]
    assert view["progress_seconds"] == 105 * MINUTE
    assert view["checkpointed_seconds"] == 90 * MINUTE
    assert view["lost_seconds"] == 15 * MINUTE
    assert view["done"] is False


def _train(env: dict[str, str] | None = None, **spec: Any) -> aiplatform_v1.CustomJob:
    container = {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4"}
    if env:
        container["env"] = [{"name": name, "value": value} for name, value in env.items()]
    return job(
        display_name="resnet",
        pools=[{**pool("a2-highgpu-8g", A100, 8), "containerSpec": container}],
        labels={"vd-run": "r-1"},
        scheduling={"strategy": "SPOT"},
        baseOutputDirectory={"outputUriPrefix": OUT},
        **spec,
    )


def test_a_preempted_spot_job_resumed_by_its_retry_redoes_one_part_interval() -> None:
    emulator = new_emulator(
        spot={"preempt_after": "105m"},
        outcome_rules=[{"labels": {"vd-run": "r-1"}, "work": "6h", "checkpoint_every": "30m"}],
    )
    first = emulator.create_custom_job(PARENT, _train())
    emulator.advance_clock(PROVISIONING + 105 * MINUTE)
    assert state_of(emulator, first.name) == "JOB_STATE_FAILED"

    emulator.set_spot({"preempt_after": None})
    second = emulator.create_custom_job(
        PARENT, _train(env={"VERTEX_DISPATCH_PREVIOUS_OUTPUT": OUT})
    )
    # 4h30 of work were left after the 1h30 checkpoint.
    emulator.advance_clock(PROVISIONING + 270 * MINUTE - 1)
    assert state_of(emulator, second.name) == "JOB_STATE_RUNNING"
    emulator.advance_clock(1)
    assert state_of(emulator, second.name) == "JOB_STATE_SUCCEEDED"

    (view,) = emulator.progress()["directories"]
    assert view["output_dir"] == OUT
    assert view["done"] is True
    assert view["redone_seconds"] == 15 * MINUTE
    assert view["redone_gpu_hours"] == pytest.approx(8 * 0.25)
    assert [(j["job"], j["resumed_from"], j["start_progress_seconds"]) for j in view["jobs"]] == [
        (first.name, None, 0.0),
        (second.name, OUT, 90 * MINUTE),
    ]

    emulator.reset()
    assert emulator.progress()["directories"] == []


def test_a_cancelled_job_stops_working_when_its_cancel_is_asked() -> None:
    emulator = new_emulator(
        outcome_rules=[{"work": "6h", "checkpoint_every": "30m"}],
    )
    created = emulator.create_custom_job(PARENT, _train(env=None))
    emulator.advance_clock(PROVISIONING + 50 * MINUTE)
    emulator.cancel_custom_job(created.name)
    emulator.advance_clock(HOUR)

    (view,) = emulator.progress()["directories"]
    assert view["progress_seconds"] == 50 * MINUTE
    assert view["checkpointed_seconds"] == 30 * MINUTE
    assert view["jobs"][0]["end_state"] == "JOB_STATE_CANCELLING"


def test_a_job_without_work_or_output_directory_is_not_tracked() -> None:
    emulator = new_emulator(outcome_rules=[{"labels": {"vd-run": "r-1"}, "work": "1h"}])
    emulator.create_custom_job(PARENT, job(display_name="plain"))  # no rule matches: no work
    no_output = job(display_name="no-output", labels={"vd-run": "r-1"})
    emulator.create_custom_job(PARENT, no_output)  # work, but nowhere to save it
    emulator.advance_clock(2 * HOUR)
    assert emulator.progress()["directories"] == []


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"checkpoint_every": "30m"}, "outcome_rules[0].checkpoint_every: needs work"),
        ({"work": 0}, "outcome_rules[0].work: must be longer than 0s"),
        ({"work": "6h", "checkpoint_every": "soon"}, "outcome_rules[0].checkpoint_every: not a"),
    ],
)
def test_bad_progress_keys_are_config_errors_naming_the_key(
    rule: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("[", r"\[")):
        new_emulator(outcome_rules=[rule])


def test_an_outcome_with_work_says_so_in_its_description() -> None:
    outcome = Outcome.from_dict({"work": "6h", "checkpoint_every": "30m"})
    assert outcome.to_dict() == {
        "result": "succeeded",
        "duration": 600.0,
        "exit_code": 1,
        "work": 6 * HOUR,
        "checkpoint_every": 30 * MINUTE,
    }


def test_each_trial_of_a_sweep_and_a_pipelines_training_task_keep_their_progress() -> None:
    emulator = new_emulator(outcome_rules=[{"work": "1h", "checkpoint_every": "10m"}])
    sweep_out = {"baseOutputDirectory": {"outputUriPrefix": "gs://acme-models/sweep"}}
    pipeline_out = {"baseOutputDirectory": {"outputUriPrefix": "gs://acme-models/pipe/"}}
    emulator.create_hyperparameter_tuning_job(
        PARENT, sweep(max_trials=2, parallel=2, spec=job_spec(**sweep_out))
    )
    emulator.create_training_pipeline(PARENT, pipeline(spec=job_spec(**pipeline_out)))
    emulator.advance_clock(2 * HOUR)

    directories = emulator.progress()["directories"]
    # Vertex AI's layout: a trial writes under DIR/TRIAL/.
    assert sorted(d["output_dir"] for d in directories) == [
        "gs://acme-models/pipe/",
        "gs://acme-models/sweep/1/",
        "gs://acme-models/sweep/2/",
    ]
    assert all(d["done"] and d["redone_seconds"] == 0 for d in directories)
