"""Placement cooldowns in the ledger, on the Firestore emulator: one document, merged per key."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from emulator_stack import LOCAL_PROJECT, FirestoreEmulator
from shared.adapters import clients
from shared.adapters.ledger import Ledger
from shared.model.cooldowns import Cooldown
from shared.policy.timing import COOLDOWNS_READ_EVERY

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
RESERVATION = "projects/acme-ml/zones/us-central1-a/reservations/h100.block_1"


def a_cooldown(kind: str, region: str, machine: str, since: datetime = NOW) -> Cooldown:
    key = f"{kind}|{region}|{machine}"
    return Cooldown(key, kind, region, machine, since, since + timedelta(minutes=30), "stockout")


def ledgers(collection: str) -> tuple[Ledger, Ledger]:
    """Two instances' ledgers on one collection."""
    client = clients.firestore_client(LOCAL_PROJECT)
    return Ledger(client, collection), Ledger(client, collection)


def test_writers_of_different_placements_never_clobber_each_other(
    firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]
) -> None:
    ledger, read = ledgers(fresh_name("runs"))
    # Keys carry '|', '/', '.' and '-': each is one map entry, not a path into the map.
    cooldowns = [
        a_cooldown("flex_start", "us-central1", f"a2-highgpu-{n}g") for n in (1, 2, 4, 8)
    ] + [a_cooldown("reservation", "us-central1", RESERVATION)]
    with ThreadPoolExecutor(len(cooldowns)) as pool:
        list(pool.map(ledger.start_cooldown, cooldowns))

    assert read.placement_cooldowns() == {c.key: c for c in cooldowns}


def test_a_placement_cooled_again_keeps_the_latest(
    firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]
) -> None:
    ledger, fresh = ledgers(fresh_name("runs"))
    first = a_cooldown("spot", "us-west1", "a2-highgpu-1g")
    later = a_cooldown("spot", "us-west1", "a2-highgpu-1g", NOW + timedelta(minutes=40))
    ledger.start_cooldown(first)
    ledger.start_cooldown(later)
    assert fresh.placement_cooldowns() == {later.key: later}


def test_an_instance_rereads_only_after_a_while_and_sees_its_own_writes_at_once(
    firestore_emulator: FirestoreEmulator, fresh_name: Callable[[str], str]
) -> None:
    clock = [NOW]
    collection = fresh_name("runs")
    reader = Ledger(clients.firestore_client(LOCAL_PROJECT), collection, clock=lambda: clock[0])
    writer = Ledger(clients.firestore_client(LOCAL_PROJECT), collection)
    assert reader.placement_cooldowns() == {}

    other = a_cooldown("on_demand", "us-east4", "a3-highgpu-8g")
    writer.start_cooldown(other)  # another instance's
    own = a_cooldown("spot", "us-east4", "a3-highgpu-8g")
    reader.start_cooldown(own)

    assert reader.placement_cooldowns() == {own.key: own}  # read moments ago: reused
    clock[0] += COOLDOWNS_READ_EVERY
    assert reader.placement_cooldowns() == {own.key: own, other.key: other}
