"""GPU-hour budgets on the emulators: a run over budget waits WAITING_BUDGET (alerted once) and
starts once the reconciler's retry finds the budget freed; ``reject`` ends the run with one
alert; concurrent submissions near the limit create one job only.

Every job here has a worst case of 1 A100 x 2h = 2 GPU-hours and every budget holds 3, so one run
fits at a time (configs/budgets.yaml). The emulator's clock is the only clock.
"""

from __future__ import annotations

import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from reconcile_test_support import Message, World, of_run, topic

from shared.adapters.alerts import AlertNotSent
from shared.adapters.config_source import load_config
from shared.adapters.ledger import RunStatus
from shared.config.model import Budget
from shared.handlers.dispatch import dispatch_event
from shared.handlers.services import Services
from shared.model.budgets import CONFIG_SCOPE, template_scope
from shared.model.results import DispatchOutcome, DispatchResult
from shared.model.runkeys import request_run_key, run_id
from shared.policy.timing import BUDGET_RECHECK_EVERY

CONFIG = Path(__file__).parent / "configs" / "budgets.yaml"
JOB_RUNS_SECONDS = 2 * 60 + 10 * 60  # provisioning, then the default outcome's duration
RECHECK_SECONDS = BUDGET_RECHECK_EVERY.total_seconds()


@pytest.fixture
def budgeted(world: World) -> World:
    """The folder's world, running dispatch with the budgets config."""
    world.services = Services(
        load_config(str(CONFIG)), now=world.vertex.now, _ledger=world.services.ledger
    )
    return world


def _reasons(world: World, run_id: str) -> list[str]:
    return [m.body()["reason"] for m in of_run(world.alerts.pull(), run_id)]


def test_a_run_over_budget_waits_alerted_once_and_starts_when_the_budget_frees(
    budgeted: World,
) -> None:
    world = budgeted
    first = world.request_run("budget-wait")
    assert first.outcome is DispatchOutcome.SUBMITTED
    assert _reasons(world, first.run_id) == []  # 2 of 3 GPU-hours: under 80%

    second = world.request_run("budget-wait")

    assert second.outcome is DispatchOutcome.WAITING_BUDGET
    waiting = world.run(second.run_id)
    assert waiting.status is RunStatus.WAITING_BUDGET
    assert waiting.attempts == ()  # nothing claimed, nothing reserved for it
    assert waiting.next_retry is not None and waiting.next_retry.attempt == 1
    assert "template budget-wait's budget" in waiting.next_retry.reason
    assert world.creates(second.run_id) == []
    # The wait, once; and the budget's 80% and 100% thresholds, once each for the window.
    alerted = sorted(_reasons(world, second.run_id))
    assert alerted == ["budget", "budget_threshold", "budget_threshold"]

    # Its retry comes while the first job still runs: it waits on, not alerted again.
    world.vertex.advance(RECHECK_SECONDS + 1)
    world.reconcile()
    retries = of_run(world.retries.pull(), second.run_id)
    assert [m.body()["attempt"] for m in retries] == [1]
    [again] = world.deliver_retries(retries)
    assert again.outcome is DispatchOutcome.WAITING_BUDGET
    assert _reasons(world, second.run_id) == []
    assert world.run(second.run_id).status is RunStatus.WAITING_BUDGET

    # The first job ends; the tick records it, and the next retry finds the budget freed.
    world.vertex.advance(JOB_RUNS_SECONDS)
    world.reconcile()
    assert world.run(first.run_id).status is RunStatus.SUCCEEDED
    retries = of_run(world.retries.pull(), second.run_id)  # due again by now, or soon
    if not retries:
        world.vertex.advance(RECHECK_SECONDS + 1)
        world.reconcile()
        retries = of_run(world.retries.pull(), second.run_id)
    [started] = world.deliver_retries(retries)

    assert started.outcome is DispatchOutcome.SUBMITTED
    assert len(world.creates(second.run_id)) == 1
    assert world.run(second.run_id).status in (RunStatus.SUBMITTED, RunStatus.RUNNING)
    [(book, _)] = world.services.ledger.budget_books([template_scope("budget-wait")])
    assert set(book.reservations) == {f"{second.run_id}#1"}  # the first settled


def _request(template: str) -> Message:
    """A job request for ``template``, as Eventarc delivers it (and may deliver it again)."""
    body = {"template": template, "params": {"dataset_uri": "gs://acme/data/"}}
    return Message(json.dumps(body).encode(), {"kind": "train"}, f"req-{time.time_ns()}")


def _deliver(world: World, message: Message) -> DispatchResult:
    return dispatch_event(message.cloud_event(topic("requests")), world.services)


def test_reject_ends_the_run_with_one_alert_and_no_job(budgeted: World) -> None:
    world = budgeted
    first = world.request_run("budget-reject")
    assert first.outcome is DispatchOutcome.SUBMITTED
    request = _request("budget-reject")

    refused = _deliver(world, request)

    assert refused.outcome is DispatchOutcome.REJECTED
    run = world.run(refused.run_id)
    assert run.status is RunStatus.REJECTED
    assert world.creates(refused.run_id) == []
    assert _reasons(world, refused.run_id).count("budget") == 1
    # A redelivery of the same request finds the run over: no second alert, no job.
    again = _deliver(world, request)
    assert (again.outcome, again.run_id) == (DispatchOutcome.DUPLICATE, refused.run_id)
    assert _reasons(world, refused.run_id) == []
    assert world.creates(refused.run_id) == []
    world.vertex.advance(60)
    world.reconcile()
    assert world.retries.pull() == []
    assert _reasons(world, refused.run_id) == []


def test_a_budget_refusal_whose_alert_fails_to_publish_is_alerted_by_the_redelivery(
    budgeted: World,
) -> None:
    """The alert goes out before the run ends: a failed publish leaves the run open, so the
    redelivery (which an ended run would make a duplicate) alerts, then ends it."""
    world = budgeted
    assert world.request_run("budget-reject").outcome is DispatchOutcome.SUBMITTED
    # Refused once with its alerts sent: the budget's thresholds are alerted for the window.
    assert world.request_run("budget-reject").outcome is DispatchOutcome.REJECTED
    world.alerts.pull()
    request = _request("budget-reject")
    config = world.services.config
    no_alerts_topic = dataclasses.replace(config, alerts_topic=f"{config.alerts_topic}-missing")
    unpublished = Services(no_alerts_topic, now=world.vertex.now, _ledger=world.services.ledger)

    with pytest.raises(AlertNotSent):  # transient: the request is delivered again
        dispatch_event(request.cloud_event(topic("requests")), unpublished)

    opened = world.run(run_id(request_run_key(request.message_id, None)))
    assert not opened.status.is_terminal()
    assert opened.alerts == ()  # the claim was given back
    refused = _deliver(world, request)
    assert (refused.outcome, refused.run_id) == (DispatchOutcome.REJECTED, opened.run_id)
    assert world.run(refused.run_id).status is RunStatus.REJECTED
    assert _reasons(world, refused.run_id) == ["budget"]
    assert world.creates(refused.run_id) == []


def test_concurrent_submissions_near_the_limit_create_one_job(budgeted: World) -> None:
    world = budgeted
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: world.request_run("budget-wait"), range(4)))

    outcomes = sorted(result.outcome.value for result in results)
    assert outcomes == ["submitted"] + ["waiting_budget"] * 3
    creates = [e for r in results for e in world.creates(r.run_id)]
    assert len(creates) == 1
    [(book, _)] = world.services.ledger.budget_books([template_scope("budget-wait")])
    assert len(book.reservations) == 1


def test_a_config_budget_holds_every_template_together(budgeted: World) -> None:
    world = budgeted
    config = dataclasses.replace(
        world.services.config, budget=Budget(gpu_hours=3.0, per=timedelta(days=7))
    )
    world.services = Services(config, now=world.vertex.now, _ledger=world.services.ledger)

    first = world.request_run("unbudgeted")
    second = world.request_run("unbudgeted")

    assert (first.outcome, second.outcome) == (
        DispatchOutcome.SUBMITTED,
        DispatchOutcome.WAITING_BUDGET,
    )
    assert "the config's budget" in (world.run(second.run_id).next_retry.reason or "")
    [(book, _)] = world.services.ledger.budget_books([CONFIG_SCOPE])
    assert set(book.reservations) == {f"{first.run_id}#1"}


def test_a_threshold_alert_whose_send_failed_is_sent_by_the_redelivery(budgeted: World) -> None:
    """The delivery reserves the attempt, then cannot publish the 80% alert (its topic is gone):
    it gives the claim back and raises. The redelivery finds the attempt reserved already and
    still sends the alert, once."""
    world = budgeted
    config = world.services.config
    template = dataclasses.replace(
        config.templates["budget-wait"], budget=Budget(gpu_hours=2.5, per=timedelta(days=7))
    )  # one run's 2 GPU-hours: 80%, and it fits
    templates = {**config.templates, "budget-wait": template}
    good = dataclasses.replace(config, templates=templates)
    broken = dataclasses.replace(good, alerts_topic=good.alerts_topic + "-missing")
    scope = template_scope("budget-wait")
    ledger = world.services.ledger
    [(before, _)] = ledger.budget_books([scope])
    message = Message(
        json.dumps({"template": "budget-wait", "params": {"dataset_uri": "gs://a/"}}).encode(),
        {"kind": "train"},
        f"req-threshold-{time.time_ns()}",
    )
    event = message.cloud_event(topic("requests"))

    world.services = Services(broken, now=world.vertex.now, _ledger=ledger)
    with pytest.raises(AlertNotSent):
        dispatch_event(event, world.services)
    [(book, _)] = ledger.budget_books([scope])
    assert len(book.reservations) == len(before.reservations) + 1  # reserved, not claimed
    assert book.alerted == before.alerted  # the claim given back

    world.services = Services(good, now=world.vertex.now, _ledger=ledger)
    result = dispatch_event(event, world.services)

    assert result.outcome is DispatchOutcome.SUBMITTED
    assert _reasons(world, result.run_id) == ["budget_threshold"]
    [(book, _)] = ledger.budget_books([scope])
    assert len(book.alerted) == len(before.alerted) + 1
    # A third delivery (a duplicate) alerts nothing more.
    dispatch_event(event, world.services)
    assert _reasons(world, result.run_id) == []
