"""Vertex AI failing often: UNAVAILABLE on 30% of all calls, DEADLINE_EXCEEDED after 30% of creates.

Every trigger is delivered until acknowledged (bounded), eight at a time, as Pub/Sub would: each
ends with exactly one job, none is lost. A lost answer to a create that happened is the
dangerous one: the redelivery must find that job by its labels instead of creating another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from dispatch_test_support import FunctionUrls, VertexAdmin, deliver_push, job_request
from faults_test_support import deliver_until_acknowledged, report

from shared.adapters.ledger import Ledger, RunStatus
from shared.model.runkeys import request_run_key, run_id

TRIGGERS = 40
DATASET = "gs://dispatch-it-datasets/datasets/flaky-vertex/"
FAULTS = (
    # The first rule that fires decides a call's fate, so the create-specific one comes first.
    {"method": "CreateCustomJob", "code": "DEADLINE_EXCEEDED", "when": "after", "fraction": 0.3},
    {"method": "*", "code": "UNAVAILABLE", "fraction": 0.3},
)


def test_every_trigger_ends_with_one_job_while_vertex_fails_a_third_of_calls(
    functions: FunctionUrls,
    vertex: VertexAdmin,
    ledger: Ledger,
    fresh_name: Callable[[str], str],
) -> None:
    for fault in FAULTS:
        vertex.add_fault(**fault)
    requests = [
        job_request(fresh_name("flaky"), "flex-a100", {"dataset_uri": DATASET})
        for _ in range(TRIGGERS)
    ]

    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(
                lambda request: deliver_until_acknowledged(
                    lambda: deliver_push(functions.request, request)
                ),
                requests,
            )
        )

    vertex.call("DELETE", "faults")  # the test's own listings must not fail
    run_ids = [run_id(request_run_key(request.message_id, None)) for request in requests]
    jobs_per_trigger = [len(vertex.jobs(the_run_id)) for the_run_id in run_ids]
    create_statuses = Counter(call["status"] for call in vertex.create_calls())
    report(
        "vertex errors",
        triggers=TRIGGERS,
        deliveries=sum(len(statuses) for statuses in answers),
        acknowledged=sum(statuses[-1] == 200 for statuses in answers),
        create_calls=dict(create_statuses),
        jobs=sum(jobs_per_trigger),
        duplicate_jobs=sum(max(0, n - 1) for n in jobs_per_trigger),
        lost_triggers=jobs_per_trigger.count(0),
    )
    assert create_statuses["DEADLINE_EXCEEDED"] > 0  # the dangerous fault really fired
    assert all(statuses[-1] == 200 for statuses in answers), answers
    assert jobs_per_trigger == [1] * TRIGGERS
    for the_run_id in run_ids:
        run = ledger.get_run(the_run_id).run
        assert run.status is RunStatus.SUBMITTED
        assert len(run.attempts) == 1 and run.attempts[0].job_name
