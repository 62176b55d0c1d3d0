"""Manifests that wait visibly: a run WAITING_DATA until every file its manifest lists exists.

Dispatch reads a manifest when its event arrives (``check_files``): every file complete, the run
starts at once; some missing, the run is opened WAITING_DATA with a ``ManifestWait`` (how many
files, how many missing, the first ``MAX_MISSING_SHOWN``) and the event is acknowledged, so the
run is in the ledger (and ``vertex-dispatch status``) while it waits. From then on the reconciler
checks it each tick (``check_manifest``), not the platform's redeliveries:

- the manifest is read again **at the generation that started the run**: a rewritten manifest
  is a new run (its own event, its own run key), not this one; that generation gone (the bucket
  keeps no old versions) ends this run FAILED, alerted once (``invalid_request``);
- nothing missing: ``data_waits.data_ready`` (ACCEPTED, first attempt published);
- waiting longer than ``data_timeout``: ``data_waits.data_timed_out`` (FAILED, one alert);
- else the wait is written again only when what it shows changed (``missing_count`` or the
  missing files shown), so a manifest waiting a day costs no write per tick; ``checked_at`` is
  the check that last changed it.

Existence is checked by listing (``manifests.listing_plan``), not one call per file: a check
costs one list call per 1,000 objects the listings show, e.g. 10 calls for 10,000 files of one
directory, plus one read of the manifest. A directory holding far more objects than the
manifest lists there is not listed whole: its listing stops after the pages its files would
fill plus one, and its files are read one by one instead, so a check costs at most about twice
the calls its files need.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from shared.adapters import storage
from shared.adapters.ledger import RunSnapshot
from shared.decode import manifests
from shared.handlers.data_waits import DataCheck, data_ready, data_timed_out, end_data_wait
from shared.logs import log
from shared.model.data_waits import MAX_MISSING_SHOWN, ManifestWait

if TYPE_CHECKING:
    from shared.handlers.services import Services

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FilesCheck:
    """What one check of a manifest's files found."""

    files: int  # how many the manifest lists
    missing: tuple[str, ...]  # every file not complete, in the manifest's order (with why)
    list_calls: int  # Cloud Storage list calls it made

    def wait(self, manifest_uri: str, since: datetime, checked_at: datetime) -> ManifestWait:
        """The run's ``data_wait`` record of this check."""
        return ManifestWait(
            manifest_uri=manifest_uri,
            files=self.files,
            missing_count=len(self.missing),
            missing=self.missing[:MAX_MISSING_SHOWN],
            since=since,
            checked_at=checked_at,
        )


def check_files(manifest_uri: str, generation: int) -> FilesCheck:
    """Read the manifest ``manifest_uri`` at ``generation`` and find which files it lists are
    not complete. ``InvalidManifest`` / ``DatasetUnreadable`` (permanent) when it cannot be read
    as a manifest; ``BackendUnavailable`` (transient) when Cloud Storage fails."""
    bucket, _ = manifests.split_gs_uri(manifest_uri)
    base_uri = manifest_uri.rsplit("/", 1)[0] + "/"
    text = storage.read_object(manifest_uri, manifests.MAX_MANIFEST_BYTES, generation)
    files = manifests.parse_manifest(text, base_uri, is_json=manifest_uri.endswith(".json"))
    wanted = {manifests.split_gs_uri(listed.uri)[1] for listed in files}
    found: dict[str, storage.StoredObject] = {}
    calls = 0
    for listing in manifests.listing_plan(files):
        shown = 0
        for stored in storage.list_objects(bucket, listing.prefix, delimiter="/"):
            shown += 1
            if shown > listing.max_shown:
                break
            if stored.name in wanted:
                found[f"gs://{bucket}/{stored.name}"] = stored
        calls += max(1, math.ceil(shown / storage.LIST_PAGE_SIZE))
        if shown > listing.max_shown:
            # The directory holds far more than the manifest lists: its files one by one.
            for name in listing.names:
                stored_file = storage.stat_object(bucket, name)
                calls += 1
                if stored_file is not None:
                    found[f"gs://{bucket}/{name}"] = stored_file
    missing = manifests.missing_files(files, found)
    return FilesCheck(files=len(files), missing=tuple(missing), list_calls=calls)


def check_manifest(services: Services, snapshot: RunSnapshot, now: datetime) -> DataCheck:
    """Whether every file of the manifest ``snapshot`` waits for exists (as pinned) at ``now``;
    when it does, the run is made ready (``data_waits.data_ready``). See the module docstring."""
    run = snapshot.run
    wait = run.data_wait
    assert isinstance(wait, ManifestWait), f"run {run.run_id} does not wait for a manifest"
    labels = {"run_id": run.run_id, "route": run.route, "template": run.template}
    generation = int(run.trigger["generation"])
    try:
        found = check_files(wait.manifest_uri, generation)
    except (manifests.InvalidManifest, storage.DatasetUnreadable) as error:
        _manifest_gone(services, snapshot, wait, generation, error)
        return DataCheck.ENDED
    log(
        logger,
        logging.INFO,
        "manifest checked",
        labels=labels,
        files=found.files,
        missing=len(found.missing),
        list_calls=found.list_calls,
    )
    if not found.missing:
        data_ready(services, snapshot, found.wait(wait.manifest_uri, wait.since, now), now)
        return DataCheck.READY
    if now - wait.since >= services.config.data_timeout:
        data_timed_out(
            services,
            snapshot,
            now,
            missing=_missing_line(found),
            what_to_do=(
                "upload the missing files (as pinned), then write the manifest again: its new "
                "generation starts a new run"
            ),
        )
        return DataCheck.TIMED_OUT
    changed = found.wait(wait.manifest_uri, wait.since, now)
    if (changed.missing_count, changed.missing) != (wait.missing_count, wait.missing):
        services.ledger.record_data_wait(snapshot, changed)
    return DataCheck.WAITING


def _missing_line(found: FilesCheck) -> str:
    shown = ", ".join(found.missing[:5])
    more = f" and {len(found.missing) - 5} more" if len(found.missing) > 5 else ""
    return f"{len(found.missing)} of the {found.files} files it lists are missing: {shown}{more}"


def _manifest_gone(
    services: Services,
    snapshot: RunSnapshot,
    wait: ManifestWait,
    generation: int,
    error: manifests.InvalidManifest | storage.DatasetUnreadable,
) -> None:
    """The manifest generation the run waits for cannot be read any more (deleted, or rewritten
    in a bucket that keeps no old versions): the run can never start; end it, alerted once."""
    from shared.model.alerts import AlertReason

    end_data_wait(
        services,
        snapshot,
        reason=AlertReason.INVALID_REQUEST,
        message=(
            f"run {snapshot.run.run_id} waited for the files of manifest {wait.manifest_uri} "
            f"(generation {generation}), which cannot be read any more: {error}"
        ),
        what_to_do=(
            "nothing if the manifest was rewritten (its new generation has a run of its own); "
            "else write the manifest again"
        ),
    )
    log(
        logger,
        logging.WARNING,
        "waiting manifest gone: run ended",
        labels={"run_id": snapshot.run.run_id},
        error=str(error),
    )
