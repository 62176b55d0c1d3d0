"""shared.policy.records: the plain maps the ledger stores and the one-liners alerts show."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from shared.config.model import (
    FlexStartPlacement,
    MachineOverride,
    OnDemandPlacement,
    PersistentResourcePlacement,
    Placement,
    ReservationPlacement,
    SpotPlacement,
)
from shared.model.triggers import JobRequest, ObjectFinalized, RetryRequest, ScheduleTick, Trigger
from shared.policy.records import (
    PLACEMENT_KINDS,
    console_url,
    describe_placement,
    describe_trigger,
    placement_kind,
    placement_record,
    trigger_record,
)

MARKER = ObjectFinalized(
    bucket="acme-datasets",
    name="imagenet/2026-12-01/_SUCCESS",
    generation=1733100000000000,
    metageneration=1,
    size=0,
    event_id="7264937102123456",
    event_time=datetime(2026, 12, 1, 1, 59, 58, 123456, tzinfo=UTC),
    content_type="application/octet-stream",
)
KEYED_REQUEST = JobRequest(
    message_id="9876543210",
    attributes={"kind": "train", "idempotency_key": "retrain-2026-12-01"},
    body={"template": "resnet-a100", "params": {"dataset_uri": "gs://acme-datasets/x/"}},
    publish_time=datetime(2026, 12, 1, 2, 0, 3, 412000, tzinfo=UTC),
    idempotency_key="retrain-2026-12-01",
)
PLAIN_REQUEST = JobRequest(message_id="9876543211", attributes={}, body={})
TICK = ScheduleTick(
    message_id="555",
    schedule="nightly-retrain",
    tick_time=datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
    attributes={"vertex_dispatch_kind": "schedule"},
)
RETRY = RetryRequest(
    message_id="777",
    run_id="r-3f2a9c0d1e4b5a6978877665",
    attempt=2,
    placement_index=1,
    reason="capacity: FLEX_START wait expired",
)


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        pytest.param(
            MARKER,
            {
                "kind": "ObjectFinalized",
                "bucket": "acme-datasets",
                "name": "imagenet/2026-12-01/_SUCCESS",
                "generation": 1733100000000000,
                "metageneration": 1,
                "size": 0,
                "event_id": "7264937102123456",
                "event_time": datetime(2026, 12, 1, 1, 59, 58, 123456, tzinfo=UTC),
                "content_type": "application/octet-stream",
                "updated": None,
            },
            id="object",
        ),
        pytest.param(
            KEYED_REQUEST,
            {
                "kind": "JobRequest",
                "message_id": "9876543210",
                "attributes": {"kind": "train", "idempotency_key": "retrain-2026-12-01"},
                "body": {
                    "template": "resnet-a100",
                    "params": {"dataset_uri": "gs://acme-datasets/x/"},
                },
                "publish_time": datetime(2026, 12, 1, 2, 0, 3, 412000, tzinfo=UTC),
                "idempotency_key": "retrain-2026-12-01",
            },
            id="request",
        ),
        pytest.param(
            TICK,
            {
                "kind": "ScheduleTick",
                "message_id": "555",
                "schedule": "nightly-retrain",
                "tick_time": datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
                "attributes": {"vertex_dispatch_kind": "schedule"},
            },
            id="tick",
        ),
        pytest.param(
            RETRY,
            {
                "kind": "RetryRequest",
                "message_id": "777",
                "run_id": "r-3f2a9c0d1e4b5a6978877665",
                "attempt": 2,
                "placement_index": 1,
                "reason": "capacity: FLEX_START wait expired",
            },
            id="retry",
        ),
    ],
)
def test_trigger_record_is_a_plain_map_with_its_kind(
    trigger: Trigger, expected: dict[str, object]
) -> None:
    assert trigger_record(trigger) == expected


def test_trigger_record_copies_rather_than_shares_the_trigger_maps() -> None:
    record = trigger_record(KEYED_REQUEST)
    record["attributes"]["kind"] = "changed"
    assert KEYED_REQUEST.attributes["kind"] == "train"


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        (MARKER, "gs://acme-datasets/imagenet/2026-12-01/_SUCCESS (generation 1733100000000000)"),
        (KEYED_REQUEST, "job request, message 9876543210, idempotency_key retrain-2026-12-01"),
        (PLAIN_REQUEST, "job request, message 9876543211"),
        (TICK, "schedule nightly-retrain at 2026-12-01T02:00:00+00:00"),
        (
            RETRY,
            "retry of run r-3f2a9c0d1e4b5a6978877665, attempt 2 "
            "(capacity: FLEX_START wait expired)",
        ),
    ],
    ids=["object", "keyed-request", "plain-request", "tick", "retry"],
)
def test_describe_trigger(trigger: Trigger, expected: str) -> None:
    assert describe_trigger(trigger) == expected


@pytest.mark.parametrize("describe", [describe_trigger, trigger_record])
def test_a_non_trigger_is_refused(describe: Callable[[Trigger], object]) -> None:
    with pytest.raises(TypeError):
        describe("gs://acme-datasets/imagenet/2026-12-01/_SUCCESS")  # type: ignore[arg-type]


H100 = MachineOverride(
    machine_type="a3-highgpu-1g", accelerator_type="NVIDIA_H100_80GB", accelerator_count=1
)
H100_RECORD = {
    "machine_type": "a3-highgpu-1g",
    "accelerator_type": "NVIDIA_H100_80GB",
    "accelerator_count": 1,
}
RESERVATION = "projects/acme-ml/zones/us-east4-b/reservations/h100-res"

PLACEMENTS = [
    pytest.param(
        PersistentResourcePlacement("a100-pool"),
        {"persistent_resource": "a100-pool"},
        "persistent resource a100-pool",
        id="persistent-resource",
    ),
    pytest.param(
        PersistentResourcePlacement("a100x2-pool", region="us-east4"),
        {"persistent_resource": "a100x2-pool", "region": "us-east4"},
        "persistent resource a100x2-pool in us-east4",
        id="persistent-resource-in-a-region",
    ),
    pytest.param(
        FlexStartPlacement(max_wait=timedelta(hours=2)),
        {"flex_start": {"max_wait": "7200s"}},
        "FLEX_START (max wait 7200s)",
        id="flex-start-seed-7200s",
    ),
    pytest.param(
        FlexStartPlacement(max_wait=timedelta(seconds=1800), region="us-east4"),
        {"flex_start": {"max_wait": "1800s", "region": "us-east4"}},
        "FLEX_START (max wait 1800s) in us-east4",
        id="flex-start-seed-1800s-in-a-region",
    ),
    pytest.param(
        FlexStartPlacement(max_wait=timedelta(0), region="europe-west4", machine=H100),
        {
            "flex_start": {
                "max_wait": "0s",
                "region": "europe-west4",
                "machine": {
                    "machine_type": "a3-highgpu-1g",
                    "accelerator_type": "NVIDIA_H100_80GB",
                    "accelerator_count": 1,
                },
            }
        },
        "FLEX_START (max wait 0s) in europe-west4 on a3-highgpu-1g",
        id="flex-start-waiting-forever-on-another-gpu",
    ),
    pytest.param(
        FlexStartPlacement(max_wait=timedelta(milliseconds=1500)),
        {"flex_start": {"max_wait": "1.5s"}},
        "FLEX_START (max wait 1.5s)",
        id="flex-start-fractional-seconds",
    ),
    pytest.param(SpotPlacement(), {"spot": {}}, "Spot VMs", id="spot-defaults"),
    pytest.param(
        SpotPlacement(region="us-east4", machine=H100),
        {"spot": {"region": "us-east4", "machine": H100_RECORD}},
        "Spot VMs in us-east4 on a3-highgpu-1g",
        id="spot-in-a-region-on-another-gpu",
    ),
    pytest.param(OnDemandPlacement(), {"on_demand": {}}, "on demand (STANDARD)", id="on-demand"),
    pytest.param(
        OnDemandPlacement(region="europe-west4"),
        {"on_demand": {"region": "europe-west4"}},
        "on demand (STANDARD) in europe-west4",
        id="on-demand-in-a-region",
    ),
    pytest.param(
        ReservationPlacement(),
        {"reservation": {}},
        "any matching reservation",
        id="any-reservation",
    ),
    pytest.param(
        ReservationPlacement(name=RESERVATION, machine=H100),
        {"reservation": {"name": RESERVATION, "region": "us-east4", "machine": H100_RECORD}},
        f"reservation {RESERVATION} in us-east4 on a3-highgpu-1g",
        id="named-reservation-in-its-zones-region",
    ),
]


@pytest.mark.parametrize(("placement", "record", "description"), PLACEMENTS)
def test_placement_record_and_description(
    placement: Placement, record: dict[str, object], description: str
) -> None:
    assert placement_record(placement) == record
    assert describe_placement(placement) == description


@pytest.mark.parametrize(("placement", "record", "description"), PLACEMENTS)
def test_placement_kind_is_the_records_key(
    placement: Placement, record: dict[str, object], description: str
) -> None:
    kind = placement_kind(placement_record(placement))
    assert kind in PLACEMENT_KINDS
    assert kind == next(iter(record))


def test_every_config_kind_is_a_record_kind() -> None:
    from shared.config.placements import PLACEMENT_KINDS as CONFIG_KINDS

    assert sorted(PLACEMENT_KINDS) == sorted(CONFIG_KINDS)
    assert placement_kind({"tpu_pod": {}}) == "unknown"


def test_records_of_different_kinds_never_compare_equal() -> None:
    # decisions.placement_index finds an attempt's placement by comparing records
    records = [
        placement_record(p) for p in (SpotPlacement(), OnDemandPlacement(), ReservationPlacement())
    ]
    assert len({repr(record) for record in records}) == 3


@pytest.mark.parametrize(
    ("job_name", "url"),
    [
        (
            "projects/123/locations/us-central1/customJobs/42",
            "https://console.cloud.google.com/vertex-ai/locations/us-central1/training/42/cpu"
            "?project=123",
        ),
        (
            "projects/123/locations/us-east4/hyperparameterTuningJobs/43",
            "https://console.cloud.google.com/vertex-ai/locations/us-east4/training/"
            "hyperparameter-tuning-jobs/43?project=123",
        ),
        (
            "projects/123/locations/europe-west4/trainingPipelines/44",
            "https://console.cloud.google.com/vertex-ai/locations/europe-west4/training/"
            "training-pipelines/44?project=123",
        ),
    ],
)
def test_console_url_per_kind(job_name: str, url: str) -> None:
    assert console_url(job_name) == url
