"""A GPU-hour budget under concurrent deliveries to the served on_request function: submissions
racing for the one job the budget fits create that job once; the others wait WAITING_BUDGET,
each alerted once, however the deliveries interleave (threads of one gunicorn worker, as Cloud
Run serves them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from dispatch_test_support import (
    AlertsReader,
    FunctionUrls,
    VertexAdmin,
    deliver_push,
    deliver_until_acknowledged,
    job_request,
    of_run,
)

from emulator_stack import LOCAL_PROJECT
from shared.adapters import clients
from shared.adapters.ledger import BUDGETS_SUFFIX, DEFAULT_COLLECTION, Ledger, RunStatus
from shared.model.alerts import AlertReason
from shared.model.budgets import template_scope
from shared.model.runkeys import request_run_key, run_id

DATASET = "gs://dispatch-it-datasets/datasets/budgeted/"
TEMPLATE = "budget-a100"
SUBMISSIONS = 4


@pytest.fixture
def empty_book(ledger: Ledger) -> Iterator[None]:
    """The template's budget book, emptied before and after: the session's functions share it."""
    document = (
        clients.firestore_client(LOCAL_PROJECT)
        .collection(DEFAULT_COLLECTION + BUDGETS_SUFFIX)
        .document("template-" + TEMPLATE)
    )
    document.delete()
    yield
    document.delete()


def test_racing_submissions_near_the_limit_create_one_job(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    alerts: AlertsReader,
    fresh_name: Callable[[str], str],
    empty_book: None,
) -> None:
    messages = [
        job_request(fresh_name("budget"), TEMPLATE, {"dataset_uri": DATASET})
        for _ in range(SUBMISSIONS)
    ]

    with ThreadPoolExecutor(SUBMISSIONS) as pool:
        statuses = list(
            pool.map(
                lambda m: deliver_until_acknowledged(deliver_push, functions.request, m), messages
            )
        )

    assert all(answered[-1] == 200 for answered in statuses), statuses
    run_ids = [run_id(request_run_key(m.message_id, None)) for m in messages]
    runs = {rid: ledger.get_run(rid) for rid in run_ids}
    assert all(snapshot is not None for snapshot in runs.values())
    created = [job for rid in run_ids for job in vertex.created_jobs(rid)]
    assert len(created) == 1
    statuses_of = sorted(s.run.status.value for s in runs.values() if s is not None)
    assert statuses_of == ["SUBMITTED"] + ["WAITING_BUDGET"] * (SUBMISSIONS - 1)
    [(book, _)] = ledger.budget_books([template_scope(TEMPLATE)])
    assert [r.run_id for r in book.reservations.values()] == [created[0]["labels"]["vd-run"]]
    published = alerts.pull()
    for rid, snapshot in runs.items():
        assert snapshot is not None
        waits = [a for a in of_run(published, rid) if a["body"]["reason"] == AlertReason.BUDGET]
        expected = 1 if snapshot.run.status is RunStatus.WAITING_BUDGET else 0
        assert len(waits) == expected, (rid, waits)
