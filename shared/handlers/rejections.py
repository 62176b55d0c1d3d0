"""Permanent failures of a run: record them in the ledger, then alert once per run and reason.

``alert_once`` is the one way any handler alerts about a run (dispatch, the job-state function,
the owed actions, the reconciler's watchdog), in one order: claim the reason in the ledger
(compare-and-set: of concurrent senders, one wins), send, and give the claim back if the send
fails, raising a transient error so that the redelivery, or the next tick, sends it. So an alert
is neither doubled by concurrent deliveries or ticks nor lost to a failed publish. The one window
left is a process killed between the claim and the publish: the Pub/Sub copy is then lost, but
``send_alert`` writes its ERROR log line (what log-based alert policies watch) before it publishes.
The other order, sending before recording, doubles an alert whenever two deliveries or ticks race.
A copy can still go out (a publish that went through but answered too late gives the claim back,
and the redelivery sends again): every copy carries the same ``alert_id``, a function of the run,
the ``attempt`` the caller names and the reason, by which a receiver drops it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.adapters.alerts import send_alert
from shared.adapters.ledger import Ledger, Run, RunSnapshot, RunStatus
from shared.config.model import Config
from shared.model.alerts import RUN_LEVEL_ATTEMPT, Alert, Severity


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
    claim: str | None = None,
    attempt: int = RUN_LEVEL_ATTEMPT,
    only_if_unmoved: bool = False,
) -> bool:
    """Claim the alert ``reason`` for the run and send it, unless it was claimed already;
    whether this call sent it. A failed send gives the claim back and raises.

    ``claim`` is the key claimed in the run's ``alerts`` when the reason may be alerted more
    than once per run (``policy.watchdogs.alert_claim``: per attempt, per day of a wait);
    by default the reason itself: once per run. It goes to the config's alerts topic (and its
    webhook, when one is configured). ``attempt`` is the number of the attempt the alert is
    about (0: the run as a whole); with the run and the claim it makes the alert's
    ``alert_id``, so a caller must name the same attempt each time it sends the same alert
    (a number read from the event or the decision, never "the last attempt now").

    ``only_if_unmoved``: the alert says the run ends, and is sent before the end is written
    (``end_unmoved``), so it is claimed only while the run is still as ``run`` shows it (its
    alerts aside), else ``LedgerConflict``: a delivery that read the run before another one
    claimed an attempt or created a job does not alert an end that will not happen.
    """
    claim = claim or reason
    unmoved = run if only_if_unmoved else None
    if claim in run.alerts or not ledger.record_alert(run.run_id, claim, unmoved=unmoved):
        return False  # sent, or being sent by whoever claimed it
    try:
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
                attempt=attempt,
                claim=claim,
            ),
            config.alerts_topic,
            webhook=config.alert_webhook,
        )
    except Exception:
        ledger.release_alert(run.run_id, claim)
        raise
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
    attempt: int = RUN_LEVEL_ATTEMPT,
    claim: str | None = None,
) -> RunSnapshot:
    """End the run ``status`` with its alert (``reason``, ``claim`` and ``attempt`` as
    ``alert_once`` takes them): the alert first, then the end (``Ledger.end_unmoved``), both only
    while the run is still as ``snapshot`` shows it (its alerts aside): as the caller read it,
    or as its own last write left it. The one way a handler ends a run that owes an alert.

    The alert comes first because an ended run is a duplicate to every redelivery, and no
    decision records the alert for the owed-actions sweep to send: an alert whose publish failed
    after the end (its claim given back, the delivery redone) would never be sent. Both writes
    are conditional because a delivery that read the run before another claimed or took over an
    attempt, or created a job, must not end a run whose job then runs untracked
    (``LedgerConflict``, transient: the redelivery decides on the run as it is)."""
    alert_once(
        ledger,
        snapshot.run,
        config=config,
        trigger=trigger,
        reason=reason,
        message=message,
        what_to_do=what_to_do,
        claim=claim,
        attempt=attempt,
        only_if_unmoved=True,
    )
    return ledger.end_unmoved(snapshot, status)
