"""Every timing rule of the runtime in one place: leases, republish delays, settle times.

Each constant says why it has its value. The user's own timings (max waits, backoff, watchdog
grace) are config (``shared.config.model``); these are the project's, the same for every config.
"""

from __future__ import annotations

from datetime import timedelta

# Dispatch: claiming an attempt
INTENT_LEASE = timedelta(minutes=5)
"""How long an intent without a job is presumed to be in the hands of a live delivery.

Longer than any create call (60 s timeout) plus the ledger writes around it, so a takeover never
races a creator that is still working."""

COOLDOWNS_READ_EVERY = timedelta(seconds=30)
"""How long an instance reuses the placement cooldowns it read (``Ledger.placement_cooldowns``).

Submission reads them for every chain with a choice left, which would add a ledger read to every
submission; a cooldown lasts minutes (30 by default), so seeing another instance's new one up to
this much later changes nothing that matters, and this instance's own writes are seen at once."""

PLACEMENT_HISTORY_READ_EVERY = timedelta(minutes=5)
"""How long an instance reuses the recent runs of a template it read for learned placement order
(``Ledger.recent_runs``, ``handlers.placement_orders``).

A run of a ``placement_order: learned`` template reads them at its first walk; without reuse a
busy instance would query up to 200 runs per submission. The order is learned over days
(``policy.placement_order.LEARNING_WINDOW``), so a history up to five minutes old orders a chain
as well as a fresh one."""

# Owed actions: retry messages
RETRY_REPUBLISH_AFTER = timedelta(minutes=10)
"""How long a published retry may go unclaimed before it is published again: longer than Pub/Sub
takes to redeliver a message through its retry policy's longest backoff (600 s)."""

# Reconcile
LIST_WINDOW_MARGIN = timedelta(minutes=10)
"""Listed jobs are created after their intent; the margin absorbs clock skew between machines."""

FLEX_START_DEFAULT_MAX_WAIT = timedelta(days=1)
"""The max wait Vertex AI applies to a FLEX_START job that sets none."""

RECOVERY_REPUBLISH_AFTER = timedelta(minutes=10)
"""A recovery retry is published again only this long after the last one: dispatch acts on one
in seconds, so a run still stuck by then lost it. Every tick would hand a slow, backlogged
dispatch one more copy per stuck run (what sank the first 2,000-trigger soak, for hints)."""

STUCK_INTENT_ALERT_AFTER = timedelta(minutes=30)
"""Recovery of a stale intent is tried from INTENT_LEASE on; a human is told once it lasts this."""

# Reading a job's end
ERROR_SETTLE_TIME = timedelta(minutes=3)
"""How long after its end a FAILED job without an error is not decided yet.

Google's "Understand the custom training service" page
(https://cloud.google.com/vertex-ai/docs/training/understanding-training-service): "About one
minute after a job ends, Vertex AI sets the error code on the training job object, based on the
exit code." A read in that minute (a log-sink hint comes right at the end) sees FAILED with no
error, which is UNKNOWN and alerted instead of retried. Three times the stated minute leaves room
for "about" and for a reconcile tick to come round; after it, no error is the service's answer.
"""

SERVICE_EXPIRY_WINDOW = timedelta(minutes=10)
"""A CANCELLED FLEX_START job that never started counts as a service-side max-wait expiry only
when it ended this soon after its deadline: the service ends a job when its wait runs out, while
the reconciler's watchdog cancels only after the max wait plus ``watchdog_grace`` (30 minutes by
default) and a human may cancel at any time. Ten minutes absorbs the service's own delay."""

VERTEX_THROTTLE_PAUSE = timedelta(minutes=1)
"""After a tick's Vertex AI call is throttled (RESOURCE_EXHAUSTED, a read quota per minute and
region), the reconciler makes no Vertex AI call for this long, doubled for each throttled tick in
a row (1, 2, 4, 8 minutes...): the quota refills per minute, and a paused tick leaves the quota to
dispatch's creates and the hints' reads instead of spending it on calls that would be refused."""

VERTEX_THROTTLE_PAUSE_MAX = timedelta(minutes=15)
"""The longest such pause: past it, a throttle that lasts (another workload on the project's
quota) is tried again every 15 minutes, each try one call, while hints keep recording states."""

# Deadlines (``start_by``)
DEADLINE_MIN_USEFUL_WAIT = timedelta(minutes=10)
"""A run whose deadline is less than this away is not tried again: it has missed its deadline
(``policy.deadlines.too_late``). A create, its job's provisioning (minutes even on demand) and
the reconcile tick that sees it RUNNING take about this long, so a FLEX_START wait cut shorter
would expire before Dynamic Workload Scheduler could place it, and any other job would start past
the deadline anyway. The deadline-missed alert then comes now, not after a wait bound to fail."""
