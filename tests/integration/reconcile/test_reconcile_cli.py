"""`vertex-dispatch status | retry | cancel` on the emulators, on the ledger dispatch writes."""

from __future__ import annotations

import json

import pytest
from reconcile_test_support import CONFIG, World

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.ledger import DEFAULT_COLLECTION, CancelReason, Ledger
from tooling import main


@pytest.fixture
def operator_world(world: World, clean_firestore: FirestoreEmulator) -> World:
    """The world on the default runs collection: the one the CLI reads."""
    world.services._ledger = Ledger(
        clients.firestore_client(LOCAL_PROJECT), DEFAULT_COLLECTION, clock=world.vertex.now
    )
    return world


def test_status_lists_the_active_run_with_its_job(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    started = operator_world.request_run("flex-l4-starved")

    assert main(["status", "--config", str(CONFIG)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert main(["status", "--config", str(CONFIG), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)

    assert table[0].split() == [
        "RUN", "STATUS", "TEMPLATE", "ATTEMPT", "PLACEMENT", "STATE", "NEXT", "RETRY", "ALERTS",
        "KIND", "JOB",
    ]  # fmt: skip
    assert table[1].split() == [
        started.run_id, "SUBMITTED", "flex-l4-starved", "1", "flex_start", "7200s", "QUEUED",
        "-", "-", "CustomJob", started.job_name.rsplit("/", 1)[-1],
    ]  # fmt: skip
    assert table[-1] == "1 run"
    [run] = document["runs"]
    assert run["attempts"][0]["job_name"] == started.job_name


def test_cancel_cancels_the_last_job_and_retry_publishes_the_next_attempt(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    started = operator_world.request_run("flex-l4-starved")

    assert main(["cancel", started.run_id, "--config", str(CONFIG)]) == 0
    operator_world.vertex.advance(60)  # the cancel completes: CANCELLING -> CANCELLED
    operator_world.reconcile()
    assert main(["retry", started.run_id, "--config", str(CONFIG)]) == 0

    [cancel] = operator_world.vertex.requests("CancelCustomJob")
    assert cancel["resource"] == started.job_name
    cancelled = operator_world.run(started.run_id).attempts[0]
    assert cancelled.cancel_requested_at is not None
    assert cancelled.cancel_reason == CancelReason.OPERATOR  # never retried as capacity
    [retry] = operator_world.retries.pull()
    assert retry.attributes == {"vertex_dispatch_kind": "retry"}
    assert retry.body() == {
        "run_id": started.run_id,
        "attempt": 2,
        "placement_index": 0,
        "reason": "operator",
    }


def test_retry_refuses_a_run_whose_job_is_live_and_says_to_cancel_it_first(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    started = operator_world.request_run("flex-l4-starved")

    assert main(["retry", started.run_id, "--config", str(CONFIG)]) == 1

    error = capsys.readouterr().err
    assert f"vertex-dispatch cancel {started.run_id}" in error and started.job_name in error
    assert operator_world.retries.pull() == []
    assert operator_world.run(started.run_id).operator_grant is None


@pytest.mark.parametrize("command", ["retry", "cancel"])
def test_an_unknown_run_is_an_error_naming_it(
    operator_world: World, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([command, "r-000000000000000000000bad", "--config", str(CONFIG)]) == 1
    assert "r-000000000000000000000bad" in capsys.readouterr().err


def test_an_operator_retry_reopens_a_cancelled_run_and_starts_its_next_attempt(
    operator_world: World,
) -> None:
    world = operator_world
    started = world.request_run("flex-l4-starved")
    assert main(["cancel", started.run_id, "--config", str(CONFIG)]) == 0
    world.vertex.advance(60)  # the cancel completes: CANCELLING -> CANCELLED
    world.reconcile()
    assert world.run(started.run_id).status.value == "CANCELLED"

    assert main(["retry", started.run_id, "--config", str(CONFIG)]) == 0
    [outcome] = world.deliver_retries(world.retries.pull())

    run = world.run(started.run_id)
    assert outcome.outcome.value == "submitted"
    assert run.status.value == "SUBMITTED"
    assert [a.number for a in run.attempts] == [1, 2]
    assert len(world.creates(started.run_id)) == 2


def test_a_replayed_operator_retry_does_not_reopen_the_run_its_attempt_ended(
    operator_world: World,
) -> None:
    world = operator_world
    started = world.request_run("flex-l4-starved")
    for _ in range(2):  # attempt 1, then the operator's attempt 2, each cancelled and ended
        assert main(["cancel", started.run_id, "--config", str(CONFIG)]) == 0
        world.vertex.advance(60)
        world.reconcile()
        assert world.run(started.run_id).status.value == "CANCELLED"
        if len(world.run(started.run_id).attempts) == 2:
            break
        assert main(["retry", started.run_id, "--config", str(CONFIG)]) == 0
        operator_retry = world.retries.pull()
        world.deliver_retries(operator_retry)

    [replayed] = world.deliver_retries(operator_retry)  # the grant for attempt 2 is still there

    assert replayed.outcome.value == "duplicate"
    assert world.run(started.run_id).status.value == "CANCELLED"  # not reopened
    assert len(world.creates(started.run_id)) == 2


def test_a_forged_operator_retry_neither_reopens_a_run_nor_starts_a_job(
    operator_world: World,
) -> None:
    """Anyone who may publish on the requests topic can write reason "operator"; only the
    ledger's grant, which `vertex-dispatch retry` writes, lets an attempt reopen a run."""
    from shared.adapters import retry_messages
    from shared.adapters.ledger import RetryPlan

    world = operator_world
    started = world.request_run("flex-l4-starved")
    assert main(["cancel", started.run_id, "--config", str(CONFIG)]) == 0
    world.vertex.advance(60)
    world.reconcile()
    world.retries.pull()  # nothing an operator published
    forged = RetryPlan(world.services.now(), 2, 0, retry_messages.OPERATOR_REASON)
    topic = world.services.config.requests_topic
    assert topic is not None
    retry_messages.publish_retry(started.run_id, forged, topic)

    [outcome] = world.deliver_retries(world.retries.pull())

    assert outcome.outcome.value == "duplicate"  # the run is over: acknowledged, nothing done
    assert world.run(started.run_id).status.value == "CANCELLED"
    assert len(world.creates(started.run_id)) == 1  # no job for the forged attempt


def test_a_succeeded_run_cannot_be_retried(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared.adapters.ledger import RunStatus

    started = operator_world.request_run("flex-l4-starved")
    operator_world.services.ledger.set_status(started.run_id, RunStatus.SUCCEEDED)

    assert main(["retry", started.run_id, "--config", str(CONFIG)]) == 1
    assert "nothing to retry" in capsys.readouterr().err
    assert operator_world.retries.pull() == []


def test_retry_refuses_a_run_rejected_before_any_template_was_chosen(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    rejected = operator_world.request_run("no-such-template")  # refused while routing
    assert operator_world.run(rejected.run_id).template == ""

    assert main(["retry", rejected.run_id, "--config", str(CONFIG)]) == 1

    error = capsys.readouterr().err
    assert "refused before any template was chosen" in error and "Fix the sender" in error
    assert operator_world.retries.pull() == []
    assert operator_world.run(rejected.run_id).operator_grant is None


def test_retry_refuses_a_run_whose_template_the_config_no_longer_has(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared.adapters.ledger import Run, RunStatus

    retired = "r-" + "ab" * 12
    operator_world.services.ledger.open_run(
        Run(
            retired,
            "request-message:1",
            "requests",
            "retired-template",
            {},
            status=RunStatus.FAILED,
        )
    )

    assert main(["retry", retired, "--config", str(CONFIG)]) == 1

    error = capsys.readouterr().err
    assert "restore template 'retired-template' in the config first" in error
    assert operator_world.retries.pull() == []


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED", "CANCELLED", "REJECTED"])
def test_cancel_refuses_a_run_that_has_ended_without_asking_vertex(
    operator_world: World, capsys: pytest.CaptureFixture[str], status: str
) -> None:
    from dataclasses import replace

    from shared.adapters.ledger import RunStatus

    started = operator_world.request_run("flex-l4-starved")
    ended = replace(operator_world.run(started.run_id), run_id="r-" + "cd" * 12)
    operator_world.services.ledger.open_run(replace(ended, status=RunStatus(status)))

    assert main(["cancel", ended.run_id, "--config", str(CONFIG)]) == 1

    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"run {ended.run_id} is {status}: nothing to cancel")
    )
    assert operator_world.vertex.requests("CancelCustomJob") == []


def test_cancel_of_an_unknown_run_says_it_is_not_in_the_ledger(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cancel", "r-000000000000000000000bad", "--config", str(CONFIG)]) == 1

    error = capsys.readouterr().err
    assert "r-000000000000000000000bad is not in the ledger" in error
    assert "no job to cancel" not in error


def test_cancel_of_a_run_waiting_for_its_retry_stops_the_retry(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world = operator_world
    world.vertex.call(
        "POST", "outcomes", {"result": "internal_error", "duration": "1m", "times": 1}
    )
    started = world.request_run("flex-a100")
    world.vertex.advance(3 * 60 + 1)  # the job fails with INTERNAL: a backoff retry is planned
    for _ in range(5):  # a tick decides it once its error is set
        world.reconcile()
        if world.run(started.run_id).status.value == "WAITING_RETRY":
            break
        world.vertex.advance(60)
    assert world.run(started.run_id).status.value == "WAITING_RETRY"

    assert main(["cancel", started.run_id, "--config", str(CONFIG)]) == 0

    assert "will not start" in capsys.readouterr().out
    assert world.run(started.run_id).status.value == "CANCELLED"
    world.vertex.advance(30 * 60)
    world.reconcile()  # the backoff has long passed: nothing is due any more
    pending = world.retries.pull()
    assert all(r.outcome.value == "duplicate" for r in world.deliver_retries(pending))
    assert len(world.creates(started.run_id)) == 1
    assert world.vertex.requests("CancelCustomJob") == []  # no job was running


def test_status_of_named_runs_shows_them_whatever_their_status(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared.adapters.ledger import RunStatus

    started = operator_world.request_run("flex-l4-starved")
    operator_world.services.ledger.set_status(started.run_id, RunStatus.SUCCEEDED)
    unknown = "r-000000000000000000000bad"

    assert main(["status", started.run_id, unknown, "--config", str(CONFIG), "--json"]) == 1

    captured = capsys.readouterr()
    [run] = json.loads(captured.out)["runs"]
    assert (run["run_id"], run["status"]) == (started.run_id, "SUCCEEDED")
    assert f"run {unknown} is not in the ledger" in captured.err


def test_retry_refuses_and_cancel_stops_a_run_waiting_for_its_data(
    operator_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime

    from shared.adapters.ledger import Run, RunStatus
    from shared.model.data_waits import ManifestWait

    waiting = "r-" + "da" * 12
    operator_world.services.ledger.open_run(
        Run(
            waiting,
            "gcs:b/d/@1",
            "requests",
            "flex-a100",
            {},
            status=RunStatus.WAITING_DATA,
            data_wait=ManifestWait(
                "gs://b/d/manifest.json", 2, 1, ("gs://b/d/part-1",), datetime.now(UTC)
            ),
        )
    )

    assert main(["retry", waiting, "--config", str(CONFIG)]) == 1
    assert "is WAITING_DATA: it starts by itself once its data is complete" in (
        capsys.readouterr().err
    )
    assert operator_world.retries.pull() == []
    assert operator_world.run(waiting).operator_grant is None

    assert main(["cancel", waiting, "--config", str(CONFIG)]) == 0
    assert operator_world.run(waiting).status is RunStatus.CANCELLED
