"""`vertex-dispatch status` on runs WAITING_DATA: what each waits for and when it will have it.

Tables of the pure parts (``tooling.data_status``): the lines under a waiting run's row and its
JSON map, from a quiet dataset's live count or a manifest's recorded missing files; the count a
listing gives; and, without credentials for Cloud Storage, a listing that says why it was not made
instead of failing the command.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import cast

import pytest
from cli_test_support import remove_credentials
from run_builders import NOW, a_run

from shared.adapters import clients
from shared.adapters.ledger import Ledger
from shared.config.model import (
    DEFAULT_DATA_TIMEOUT,
    Completion,
    Config,
    GcsRoute,
    PubSubRoute,
    QuietRule,
)
from shared.model.data_waits import ManifestWait, QuietWait
from shared.model.runs import Run, RunStatus
from shared.policy.quiet import Tally
from tooling import status_table
from tooling.data_status import (
    quiet_rule_of,
    read_listings,
    wait_view,
)
from tooling.operator import run_document

DATASET_URI = "gs://acme-exports/exports/2026-12-01/"
RULE = QuietRule("exports/{date}/", quiet_for=timedelta(minutes=10), min_objects=3)
SINCE = NOW - timedelta(hours=1)


def waiting_on_dataset(version: int = 1) -> Run:
    wait = QuietWait(DATASET_URI, version=version, since=SINCE, latest_version=1)
    return replace(a_run(RunStatus.WAITING_DATA), route="exports-quiet", data_wait=wait)


def waiting_on_manifest(missing: int, files: int = 10, checked: bool = True) -> Run:
    wait = ManifestWait(
        "gs://acme-datasets/m/manifest.json",
        files=files,
        missing_count=missing,
        missing=tuple(f"gs://acme-datasets/m/part-{n}" for n in range(min(missing, 20))),
        since=SINCE,
        checked_at=NOW - timedelta(minutes=1) if checked else None,
    )
    return replace(a_run(RunStatus.WAITING_DATA), data_wait=wait)


@pytest.mark.parametrize(
    ("listing", "line", "fields"),
    [
        pytest.param(
            Tally(5, NOW - timedelta(minutes=4)),
            "5 objects, newest written 2026-12-01T11:56:00Z; complete at 2026-12-01T12:06:00Z "
            "(in 6m00s) if nothing more is written (quiet_for 10m00s)",
            {"objects": 5, "complete_at": "2026-12-01T12:06:00Z"},
            id="still-being-written",
        ),
        pytest.param(
            Tally(3, NOW - timedelta(minutes=10)),
            "3 objects, newest written 2026-12-01T11:50:00Z; quiet since 2026-12-01T12:00:00Z: "
            "complete; the reconciler's next tick starts it",
            {"objects": 3, "complete_at": "2026-12-01T12:00:00Z"},
            id="quiet-exactly-now",
        ),
        pytest.param(
            Tally(2, NOW - timedelta(hours=1)),
            "2 objects, newest written 2026-12-01T11:00:00Z; needs 1 more object (min_objects 3);"
            " gives up 2026-12-02T11:00:00Z (in 23h00m) if none is written",
            {"objects": 2, "needs_objects": 1, "gives_up_at": "2026-12-02T11:00:00Z"},
            id="quiet-but-too-few",
        ),
        pytest.param(
            Tally(0, None),
            "0 objects; needs 3 more objects (min_objects 3); gives up 2026-12-02T11:00:00Z "
            "(in 23h00m) if none is written",
            {"objects": 0, "newest_object": None, "needs_objects": 3},
            id="directory-empty-gives-up-from-since",
        ),
        pytest.param(
            Tally(1, NOW - timedelta(hours=25)),
            "1 object, newest written 2026-11-30T11:00:00Z; needs 2 more objects (min_objects "
            "3); gives up 2026-12-02T11:00:00Z (in 23h00m) if none is written",
            {"objects": 1, "needs_objects": 2, "gives_up_at": "2026-12-02T11:00:00Z"},
            # the reconciler's deadline: data_timeout after the later of the newest object and
            # the start of the wait (policy.quiet.overdue_at)
            id="written-before-the-wait-gives-up-from-since",
        ),
        pytest.param(
            "Cloud Storage not read: 403 no grant",
            "objects not counted (Cloud Storage not read: 403 no grant): the ledger keeps no count",
            {"listed": False, "not_listed_because": "Cloud Storage not read: 403 no grant"},
            id="storage-unreadable",
        ),
    ],
)
def test_a_waiting_dataset_says_what_it_has_and_when_it_completes(
    listing: Tally | str, line: str, fields: dict[str, object]
) -> None:
    view = wait_view(waiting_on_dataset(), RULE, listing, NOW, DEFAULT_DATA_TIMEOUT)

    assert view is not None
    assert view.lines == (
        "dataset gs://acme-exports/exports/2026-12-01/ (version 1), waiting since "
        "2026-12-01T11:00:00Z",
        line,
    )
    assert view.document["kind"] == "quiet" and view.document["version"] == 1
    assert view.document["listed"] is isinstance(listing, Tally)
    assert {key: view.document[key] for key in fields} == fields


def test_a_waiting_dataset_without_its_quiet_route_is_shown_from_the_ledger() -> None:
    view = wait_view(
        waiting_on_dataset(2),
        None,
        "route 'exports-quiet' is not in config c.yaml",
        NOW,
        DEFAULT_DATA_TIMEOUT,
    )

    assert view is not None
    assert view.lines[0].startswith(f"dataset {DATASET_URI} (version 2)")
    assert "route 'exports-quiet' is not in config c.yaml" in view.lines[1]
    assert "quiet_for_seconds" not in view.document


@pytest.mark.parametrize(
    ("run", "lines"),
    [
        pytest.param(
            waiting_on_manifest(2),
            [
                "manifest gs://acme-datasets/m/manifest.json, waiting since 2026-12-01T11:00:00Z:"
                " 2 of 10 files missing (checked 2026-12-01T11:59:00Z); gives up "
                "2026-12-02T11:00:00Z (in 23h00m)",
                "missing gs://acme-datasets/m/part-0",
                "missing gs://acme-datasets/m/part-1",
            ],
            id="two-missing-both-named",
        ),
        pytest.param(
            waiting_on_manifest(7000, files=10000, checked=False),
            [
                "manifest gs://acme-datasets/m/manifest.json, waiting since 2026-12-01T11:00:00Z:"
                " 7000 of 10000 files missing (not checked yet); gives up 2026-12-02T11:00:00Z "
                "(in 23h00m)",
                "missing gs://acme-datasets/m/part-0",
                "missing gs://acme-datasets/m/part-1",
                "missing gs://acme-datasets/m/part-2",
                "... and 6997 more (`status --json` names the first 20)",
            ],
            id="many-missing-first-few-named",
        ),
    ],
)
def test_a_waiting_manifest_says_what_is_missing(run: Run, lines: list[str]) -> None:
    view = wait_view(run, None, None, NOW, DEFAULT_DATA_TIMEOUT)

    assert view is not None
    assert list(view.lines) == lines
    assert view.document["missing_count"] == run.data_wait.missing_count  # type: ignore[union-attr]
    assert len(view.document["missing"]) == min(run.data_wait.missing_count, 20)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "run",
    [
        a_run(RunStatus.ACCEPTED),
        # data complete: the record stays on the run, but it waits for nothing any more
        replace(
            waiting_on_dataset(),
            status=RunStatus.ACCEPTED,
            data_wait=QuietWait(DATASET_URI, 1, SINCE, cutoff=NOW, objects=4),
        ),
    ],
)
def test_a_run_not_waiting_for_data_has_no_wait_view(run: Run) -> None:
    assert wait_view(run, RULE, Tally(4, NOW), NOW, DEFAULT_DATA_TIMEOUT) is None


def test_the_table_shows_what_a_waiting_run_waits_for_under_its_row() -> None:
    waiting = waiting_on_dataset()
    other = replace(a_run(RunStatus.ACCEPTED), run_id="r-ffffffffffffffffffffffff")
    view = wait_view(waiting, RULE, Tally(5, NOW - timedelta(minutes=4)), NOW, DEFAULT_DATA_TIMEOUT)
    assert view is not None

    lines = status_table([waiting, other], NOW, {waiting.run_id: view}).splitlines()

    assert lines[1].split()[:3] == [waiting.run_id, "WAITING_DATA", "resnet-a100"]
    assert lines[2] == f"  {view.lines[0]}"
    assert lines[3] == f"  {view.lines[1]}"
    assert lines[4].split()[:2] == [other.run_id, "ACCEPTED"]
    assert lines[-1] == "2 runs, 1 waiting for data"
    assert lines[0].index("STATUS") == lines[1].index("WAITING_DATA") == lines[4].index("ACCEPTED")


def test_the_json_of_a_waiting_run_has_what_it_waits_for() -> None:
    run = waiting_on_dataset()
    view = wait_view(run, RULE, Tally(0, None), NOW, DEFAULT_DATA_TIMEOUT)

    document = run_document(run, view)

    assert document["status"] == "WAITING_DATA"
    assert document["data_wait"]["dataset_uri"] == DATASET_URI  # the ledger's record
    assert document["waiting_for"]["needs_objects"] == 3  # and what the CLI counted
    assert "waiting_for" not in run_document(a_run(RunStatus.ACCEPTED))


QUIET_ROUTE = GcsRoute(
    "exports-quiet", "acme-exports", "exports/*/part-*", "t", Completion.QUIET, quiet=RULE
)
CONFIG = Config(
    project="acme-ml",
    region="us-central1",
    source="c.yaml",
    alerts_topic="alerts",
    routes=(
        QUIET_ROUTE,
        GcsRoute("marker", "acme-exports", "m/*/_SUCCESS", "t"),
        PubSubRoute("requests"),
    ),
)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("exports-quiet", None),
        ("marker", "route 'marker' of config c.yaml is not a quiet gcs route"),
        ("requests", "route 'requests' of config c.yaml is not a quiet gcs route"),
        ("gone", "route 'gone' is not in config c.yaml"),
    ],
)
def test_the_quiet_route_of_a_run(name: str, why: str | None) -> None:
    route, reason = quiet_rule_of(CONFIG, name)

    assert reason == why
    assert route is (QUIET_ROUTE if why is None else None)


@pytest.fixture
def without_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    remove_credentials(monkeypatch)
    yield
    clients.forget_clients()


def test_without_access_to_cloud_storage_a_listing_says_why_instead_of_failing(
    without_credentials: None,
) -> None:
    waiting = waiting_on_dataset()
    route_gone = replace(waiting_on_dataset(), run_id="r-eeeeeeeeeeeeeeeeeeeeeeee", route="gone")

    # Version 1 has no earlier version's cutoff to read: the ledger is never asked.
    no_ledger = cast(Ledger, object())
    listings = read_listings(CONFIG, no_ledger, [waiting, route_gone, waiting_on_manifest(1)])

    assert set(listings) == {waiting.run_id, route_gone.run_id}  # a manifest is not listed
    reason = listings[waiting.run_id]
    assert isinstance(reason, str) and reason.startswith("Cloud Storage not read: ")
    assert "credentials were not found" in reason
    assert listings[route_gone.run_id] == "route 'gone' is not in config c.yaml"


def test_waiting_with_all_is_refused_before_any_client(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_test_support import EXAMPLE_CONFIG

    from tooling import main

    def built(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a Google Cloud client was built")

    monkeypatch.setattr(clients, "firestore_client", built)

    assert main(["status", "--waiting", "--all", "--config", EXAMPLE_CONFIG]) == 1
    assert "--waiting lists the runs waiting for data: leave out --all" in capsys.readouterr().err
