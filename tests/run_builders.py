"""Builders for the run model (``shared.model.runs``) and the constants the tests share.

A test in any folder imports it by name (``from run_builders import NOW, a_run, an_attempt``),
as it imports its own folder's ``*_builders`` or ``*_test_support`` module: pytest puts ``tests/``
on ``sys.path`` when it loads ``tests/conftest.py`` (its default "prepend" import mode), as it puts
the folder of each test file it collects.

Each builder makes a valid record from defaults that fit together (run ``RUN_ID`` of route
``imagenet-daily`` and template ``resnet-a100`` in project ``acme-ml``; its attempts ask for
FLEX_START machines in us-central1, each claimed at ``NOW``): a test passes, by keyword, only
what it is about. A table with its own shape (attempts named by how their job failed, say)
keeps a thin local builder that calls these.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from emulator_stack import LOCAL_PROJECT
from shared.model.runs import INTENT_STATE, Attempt, RetryPlan, Run, RunStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
"""The tests' present: give the code under test ``now=NOW`` and build other times from it."""

PROJECT = "acme-ml"
PROJECT_NUMBER = "123456789012"  # Vertex AI names the jobs it creates by the project's number
REGION = "us-central1"
EAST_REGION = "us-east4"


def parent_of(region: str = REGION, project: str = PROJECT) -> str:
    """Where an attempt's job is created: ``projects/P/locations/R``."""
    return f"projects/{project}/locations/{region}"


PARENT = parent_of()
EAST_PARENT = parent_of(EAST_REGION)
JOB_PARENT = parent_of(project=PROJECT_NUMBER)
"""The parent in the names of the jobs Vertex AI creates (the project by number)."""
LOCAL_PARENT = parent_of(project=LOCAL_PROJECT)
"""The parent in the local emulators' project."""


def job_name(number: int = 1, parent: str = JOB_PARENT) -> str:
    """The name of a custom job (19 digits, as Vertex AI numbers them): job 1, job 2..."""
    return f"{parent}/customJobs/{1000000000000000000 + number}"


RUN_ID = "r-0123456789abcdef01234567"
RUN_KEY = "gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000"
ROUTE = "imagenet-daily"
TEMPLATE_NAME = "resnet-a100"
TRIGGER: Mapping[str, Any] = {
    "kind": "ObjectFinalized",
    "bucket": "acme-datasets",
    "name": "imagenet/2026-12-01/_SUCCESS",
    "generation": 1733100000000000,
    "event_time": NOW,
}
"""The trigger of run ``RUN_ID``, a dataset's success marker (some of the fields the ledger has)."""

# Placements as the ledger records them (shared.policy.records.placement_record).
FLEX_2H: Mapping[str, Any] = {"flex_start": {"max_wait": "7200s"}}
POOL: Mapping[str, Any] = {"persistent_resource": "a100-pool"}


def an_attempt(
    number: int = 1,
    *,
    placement: Mapping[str, Any] | None = None,
    region: str = REGION,
    parent: str | None = None,
    intent_at: datetime = NOW,
    job_name: str | None = None,
    state: str = INTENT_STATE,
    error: Mapping[str, Any] | None = None,
    decision: Mapping[str, Any] | None = None,
    cancel_requested_at: datetime | None = None,
) -> Attempt:
    """Attempt ``number`` as claimed at ``intent_at``: an intent, unless ``job_name`` and
    ``state`` say its job exists. ``placement`` defaults to (a copy of) ``FLEX_2H``, ``parent``
    to ``region``'s in ``PROJECT``."""
    return Attempt(
        number=number,
        placement=copy.deepcopy(FLEX_2H) if placement is None else placement,
        region=region,
        parent=parent_of(region) if parent is None else parent,
        intent_at=intent_at,
        job_name=job_name,
        state=state,
        error=error,
        decision=decision,
        cancel_requested_at=cancel_requested_at,
    )


def a_run(
    status: RunStatus = RunStatus.ACCEPTED,
    *attempts: Attempt,
    run_id: str = RUN_ID,
    run_key: str = RUN_KEY,
    route: str = ROUTE,
    template: str = TEMPLATE_NAME,
    trigger: Mapping[str, Any] | None = None,
    params: Mapping[str, str] | None = None,
    alerts: tuple[str, ...] = (),
    notices: tuple[str, ...] = (),
    next_retry: RetryPlan | None = None,
    operator_grant: int | None = None,
    recovery_published_at: datetime | None = None,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
) -> Run:
    """Run ``run_id`` in ``status`` with ``attempts``, oldest first (none: never claimed).

    ``trigger`` defaults to (a copy of) ``TRIGGER``, ``params`` to none. A value passed is kept as
    it is, not copied: a test of what a store does with an odd value gets that very value.
    """
    return Run(
        run_id=run_id,
        run_key=run_key,
        route=route,
        template=template,
        trigger=copy.deepcopy(TRIGGER) if trigger is None else trigger,
        params={} if params is None else params,
        status=status,
        attempts=attempts,
        alerts=alerts,
        notices=notices,
        next_retry=next_retry,
        operator_grant=operator_grant,
        recovery_published_at=recovery_published_at,
        created_at=created_at,
        updated_at=updated_at,
    )


def a_retry_plan(
    attempt: int = 2, *, at: datetime = NOW, placement_index: int = 0, reason: str = "capacity"
) -> RetryPlan:
    """The plan of a run waiting for ``attempt``, due ``at``."""
    return RetryPlan(at=at, attempt=attempt, placement_index=placement_index, reason=reason)
