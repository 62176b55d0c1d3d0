"""shared.adapters.vertex against the Vertex AI emulator over gRPC and REST: calls, labels,
errors."""

from __future__ import annotations

import pytest
from adapter_test_support import PARENT, POOL_NAME, REGION, VertexAdmin
from google.cloud import aiplatform_v1

from shared.adapters import vertex
from shared.model.errors import BackendUnavailable, InvalidJobSpec, PermanentError

pytestmark = pytest.mark.integration

RUN_LABEL = "vd-run"


def seed_page_job(run_id: str, **changes: object) -> aiplatform_v1.CustomJob:
    """The seed page's FLEX_START example: a2-highgpu-1g, one A100, 7200s timeout, 1800s wait."""
    job = aiplatform_v1.CustomJob.from_json(
        """{
          "displayName": "resnet-flex",
          "labels": {"vd-run": "RUN", "vd-attempt": "1", "vd-template": "resnet-a100"},
          "jobSpec": {
            "workerPoolSpecs": [{
              "machineSpec": {"machineType": "a2-highgpu-1g",
                              "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1},
              "replicaCount": "1",
              "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
              "containerSpec": {"imageUri": "us-docker.pkg.dev/acme-ml/train/resnet:1.4",
                                "args": ["--epochs=90"]}
            }],
            "scheduling": {"timeout": "7200s", "strategy": "FLEX_START",
                           "maxWaitDuration": "1800s"}
          }
        }""".replace("RUN", run_id)
    )
    for field, value in changes.items():
        setattr(job, field, value)
    return job


def persistent_resource_job(run_id: str) -> aiplatform_v1.CustomJob:
    """The same worker pool on the persistent resource instead of FLEX_START."""
    job = seed_page_job(run_id)
    job.job_spec.scheduling = aiplatform_v1.Scheduling(timeout={"seconds": 7200})
    job.job_spec.persistent_resource_id = POOL_NAME.rsplit("/", 1)[1]
    return job


def test_create_then_find_by_label_finds_exactly_that_job(vertex_transport: str) -> None:
    created = vertex.create_custom_job(PARENT, seed_page_job("r-aaaaaaaaaaaaaaaaaaaaaaaa"))
    vertex.create_custom_job(PARENT, seed_page_job("r-bbbbbbbbbbbbbbbbbbbbbbbb"))

    found = vertex.find_jobs_by_label(PARENT, RUN_LABEL, "r-aaaaaaaaaaaaaaaaaaaaaaaa")

    assert [job.name for job in found] == [created.name]
    assert found[0].labels["vd-attempt"] == "1"
    assert vertex.get_custom_job(created.name).name == created.name


def test_find_by_label_finds_nothing_for_an_unknown_run(vertex_transport: str) -> None:
    vertex.create_custom_job(PARENT, seed_page_job("r-aaaaaaaaaaaaaaaaaaaaaaaa"))
    assert vertex.find_jobs_by_label(PARENT, RUN_LABEL, "r-cccccccccccccccccccccccc") == []


def test_a_job_on_the_persistent_resource_is_created(vertex_transport: str) -> None:
    created = vertex.create_custom_job(
        PARENT, persistent_resource_job("r-dddddddddddddddddddddddd")
    )
    assert created.job_spec.persistent_resource_id == "a100-pool"
    assert created.state == aiplatform_v1.JobState.JOB_STATE_QUEUED


def test_list_custom_jobs_yields_one_list_per_page(vertex_transport: str) -> None:
    for index in range(5):
        vertex.create_custom_job(PARENT, seed_page_job(f"r-page{index}"))

    pages = list(
        vertex.list_custom_jobs(PARENT, filter='labels.vd-template="resnet-a100"', page_size=2)
    )

    assert [len(page) for page in pages] == [2, 2, 1]


def test_get_persistent_resource_reads_it_live(vertex_transport: str) -> None:
    resource = vertex.get_persistent_resource(POOL_NAME)

    assert resource is not None
    assert resource.state == aiplatform_v1.PersistentResource.State.RUNNING
    [pool] = resource.resource_pools
    assert (pool.machine_spec.machine_type, pool.replica_count) == ("a2-highgpu-1g", 2)


def test_a_missing_persistent_resource_is_none(vertex_transport: str) -> None:
    assert vertex.get_persistent_resource(f"{PARENT}/persistentResources/no-such-pool") is None


def test_a_missing_job_is_a_permanent_not_found(vertex_transport: str) -> None:
    with pytest.raises(vertex.VertexNotFound, match="customJobs/999999"):
        vertex.get_custom_job(f"{PARENT}/customJobs/999999")


def test_cancel_moves_the_job_towards_cancelled(vertex_transport: str) -> None:
    created = vertex.create_custom_job(PARENT, seed_page_job("r-eeeeeeeeeeeeeeeeeeeeeeee"))

    vertex.cancel_custom_job(created.name)

    assert vertex.get_custom_job(created.name).state in (
        aiplatform_v1.JobState.JOB_STATE_CANCELLING,
        aiplatform_v1.JobState.JOB_STATE_CANCELLED,
    )


@pytest.mark.parametrize(
    ("broken_rule", "changes"),
    [
        ("display name required", {"display_name": ""}),
        ("label value too long", {"labels": {"vd-run": "x" * 64}}),
    ],
)
def test_a_job_the_service_refuses_is_a_permanent_invalid_spec(
    vertex_transport: str, broken_rule: str, changes: dict[str, object]
) -> None:
    with pytest.raises(vertex.VertexRejected, match="CreateCustomJob") as raised:
        vertex.create_custom_job(PARENT, seed_page_job("r-ffffffffffffffffffffffff", **changes))
    assert isinstance(raised.value, InvalidJobSpec)


def test_a_flex_start_job_asking_for_a_t4_is_refused_with_the_service_message(
    vertex_transport: str,
) -> None:
    job = seed_page_job("r-ffffffffffffffffffffffff")
    job.job_spec.worker_pool_specs[0].machine_spec = aiplatform_v1.MachineSpec(
        machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1
    )
    with pytest.raises(vertex.VertexRejected, match="T4"):
        vertex.create_custom_job(PARENT, job)


@pytest.mark.parametrize(
    ("code", "message", "expected_error"),
    [
        ("UNAVAILABLE", "The service is currently unavailable.", BackendUnavailable),
        # The service may have created the job: a takeover must wait for the intent lease.
        ("DEADLINE_EXCEEDED", "Deadline exceeded.", vertex.OutcomeUnknown),
        ("INTERNAL", "Internal error encountered.", vertex.OutcomeUnknown),
        ("UNKNOWN", "Unknown error.", vertex.OutcomeUnknown),
        ("ABORTED", "The operation was aborted.", BackendUnavailable),
        ("INVALID_ARGUMENT", "List of found errors: 1.Field: x", vertex.VertexRejected),
        # A refusal of the placement, not the job: submission moves on along the chain.
        (
            "INVALID_ARGUMENT",
            "Accelerator type NVIDIA_H100_80GB is not supported in location us-west1.",
            vertex.AcceleratorNotOffered,
        ),
        # This job names no persistent resource: a message that mentions one is the job's own
        # refusal, never a silent move along the chain.
        (
            "FAILED_PRECONDITION",
            "Persistent resource projects/p/locations/us-central1/persistentResources/a100-pool "
            "is in state STOPPING; it must be RUNNING to run jobs.",
            vertex.VertexRejected,
        ),
        ("PERMISSION_DENIED", "Permission denied on resource.", vertex.VertexPermissionDenied),
        (
            "RESOURCE_EXHAUSTED",
            "The following quota metrics exceed quota limits: "
            "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus",
            vertex.QuotaExceeded,
        ),
        (
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit "
            "'Resource management (CRUD) requests per minute per region'",
            vertex.VertexThrottled,
        ),
    ],
)
def test_create_errors_map_onto_the_error_tree(
    vertex_transport: str,
    vertex_admin: VertexAdmin,
    code: str,
    message: str,
    expected_error: type[Exception],
) -> None:
    vertex_admin.add_fault(method="CreateCustomJob", code=code, message=message, count=1)

    with pytest.raises(expected_error) as raised:
        vertex.create_custom_job(PARENT, seed_page_job("r-gggggggggggggggggggggggg"))

    assert type(raised.value) is expected_error
    assert message[:30] in str(raised.value)
    # Never retried: exactly one create reached the service, and it created nothing.
    assert len(vertex_admin.requests("CreateCustomJob")) == 1
    assert vertex.find_jobs_by_label(PARENT, RUN_LABEL, "r-gggggggggggggggggggggggg") == []


RESOURCE = f"{PARENT}/persistentResources/a100-pool"


@pytest.mark.parametrize(
    ("code", "message", "expected_error"),
    [
        (
            "FAILED_PRECONDITION",
            f"Persistent resource {RESOURCE} is in state STOPPING; it must be RUNNING to run jobs.",
            vertex.PersistentResourceRefused,
        ),
        (
            "INVALID_ARGUMENT",
            "List of found errors:\t1.Field: custom_job.job_spec.persistent_resource_id; "
            f"Message: Persistent resource {RESOURCE} does not exist.\t",
            vertex.PersistentResourceRefused,
        ),
        (
            "INVALID_ARGUMENT",
            "List of found errors:\t1.Field: custom_job.job_spec.worker_pool_specs[0]; Message: "
            f"No resource pool of persistent resource {RESOURCE} matches machine_spec and "
            "disk_spec exactly (machine_type=a2-highgpu-1g, ...).\t",
            vertex.PersistentResourceMismatch,
        ),
        (
            "INVALID_ARGUMENT",
            "List of found errors:\t1.Field: custom_job.job_spec.worker_pool_specs[0]."
            "replica_count; Message: Requested 4 replicas of resource pool a100, which has at "
            "most 2.\t",
            vertex.PersistentResourceMismatch,
        ),
        (
            "INVALID_ARGUMENT",
            "The CustomJob's encryption_spec.kms_key_name (not set) must be the same as the "
            f"encryption_spec.kms_key_name of persistent resource {RESOURCE} (projects/p/"
            "locations/us-central1/keyRings/r/cryptoKeys/k).",
            vertex.PersistentResourceMismatch,
        ),
        # The job's own refusals, though they name the persistent resource: rejected as they
        # are, never read as the resource's.
        (
            "INVALID_ARGUMENT",
            "A reservation affinity cannot be combined with job_spec.persistent_resource_id.",
            vertex.VertexRejected,
        ),
        (
            "INVALID_ARGUMENT",
            f"Invalid value at 'image_uri' (job on {RESOURCE}): image not found.",
            vertex.VertexRejected,
        ),
    ],
)
def test_a_refusal_is_the_persistent_resources_only_as_the_service_words_its_rules(
    vertex_transport: str,
    vertex_admin: VertexAdmin,
    code: str,
    message: str,
    expected_error: type[Exception],
) -> None:
    vertex_admin.add_fault(method="CreateCustomJob", code=code, message=message, count=1)
    job = seed_page_job("r-kkkkkkkkkkkkkkkkkkkkkkkk")
    job.job_spec.persistent_resource_id = "a100-pool"
    job.job_spec.scheduling = aiplatform_v1.Scheduling()

    with pytest.raises(expected_error) as raised:
        vertex.create_custom_job(PARENT, job)

    refused = raised.value
    assert type(refused) is expected_error
    if isinstance(refused, vertex.PlacementRefused):  # a mismatch lasts, a stopped resource not
        assert refused.lasting is (expected_error is vertex.PersistentResourceMismatch)


def test_permission_denied_names_the_role_to_grant(
    vertex_transport: str, vertex_admin: VertexAdmin
) -> None:
    vertex_admin.add_fault(method="CreateCustomJob", code="PERMISSION_DENIED", count=1)
    with pytest.raises(
        PermanentError, match=r"aiplatform\.customJobs\.create.*roles/aiplatform\.user"
    ):
        vertex.create_custom_job(PARENT, seed_page_job("r-hhhhhhhhhhhhhhhhhhhhhhhh"))


def test_a_create_whose_answer_is_lost_leaves_a_job_that_the_label_finds(
    vertex_transport: str, vertex_admin: VertexAdmin
) -> None:
    vertex_admin.add_fault(method="CreateCustomJob", code="UNAVAILABLE", when="after", count=1)

    with pytest.raises(BackendUnavailable):
        vertex.create_custom_job(PARENT, seed_page_job("r-iiiiiiiiiiiiiiiiiiiiiiii"))

    [reattached] = vertex.find_jobs_by_label(PARENT, RUN_LABEL, "r-iiiiiiiiiiiiiiiiiiiiiiii")
    assert reattached.display_name == "resnet-flex"


@pytest.mark.parametrize("method", ["GetCustomJob", "ListCustomJobs", "GetPersistentResource"])
def test_reads_ride_out_one_unavailable_answer(
    vertex_transport: str, vertex_admin: VertexAdmin, method: str
) -> None:
    created = vertex.create_custom_job(PARENT, seed_page_job("r-jjjjjjjjjjjjjjjjjjjjjjjj"))
    vertex_admin.add_fault(method=method, code="UNAVAILABLE", count=1)

    read = {
        "GetCustomJob": lambda: vertex.get_custom_job(created.name).name,
        "ListCustomJobs": lambda: (
            vertex.find_jobs_by_label(PARENT, RUN_LABEL, "r-jjjjjjjjjjjjjjjjjjjjjjjj")[0].name
        ),
        "GetPersistentResource": lambda: vertex.get_persistent_resource(POOL_NAME).name,
    }[method]

    assert read()
    assert len(vertex_admin.requests(method)) == 2


@pytest.mark.parametrize("method", ["GetCustomJob", "ListCustomJobs", "CancelCustomJob"])
def test_a_resource_exhausted_read_or_cancel_is_throttled_and_not_retried(
    vertex_transport: str, vertex_admin: VertexAdmin, method: str
) -> None:
    created = vertex.create_custom_job(PARENT, seed_page_job("r-kkkkkkkkkkkkkkkkkkkkkkkk"))
    # Whatever the message: a read or a cancel draws on no resource quota, only on requests.
    vertex_admin.add_fault(method=method, code="RESOURCE_EXHAUSTED", message="Quota exceeded.")
    call = {
        "GetCustomJob": lambda: vertex.get_custom_job(created.name),
        "ListCustomJobs": lambda: list(vertex.list_custom_jobs(PARENT)),
        "CancelCustomJob": lambda: vertex.cancel_custom_job(created.name),
    }[method]

    with pytest.raises(vertex.VertexThrottled, match=method):
        call()

    assert len(vertex_admin.requests(method)) == 1  # left to the caller's backoff


def test_reads_that_stay_unavailable_end_as_backend_unavailable(
    vertex_transport: str, vertex_admin: VertexAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vertex, "_READ_RETRY", vertex._READ_RETRY.with_timeout(1.0))
    vertex_admin.add_fault(method="GetCustomJob", code="UNAVAILABLE")
    with pytest.raises(BackendUnavailable, match="GetCustomJob"):
        vertex.get_custom_job(f"{PARENT}/customJobs/1")


@pytest.mark.parametrize(
    ("key", "value"),
    [("vd-run", 'r-1" OR labels.x="y'), ("VD-RUN", "r-1"), ("vd-run", ""), ("vd-run", "x" * 64)],
)
def test_find_by_label_refuses_what_is_not_a_label(key: str, value: str) -> None:
    with pytest.raises(vertex.VertexRejected, match="label"):
        vertex.find_jobs_by_label(PARENT, key, value)


@pytest.mark.parametrize(
    ("name", "region"),
    [
        (PARENT, REGION),
        (f"{PARENT}/customJobs/123", REGION),
        ("projects/123456789012/locations/europe-west4/persistentResources/p", "europe-west4"),
    ],
)
def test_region_of_reads_the_location(name: str, region: str) -> None:
    assert vertex.region_of(name) == region


@pytest.mark.parametrize("name", ["", "customJobs/1", "projects/p/regions/us-central1"])
def test_region_of_refuses_what_is_not_a_vertex_name(name: str) -> None:
    with pytest.raises(vertex.VertexRejected, match="not a Vertex AI resource name"):
        vertex.region_of(name)
