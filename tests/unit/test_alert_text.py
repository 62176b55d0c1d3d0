"""Alert text is a sentence for a human: what went wrong in words, then the error's message; never
a Python class name such as ``RequestRejected:`` (shared.model.errors.human_message, used by
dispatch for every alert it builds from an exception)."""

from __future__ import annotations

import pytest

from shared.adapters import storage, vertex  # noqa: F401
from shared.adapters.ledger import LedgerRejected, RunNotFound
from shared.adapters.vertex import QuotaExceeded, VertexPermissionDenied
from shared.config import problems  # noqa: F401

# Import every module that defines an error, so that the walk below finds them all.
from shared.decode.routing import RequestRejected
from shared.model.errors import DispatchError, MalformedEvent, PermanentError, human_message

PROBLEM = "job request body.template 'x' names no template; use one of: resnet-a100"


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (RequestRejected(PROBLEM), f"The job request was refused: {PROBLEM}"),
        (MalformedEvent("data.name is empty"), "The event could not be read: data.name is empty"),
        (
            LedgerRejected("ledger create of run r-1 was denied"),
            "The run ledger (Firestore) refused the call: ledger create of run r-1 was denied",
        ),
        (
            VertexPermissionDenied("grant roles/aiplatform.user"),
            "Vertex AI denied the function permission: grant roles/aiplatform.user",
        ),
        (QuotaExceeded("A100 quota 0"), "A Vertex AI quota refused the job: A100 quota 0"),
        (
            RunNotFound("run r-1 was never opened"),
            "The run is not in the ledger: run r-1 was never opened",
        ),
        (PermanentError("no"), "The trigger cannot be acted on: no"),
    ],
)
def test_human_message_table(error: DispatchError, text: str) -> None:
    assert human_message(error) == text


def _every_error_class() -> set[type[DispatchError]]:
    found: set[type[DispatchError]] = set()
    todo: list[type[DispatchError]] = [DispatchError]
    while todo:
        kind = todo.pop()
        found.add(kind)
        todo.extend(kind.__subclasses__())
    return found


@pytest.mark.parametrize("kind", sorted(_every_error_class(), key=lambda k: k.__qualname__))
def test_no_error_shows_its_class_name(kind: type[DispatchError]) -> None:
    error = kind.__new__(kind)  # some take more than a message (InvalidConfig: its problems)
    Exception.__init__(error, "what happened")
    text = human_message(error)
    assert kind.__name__ not in text
    assert text[:1].isupper() and text.endswith(": what happened")
