"""The alert id: a pure function of (run, attempt, reason), the same for every copy of an alert
and different for any two alerts, carried by the body, the attributes and the webhook text."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from shared.adapters.webhook import alert_text
from shared.model.alerts import RUN_LEVEL_ATTEMPT, Alert, AlertReason, alert_id
from shared.policy.watchdogs import alert_claim

RUN = "r-0123456789abcdef01234567"
OTHER_RUN = "r-fedcba9876543210fedcba98"

ALERT = Alert(
    run_id=RUN,
    run_key="request-key:retrain-2026-12-01",
    template="resnet-a100",
    trigger="message msg-1",
    reason=AlertReason.DUPLICATE_JOB,
    message="two jobs for attempt 2",
    what_to_do="nothing: the second was cancelled",
    attempt=2,
)


@pytest.mark.parametrize(
    ("run_id", "attempt", "reason", "expected"),
    [
        (RUN, 1, "no_placement", f"{RUN}/1/no_placement"),
        (RUN, 2, AlertReason.DUPLICATE_JOB, f"{RUN}/2/duplicate_job"),
        (RUN, RUN_LEVEL_ATTEMPT, AlertReason.INVALID_REQUEST, f"{RUN}/0/invalid_request"),
        (OTHER_RUN, 12, "watchdog_overdue_wait", f"{OTHER_RUN}/12/watchdog_overdue_wait"),
    ],
)
def test_the_id_is_run_attempt_and_reason(
    run_id: str, attempt: int, reason: str, expected: str
) -> None:
    assert alert_id(run_id, attempt, reason) == expected


def test_different_alerts_never_share_an_id() -> None:
    keys = list(
        itertools.product(
            (RUN, OTHER_RUN), (0, 1, 2, 10, 11), [str(reason) for reason in AlertReason]
        )
    )
    assert len({alert_id(*key) for key in keys}) == len(keys)


def test_a_copy_of_an_alert_carries_the_same_id_whatever_else_changed() -> None:
    # A resend is built again from the run as read then: its attempts summary, its message
    # and its trigger line may differ; it is still the same alert.
    copy = replace(
        ALERT,
        message="two jobs for attempt 2 (sent again)",
        attempts=({"number": 1}, {"number": 2}),
        trigger="message msg-1 (redelivered)",
    )
    assert copy.alert_id == ALERT.alert_id == f"{RUN}/2/duplicate_job"
    assert copy.to_json()["alert_id"] == ALERT.to_json()["alert_id"] == ALERT.alert_id
    assert copy.attributes()["alert_id"] == ALERT.alert_id


def test_another_attempt_or_reason_is_another_alert() -> None:
    assert replace(ALERT, attempt=3).alert_id != ALERT.alert_id
    assert replace(ALERT, reason=AlertReason.QUOTA).alert_id != ALERT.alert_id


def test_the_id_is_in_the_body_the_attributes_and_the_webhook_text() -> None:
    body, attributes = ALERT.to_json(), ALERT.attributes()

    assert body["schema"] == attributes["schema"] == "vertex-dispatch.alert.v1"
    assert body["alert_id"] == attributes["alert_id"] == f"{RUN}/2/duplicate_job"
    assert f"`{RUN}/2/duplicate_job`" in alert_text(ALERT)


def test_an_alert_about_the_run_as_a_whole_is_attempt_zero() -> None:
    run_level = Alert(
        run_id=RUN,
        run_key="rejected-event:x#1",
        template=None,
        trigger="event 1",
        reason=AlertReason.INVALID_REQUEST,
        message="the body is not JSON",
        what_to_do="send a JSON object",
    )
    assert run_level.alert_id == f"{RUN}/0/invalid_request"


def test_a_reason_alerted_once_per_scope_has_an_id_per_scope() -> None:
    # The no-placement watchdog alerts at most once a day of a wait, each day under its own
    # ledger claim: each day's alert is a new alert (a receiver must not drop it as a copy),
    # and each copy of one day's alert keeps that day's id.
    since = datetime(2026, 12, 1, 6, tzinfo=UTC)
    days = [
        replace(ALERT, reason=AlertReason.NO_PLACEMENT, claim=alert_claim("no_placement", since, d))
        for d in ("day1", "day2")
    ]
    assert days[0].alert_id != days[1].alert_id
    assert days[0].alert_id == replace(days[0], message="sent again").alert_id
    assert days[0].alert_id.startswith(f"{RUN}/2/no_placement@")
    assert replace(ALERT, claim=None).alert_id == ALERT.alert_id == f"{RUN}/2/duplicate_job"
