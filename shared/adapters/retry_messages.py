"""Retry messages: the next attempt of a run, published to the requests topic.

Retries go through the same door as new work (docs/architecture.md, "Events are hints, state is
read"): dispatch decodes the message (``shared.decode.events._decode_retry``), validates the attempt
again and claims it exactly once, so a retry published twice still makes one job. That is what lets
the job-state function publish a retry that is due at once, and the reconciler publish one whose
backoff has passed, without coordinating: whoever publishes second changes nothing.

The message (docs/messages.md, "Retry"): attribute ``vertex_dispatch_kind=retry`` and the body
``{"run_id", "attempt", "placement_index", "reason"}``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from shared.adapters import clients
from shared.decode.events import KIND_ATTRIBUTE, MAX_REASON_CHARS, MessageKind
from shared.model.errors import TransientError

if TYPE_CHECKING:
    from google.cloud import pubsub_v1

    from shared.model.runs import RetryPlan

PUBLISH_TIMEOUT_SECONDS = 30.0
OPERATOR_REASON = "operator"
"""The reason of a retry a person asked for (``vertex-dispatch retry``), for people reading it.
It grants nothing: what lets the attempt reopen a run or exceed the template's attempts is the
run's ``operator_grant`` in the ledger, which the command writes before it publishes."""


class RetryNotPublished(TransientError):
    """The retry message could not be published; the next delivery or reconcile publishes it."""


def retry_body(run_id: str, plan: RetryPlan) -> dict[str, object]:
    """The JSON body of the retry message for ``plan``."""
    return {
        "run_id": run_id,
        "attempt": plan.attempt,
        "placement_index": plan.placement_index,
        "reason": plan.reason[:MAX_REASON_CHARS],  # dispatch refuses longer reasons
    }


def publish_retry(
    run_id: str,
    plan: RetryPlan,
    topic: str,
    publisher: pubsub_v1.PublisherClient | None = None,
) -> str:
    """Publish the retry ``plan`` of run ``run_id`` on ``topic``; the message id.

    Raises ``RetryNotPublished`` (transient) on any failure: the ledger still says the retry is
    due, so the caller's redelivery, or the next reconcile, publishes it.
    """
    data = json.dumps(retry_body(run_id, plan), ensure_ascii=False).encode()
    publisher = publisher or clients.publisher_client()
    try:
        future = publisher.publish(
            topic,
            data,
            timeout=PUBLISH_TIMEOUT_SECONDS,
            # Message attributes; mypy would match a ** mapping against named parameters too.
            **{KIND_ATTRIBUTE: MessageKind.RETRY.value},  # type: ignore[arg-type]
        )
        return future.result(timeout=PUBLISH_TIMEOUT_SECONDS)
    # Any failure must leave the retry to be published again, never lost or half-done.
    except Exception as error:
        raise RetryNotPublished(
            f"retry of run {run_id} (attempt {plan.attempt}, placement {plan.placement_index}) "
            f"was not published on {topic}: {error!r}; it stays due in the ledger and is "
            "published again. If this persists, check that the topic exists and the function's "
            "service account has roles/pubsub.publisher on it"
        ) from error
