"""Deal with the duplicate jobs of an attempt: cancel them, alert once, note them on the attempt.

Which job an attempt keeps and which are duplicates is ``shared.policy.duplicates.sort_out``;
this is what the three places that find duplicates (dispatch's label lookup, the reconciler's
listing, the job-state function) do about them, in one order, each step safe to repeat:

1. cancel every duplicate (``vertex.cancel_job``, the Cancel call of its kind; a
   FAILED_PRECONDITION means it is ending or ended already, which is what was wanted);
2. alert ``duplicate_job`` once per run (``rejections.alert_once``: claimed in the ledger, given
   back if the publish fails), naming the kept job and the duplicates with their console pages;
3. note the duplicates on the attempt (``Attempt.duplicate_jobs``). This comes last because it is
   what says "done": whoever sees the pair later skips the duplicates noted, so a failure in 1 or
   2 leaves them un-noted and the next delivery or tick repeats the steps (a cancel twice is
   harmless, the alert is claimed once).

A noted duplicate's states and end are never the attempt's: the job-state function answers
``DUPLICATE`` for any job of an attempt that records another job, and the reconciler follows
only the recorded job.
"""

from __future__ import annotations

import logging

from shared.adapters import vertex
from shared.adapters.ledger import Ledger, Run, RunSnapshot
from shared.config.model import Config
from shared.handlers.rejections import alert_once
from shared.logs import log
from shared.model.alerts import AlertReason
from shared.policy.duplicates import Duplicates
from shared.policy.records import console_url

logger = logging.getLogger(__name__)


def settle(
    ledger: Ledger, config: Config, run: Run, found: Duplicates, *, trigger: str
) -> tuple[int, bool, RunSnapshot]:
    """Cancel ``found.cancel``, alert once, then note them on the attempt; (the cancels that
    Vertex AI accepted, whether this call sent the alert, the run as noted).

    Raises what fails (transient: deliver again; the steps done are repeated harmlessly).
    """
    accepted = 0
    for name in found.cancel:
        try:
            vertex.cancel_job(name)
            accepted += 1
        except vertex.VertexNotFound:
            pass  # deleted since it was seen: nothing left to cancel
        except vertex.VertexRejected:
            pass  # FAILED_PRECONDITION: it is cancelling or has ended already
    others = ", ".join(f"{name} ({console_url(name)})" for name in found.cancel)
    sent = alert_once(
        ledger,
        run,
        config=config,
        trigger=trigger,
        reason=AlertReason.DUPLICATE_JOB,
        message=(
            f"attempt {found.attempt} of run {found.run_id} has more than one job with its "
            f"labels. Kept: {found.kept} ({console_url(found.kept)}). Cancelled as "
            f"duplicates: {others}. The run goes on with the kept job only; a duplicate's end "
            "never moves the run"
        ),
        what_to_do=(
            "nothing for this run. Find where the second job came from: a job created by "
            "hand or by a script copying the vd-run/vd-attempt labels, a second vertex-dispatch "
            "deployment in the same project and region, or a create retried outside dispatch; "
            "if none of these, report it with the run id (dispatch creates one job per attempt)"
        ),
        attempt=found.attempt,
    )
    snapshot = ledger.record_duplicate_jobs(found.run_id, found.attempt, found.cancel)
    log(
        logger,
        logging.WARNING,
        "duplicate job cancelled",
        labels={"run_id": found.run_id, "route": run.route, "template": run.template},
        attempt=found.attempt,
        job=found.kept,
        duplicates=list(found.cancel),
    )
    return accepted, sent, snapshot
