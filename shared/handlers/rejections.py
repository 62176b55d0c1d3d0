"""Permanent failures of a run: record them in the ledger, then alert once per run and reason.

``alert_once`` is the one way any handler alerts about a run (dispatch, the job-state function,
the owed actions, the reconciler's watchdog). The order is chosen so that nothing is lost: the
ledger records the outcome first (so a redelivery does not act again), the alert is sent only when
the run has not sent that reason yet, and the reason is recorded only after the publish succeeded.
A failed publish raises a transient error and the redelivery (or the next tick) sends it. The
other order, claiming the reason before sending, would lose the alert whenever the publish fails
after the claim; this order's worst case is a second copy when two deliveries race, which the
receiver sees as the same ``run_id`` and ``reason``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.adapters.alerts import send_alert
from shared.adapters.ledger import Ledger, Run, RunSnapshot, RunStatus
from shared.config.model import Config
from shared.model.alerts import Alert, Severity


def attempts_summary(run: Run) -> tuple[Mapping[str, Any], ...]:
    """Each attempt as an alert shows it, oldest first."""
    return tuple(
        {
            "number": attempt.number,
            "placement": dict(attempt.placement),
            "job_name": attempt.job_name,
            "state": attempt.state,
            "error": dict(attempt.error) if attempt.error else None,
        }
        for attempt in run.attempts
    )


def alert_once(
    ledger: Ledger,
    run: Run,
    *,
    config: Config,
    trigger: str,
    reason: str,
    message: str,
    what_to_do: str,
    severity: Severity = Severity.ERROR,
) -> bool:
    """Send the alert ``reason`` for the run unless it was sent already, then record it; whether
    it was sent now.

    It goes to the config's alerts topic (and its webhook, when one is configured).
    """
    if reason in run.alerts:
        return False
    send_alert(
        Alert(
            run_id=run.run_id,
            run_key=run.run_key,
            template=run.template or None,
            trigger=trigger,
            reason=reason,
            message=message,
            what_to_do=what_to_do,
            attempts=attempts_summary(run),
            severity=severity,
        ),
        config.alerts_topic,
        webhook=config.alert_webhook,
    )
    ledger.record_alert(run.run_id, reason)
    return True


def finish_run(
    ledger: Ledger,
    snapshot: RunSnapshot,
    status: RunStatus,
    *,
    config: Config,
    trigger: str,
    reason: str,
    message: str,
    what_to_do: str,
) -> RunSnapshot:
    """Move the run to the terminal ``status`` (if it is not there yet) and alert once."""
    if snapshot.run.status is not status:
        snapshot = ledger.set_status(snapshot.run.run_id, status)
    alert_once(
        ledger,
        snapshot.run,
        config=config,
        trigger=trigger,
        reason=reason,
        message=message,
        what_to_do=what_to_do,
    )
    return snapshot
