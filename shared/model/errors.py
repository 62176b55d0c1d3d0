"""The project's one error tree.

Every failure the project raises on purpose is a ``DispatchError``. The two branches tell the
Cloud Function what to do with the event that caused it:

- ``TransientError``: the platform should deliver the event again (raise, HTTP 500);
- ``PermanentError``: delivering again cannot help; the error is recorded and alerted, and the
  event is acknowledged (return, HTTP 200), so bad input never becomes a retry storm.

Subclasses name what went wrong and, through their message, what to change; each says in
``headline`` what it means for a human, and ``human_message`` makes the two one sentence (an
alert's text never shows a Python class name).
"""

from __future__ import annotations


class DispatchError(Exception):
    """Root of every error vertex-dispatch raises on purpose."""

    transient: bool = False
    headline: str = "vertex-dispatch could not handle the trigger"


class TransientError(DispatchError):
    """A failure that may pass by itself: retry the event."""

    transient = True


class PermanentError(DispatchError):
    """A failure that retrying cannot fix: record, alert, acknowledge."""

    headline = "the trigger cannot be acted on"


class BackendUnavailable(TransientError):
    """A Google Cloud service (or its emulator) did not answer or answered UNAVAILABLE."""


class ConfigError(PermanentError):
    """The configuration file is invalid; the message names the file, the key path and the fix."""

    headline = "the configuration does not work for this trigger"


class PermissionMissing(PermanentError):
    """The function's identity may not make a call it needs; the message names the permission
    and the role to grant. The run fails (not rejected): once granted, an operator retries it."""

    headline = "Google Cloud denied the function a permission it needs"


class MalformedEvent(PermanentError):
    """The CloudEvent or message body cannot be decoded."""

    headline = "the event could not be read"


class InvalidJobSpec(PermanentError):
    """The CustomJob that a request would create breaks a Vertex AI rule or a guard."""

    headline = "the job breaks a Vertex AI rule or a guard"


class RetryRejected(PermanentError):
    """A retry message that cannot be acted on: unknown run, template gone, out of budget."""

    headline = "the retry cannot be acted on"


def human_message(error: DispatchError) -> str:
    """``error`` as one sentence for a human: what it means (its ``headline``), then its message."""
    return f"{error.headline[:1].upper()}{error.headline[1:]}: {error}"
