"""The alert webhook against a real HTTP server on 127.0.0.1: what it sends, and how it fails."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shared.adapters.webhook import alert_text, notify
from shared.config.model import AlertWebhook, WebhookFormat
from shared.model.alerts import Alert, Severity

URL_ENV = "ALERT_WEBHOOK_URL"
PARENT = "projects/123456789012/locations/us-central1"

ALERT = Alert(
    run_id="r-0123456789abcdef01234567",
    run_key="gcs:acme-datasets/imagenet/2026-12-01/@1733100000000000",
    template="resnet-a100",
    trigger="gs://acme-datasets/imagenet/2026-12-01/_SUCCESS (generation 1733100000000000)",
    reason="retries_exhausted",
    message="attempt 3 failed: the training code exited with status 137",
    what_to_do="fix the training code, then `vertex-dispatch retry r-0123456789abcdef01234567`",
    attempts=(
        {
            "number": 1,
            "placement": {"flex_start": {"max_wait": "7200s"}},
            "job_name": f"{PARENT}/customJobs/1000000000000000001",
            "state": "JOB_STATE_FAILED",
            "error": {
                "code": 3,
                "message": "The replica workerpool0-0 exited with a non-zero status of 137.",
                "class": "user_code",
            },
        },
    ),
    severity=Severity.CRITICAL,
)


@dataclass
class Receiver:
    """What the local webhook server was sent, and how it answers."""

    status: int = 200
    delay_seconds: float = 0.0
    received: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            length = int(self.headers["Content-Length"])
            state.received.append(
                {
                    "content_type": self.headers["Content-Type"],
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            time.sleep(state.delay_seconds)
            try:
                self.send_response(state.status)
                self.end_headers()
                self.wfile.write(b"ok")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting: what the timeout case wants

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/alerts"
    yield state
    server.shutdown()
    server.server_close()


def settings(fmt: WebhookFormat = WebhookFormat.SLACK, timeout: float = 2.0) -> AlertWebhook:
    return AlertWebhook(url_env=URL_ENV, format=fmt, timeout=timedelta(seconds=timeout))


@pytest.mark.parametrize(
    ("fmt", "expected_keys"),
    [
        (WebhookFormat.SLACK, {"text", "unfurl_links"}),
        (WebhookFormat.CHAT, {"text"}),
    ],
)
def test_posts_the_alert_as_the_format_expects(
    receiver: Receiver, fmt: WebhookFormat, expected_keys: set[str]
) -> None:
    assert notify(ALERT, settings(fmt), environ={URL_ENV: receiver.url}) is True

    [request] = receiver.received
    assert request["content_type"].startswith("application/json")
    assert set(request["body"]) == expected_keys
    text = request["body"]["text"]
    assert ALERT.run_id in text
    assert "retries_exhausted" in text
    assert "exited with a non-zero status of 137" in text
    assert ALERT.what_to_do in text


def test_alert_text_names_run_reason_attempts_and_fix() -> None:
    lines = alert_text(ALERT).splitlines()

    assert lines[0] == (
        "*CRITICAL* vertex-dispatch `retries_exhausted`: run `r-0123456789abcdef01234567` "
        "(template `resnet-a100`)"
    )
    assert lines[3].startswith("*What to do:* fix the training code")
    assert lines[4].startswith("• attempt 1: JOB_STATE_FAILED on projects/123456789012/")
    # The webhook carries the id too, so a reader (or a bot) can tell a copy of the alert.
    assert lines[-1] == "Alert id: `r-0123456789abcdef01234567/0/retries_exhausted`"


@pytest.mark.parametrize(
    ("status", "delay_seconds", "timeout", "expected_in_log"),
    [
        (500, 0.0, 2.0, "HTTP 500"),
        (404, 0.0, 2.0, "HTTP 404"),
        (200, 3.0, 0.3, "timed out"),
    ],
    ids=["server-error", "not-found", "hangs-past-timeout"],
)
def test_a_failing_receiver_is_logged_never_raised(
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
    status: int,
    delay_seconds: float,
    timeout: float,
    expected_in_log: str,
) -> None:
    receiver.status = status
    receiver.delay_seconds = delay_seconds

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="shared.adapters.webhook"):
        delivered = notify(ALERT, settings(timeout=timeout), environ={URL_ENV: receiver.url})
    elapsed = time.monotonic() - started

    assert delivered is False
    assert elapsed < timeout + 1.0  # the timeout is honoured, not the receiver's delay
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert expected_in_log in record.getMessage()
    assert URL_ENV in record.getMessage()
    assert receiver.url not in record.getMessage()  # the URL is a secret: never logged


@pytest.mark.parametrize(
    ("environ", "expected_in_log"),
    [
        ({}, "is not set"),
        ({URL_ENV: "  "}, "is not set"),
        ({URL_ENV: "file:///etc/passwd"}, "not an http(s) URL"),
    ],
    ids=["unset", "blank", "file-scheme"],
)
def test_a_missing_or_unsafe_url_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture, environ: dict[str, str], expected_in_log: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="shared.adapters.webhook"):
        assert notify(ALERT, settings(), environ=environ) is False

    [record] = caplog.records
    assert expected_in_log in record.getMessage()
    assert URL_ENV in record.getMessage()


def test_a_refused_connection_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="shared.adapters.webhook"):
        delivered = notify(ALERT, settings(), environ={URL_ENV: "http://127.0.0.1:9/hook"})

    assert delivered is False
    assert "failed" in caplog.records[0].getMessage()


def test_no_webhook_configured_does_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="shared.adapters.webhook"):
        assert notify(ALERT, None) is False
    assert caplog.records == []
