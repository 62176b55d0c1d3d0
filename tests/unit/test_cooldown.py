"""The placement cooldown: its rules (policy/cooldown.py) and its record (model/cooldowns.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config.model import (
    DEFAULT_COOLDOWN,
    Config,
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
    Template,
)
from shared.model.cooldowns import (
    COOLDOWN_REASON_CHARS,
    Cooldown,
    cooldown_to_document,
    cooldowns_from_document,
)
from shared.model.runs import Attempt, PlacementSkip, SkipClass
from shared.policy.cooldown import (
    PlacementKey,
    cooldown_of,
    cooling,
    placement_key,
    untried_passed_over,
    walk_indices,
    walk_order,
)

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
RESERVATION = "projects/acme-ml/zones/europe-west4-b/reservations/h100-block"
TEMPLATE = Template(
    name="train",
    display_name="train",
    job_spec={"workerPoolSpecs": [{"machineSpec": {"machineType": "a2-highgpu-1g"}}]},
    placements=(FlexStartPlacement(max_wait=timedelta(hours=1)),),
)
H100 = MachineOverride("a3-highgpu-8g", "NVIDIA_H100_80GB", 8)


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        pytest.param(
            FlexStartPlacement(max_wait=timedelta(hours=1)),
            PlacementKey("flex_start", "us-central1", "a2-highgpu-1g"),
            id="flex-start-template-machine-config-region",
        ),
        pytest.param(
            FlexStartPlacement(max_wait=timedelta(hours=2), region="us-east4", machine=H100),
            PlacementKey("flex_start", "us-east4", "a3-highgpu-8g+NVIDIA_H100_80GBx8"),
            id="flex-start-override",
        ),
        pytest.param(
            SpotPlacement(region="us-west1"),
            PlacementKey("spot", "us-west1", "a2-highgpu-1g"),
            id="spot",
        ),
        pytest.param(
            OnDemandPlacement(machine=H100),
            PlacementKey("on_demand", "us-central1", "a3-highgpu-8g+NVIDIA_H100_80GBx8"),
            id="on-demand-override",
        ),
        pytest.param(
            OnDemandPlacement(machine=MachineOverride("n1-standard-8", "NVIDIA_TESLA_T4", 1)),
            PlacementKey("on_demand", "us-central1", "n1-standard-8+NVIDIA_TESLA_T4x1"),
            id="the-gpus-tell-one-n1-machine-from-another",
        ),
        pytest.param(
            PersistentResourcePlacement("a100-pool", region="us-east4"),
            PlacementKey("persistent_resource", "us-east4", "a100-pool"),
            id="persistent-resource-id-is-the-machine",
        ),
        pytest.param(
            ReservationPlacement(name=RESERVATION),
            PlacementKey("reservation", "europe-west4", RESERVATION),
            id="named-reservation-region-of-its-zone",
        ),
        pytest.param(
            ReservationPlacement(region="us-east4"),
            PlacementKey("reservation", "us-east4", "a2-highgpu-1g"),
            id="any-reservation-machine",
        ),
    ],
)
def test_a_placement_key_is_its_kind_region_and_machine(
    placement: Placement, expected: PlacementKey
) -> None:
    assert placement_key(placement, TEMPLATE, "us-central1") == expected


def test_the_key_joins_kind_region_and_machine() -> None:
    key = PlacementKey("spot", "us-west1", "a2-highgpu-1g")
    assert key.key == "spot|us-west1|a2-highgpu-1g"


@pytest.mark.parametrize(
    ("config_cooldown", "template_cooldown", "expected"),
    [
        (DEFAULT_COOLDOWN, None, timedelta(minutes=30)),
        (timedelta(hours=1), None, timedelta(hours=1)),
        (timedelta(hours=1), timedelta(minutes=5), timedelta(minutes=5)),
        (timedelta(hours=1), timedelta(0), timedelta(0)),  # the template turns it off
        (timedelta(0), timedelta(minutes=5), timedelta(minutes=5)),
    ],
)
def test_the_template_cooldown_wins_over_the_configs(
    config_cooldown: timedelta, template_cooldown: timedelta | None, expected: timedelta
) -> None:
    config = Config(project="p", region="r", source="s", alerts_topic="a", cooldown=config_cooldown)
    template = Template("t", "t", {}, (), cooldown=template_cooldown)
    assert cooldown_of(config, template) == expected


def a_cooldown(key: str, since: datetime) -> Cooldown:
    kind, region, machine = key.split("|")
    return Cooldown(key, kind, region, machine, since, since + DEFAULT_COOLDOWN, "stockout")


KEYS = {
    0: PlacementKey("flex_start", "us-central1", "a2-highgpu-1g"),
    1: PlacementKey("flex_start", "us-east4", "a2-highgpu-1g"),
    2: PlacementKey("spot", "us-central1", "a2-highgpu-1g"),
}


@pytest.mark.parametrize(
    ("failed", "length", "expected"),
    [
        pytest.param({}, DEFAULT_COOLDOWN, set(), id="nothing-failed"),
        pytest.param({0: NOW - MINUTE}, DEFAULT_COOLDOWN, {0}, id="failed-a-minute-ago"),
        pytest.param({0: NOW - 30 * MINUTE}, DEFAULT_COOLDOWN, set(), id="exactly-expired"),
        pytest.param({0: NOW - 29 * MINUTE}, DEFAULT_COOLDOWN, {0}, id="about-to-expire"),
        pytest.param({0: NOW - 10 * MINUTE}, 5 * MINUTE, set(), id="the-readers-length"),
        pytest.param({0: NOW - MINUTE}, timedelta(0), set(), id="off"),
        pytest.param({1: NOW + MINUTE}, DEFAULT_COOLDOWN, {1}, id="writers-clock-ahead"),
        pytest.param(
            {0: NOW - MINUTE, 2: NOW - 40 * MINUTE}, DEFAULT_COOLDOWN, {0}, id="one-of-two"
        ),
    ],
)
def test_a_placement_cools_for_the_readers_length_from_its_failure(
    failed: dict[int, datetime], length: timedelta, expected: set[int]
) -> None:
    cooldowns = {KEYS[i].key: a_cooldown(KEYS[i].key, since) for i, since in failed.items()}
    assert set(cooling(KEYS, cooldowns, NOW, length)) == expected


@pytest.mark.parametrize(
    ("indices", "cooling_indices", "order", "passed_over"),
    [
        pytest.param([0, 1, 2], set(), (0, 1, 2), (), id="none-cooling"),
        pytest.param([0, 1, 2], {0}, (1, 2, 0), (0,), id="first-cooling-goes-last"),
        pytest.param([0, 1, 2], {1}, (0, 2, 1), (1,), id="middle-cooling"),
        pytest.param([0, 1, 2], {2}, (0, 1, 2), (), id="last-cooling-is-never-passed-over"),
        pytest.param([0, 1, 2], {0, 2}, (1, 0, 2), (0,), id="cooling-keep-their-order"),
        pytest.param([0, 1], {0, 1}, (0, 1), (), id="all-cooling-chain-order"),
        pytest.param([1, 2], {1}, (2, 1), (1,), id="from-a-later-start"),
        pytest.param([2], {2}, (2,), (), id="the-last-one-left"),
    ],
)
def test_cooling_placements_are_tried_after_the_others_never_dropped(
    indices: list[int],
    cooling_indices: set[int],
    order: tuple[int, ...],
    passed_over: tuple[int, ...],
) -> None:
    plan = walk_order(indices, cooling_indices)
    assert (plan.order, plan.passed_over) == (order, passed_over)
    assert sorted(plan.order) == sorted(indices)


def test_a_cooldown_round_trips_through_its_document_entry() -> None:
    cooldown = a_cooldown("spot|us-west1|a2-highgpu-1g", NOW)
    document = {cooldown.key: cooldown_to_document(cooldown)}
    assert cooldowns_from_document(document) == {cooldown.key: cooldown}


def test_entries_without_a_time_are_left_out_and_reasons_are_cut() -> None:
    assert cooldowns_from_document({"x": {"kind": "spot"}, "y": "not a map"}) == {}
    long = Cooldown("k", "spot", "r", "m", NOW, NOW, "x" * 1000)
    assert len(long.reason) == COOLDOWN_REASON_CHARS


def test_the_key_of_a_template_machine_names_its_gpus() -> None:
    template = Template(
        name="t4",
        display_name="t4",
        job_spec={
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "n1-standard-8",
                        "acceleratorType": "NVIDIA_TESLA_V100",
                        "acceleratorCount": 2,
                    }
                }
            ]
        },
        placements=(SpotPlacement(),),
    )
    key = placement_key(SpotPlacement(), template, "us-central1")
    assert key.machine == "n1-standard-8+NVIDIA_TESLA_V100x2"


# A chain of three on-demand placements; records as the ledger keeps them.
CHAIN = Template(
    name="chain",
    display_name="chain",
    job_spec=TEMPLATE.job_spec,
    placements=(
        OnDemandPlacement(region="us-central1"),
        OnDemandPlacement(region="us-east4"),
        OnDemandPlacement(region="us-west1"),
    ),
)
CENTRAL, EAST, WEST = (
    {"on_demand": {"region": r}} for r in ("us-central1", "us-east4", "us-west1")
)


def _skip(placement: dict[str, object], skip_class: SkipClass) -> PlacementSkip:
    return PlacementSkip(placement, "r", skip_class.value, "why", NOW)


def _attempt(number: int, placement: dict[str, object], *skips: PlacementSkip) -> Attempt:
    return Attempt(number, placement, "r", "projects/p/locations/r", NOW, skips=skips)


@pytest.mark.parametrize(
    ("attempts", "owed"),
    [
        pytest.param((), (), id="no-attempt"),
        pytest.param((_attempt(1, CENTRAL),), (), id="no-cooldown-skip"),
        pytest.param(
            (_attempt(1, EAST, _skip(CENTRAL, SkipClass.COOLDOWN)),), (0,), id="passed-over"
        ),
        pytest.param(
            (
                _attempt(1, EAST, _skip(CENTRAL, SkipClass.COOLDOWN)),
                _attempt(2, CENTRAL),
            ),
            (),
            id="tried-later",
        ),
        pytest.param(
            (
                _attempt(
                    1,
                    WEST,
                    _skip(CENTRAL, SkipClass.COOLDOWN),
                    _skip(EAST, SkipClass.QUOTA),
                ),
            ),
            (0,),
            id="a-refused-one-is-tried-a-cooling-one-is-owed",
        ),
        pytest.param(
            (_attempt(1, WEST, _skip(EAST, SkipClass.COOLDOWN), _skip(EAST, SkipClass.QUOTA)),),
            (),
            id="reached-after-all",
        ),
    ],
)
def test_a_placement_passed_over_for_cooldown_stays_owed_until_tried(
    attempts: tuple[Attempt, ...], owed: tuple[int, ...]
) -> None:
    assert untried_passed_over(CHAIN, attempts) == owed


@pytest.mark.parametrize(
    ("first", "attempts", "indices"),
    [
        pytest.param(0, (), (0, 1, 2), id="whole-chain"),
        pytest.param(1, (), (1, 2), id="from-the-next"),
        pytest.param(
            2, (_attempt(1, EAST, _skip(CENTRAL, SkipClass.COOLDOWN)),), (0, 2), id="owed-first"
        ),
        pytest.param(
            0, (_attempt(1, EAST, _skip(CENTRAL, SkipClass.COOLDOWN)),), (0, 1, 2), id="no-twice"
        ),
    ],
)
def test_a_walk_from_a_placement_includes_the_ones_owed_a_try(
    first: int, attempts: tuple[Attempt, ...], indices: tuple[int, ...]
) -> None:
    assert walk_indices(CHAIN, first, attempts) == indices


@pytest.mark.parametrize(
    ("first", "order", "attempts", "indices"),
    [
        pytest.param(0, None, (), (0, 1, 2), id="no-order-the-chain"),
        pytest.param(2, (2, 0, 1), (), (2, 0, 1), id="the-whole-learned-order"),
        pytest.param(0, (2, 0, 1), (), (0, 1), id="from-the-middle-of-the-order"),
        pytest.param(
            1,
            (2, 0, 1),
            (_attempt(1, CENTRAL, _skip(WEST, SkipClass.COOLDOWN)),),
            (2, 1),
            id="owed-earlier-in-the-order",
        ),
    ],
)
def test_a_walk_follows_the_runs_learned_order(
    first: int,
    order: tuple[int, ...] | None,
    attempts: tuple[Attempt, ...],
    indices: tuple[int, ...],
) -> None:
    assert walk_indices(CHAIN, first, attempts, order) == indices


@pytest.mark.parametrize(
    ("indices", "cooling_indices", "order", "passed_over"),
    [
        pytest.param([2, 0, 1], {2}, (0, 1, 2), (2,), id="the-learned-head-cooling-goes-last"),
        pytest.param([2, 0, 1], {1}, (2, 0, 1), (), id="the-learned-tail-is-never-passed-over"),
        pytest.param([2, 0, 1], {0}, (2, 1, 0), (0,), id="passed-over-by-position-not-index"),
    ],
)
def test_cooling_placements_go_last_in_a_learned_order(
    indices: list[int],
    cooling_indices: set[int],
    order: tuple[int, ...],
    passed_over: tuple[int, ...],
) -> None:
    plan = walk_order(indices, cooling_indices)
    assert (plan.order, plan.passed_over) == (order, passed_over)
