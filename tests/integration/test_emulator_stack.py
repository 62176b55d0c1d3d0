"""The emulator stack: each emulator works with the real client library, and stop leaves nothing.

The ``ManagedProcess`` tests use plain shell commands, so they need no emulator and run anywhere.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from emulator_stack import (
    EmulatorStartError,
    FirestoreEmulator,
    ManagedProcess,
    PrerequisiteMissing,
    PubSubEmulator,
    StorageEmulator,
    VertexAIEmulator,
    start_emulators,
    start_pubsub_emulator,
    vertex_ai_emulator_available,
)
from emulator_stack.process_group import is_alive, live_members
from emulator_stack.readiness import tcp_open


def _never_ready() -> bool:
    return False


# --- ManagedProcess, with shell commands -------------------------------------------------------


def test_stop_ends_a_child_that_outlives_its_parent(tmp_path: Path) -> None:
    # Like gcloud and its Java server: the parent dies on SIGTERM, its child ignores SIGTERM.
    process = ManagedProcess(
        "orphan-maker",
        ["sh", "-c", '(trap "" TERM; exec sleep 300) & echo started; wait'],
        tmp_path / "orphan-maker.log",
    )
    process.start()
    process.wait_until_ready(lambda: "started" in process.log_tail(), timeout_seconds=10)
    members = live_members(process.process_group_id)
    assert len(members) == 2

    started = time.monotonic()
    process.stop(grace_seconds=0.5)

    assert time.monotonic() - started >= 0.5, "SIGTERM alone cannot have ended the child"
    assert [pid for pid in members if is_alive(pid)] == []
    assert not process.is_running()


def test_early_exit_is_reported_with_the_log_tail(tmp_path: Path) -> None:
    process = ManagedProcess(
        "crasher", ["sh", "-c", "echo 'port already in use' >&2; exit 3"], tmp_path / "c.log"
    )
    process.start()

    with pytest.raises(EmulatorStartError) as raised:
        process.wait_until_ready(_never_ready, timeout_seconds=10)

    message = str(raised.value)
    assert "crasher exited with code 3" in message
    assert "port already in use" in message
    assert str(tmp_path / "c.log") in message


def test_missed_deadline_is_reported_and_the_process_stopped(tmp_path: Path) -> None:
    process = ManagedProcess("sleeper", ["sh", "-c", "echo waiting; sleep 300"], tmp_path / "s.log")
    process.start()

    with pytest.raises(EmulatorStartError, match=r"(?s)not ready after 0.3 s.*waiting"):
        process.wait_until_ready(_never_ready, timeout_seconds=0.3)

    assert not process.is_running()


def test_missing_emulator_component_names_the_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(PrerequisiteMissing, match="google-cloud-cli-pubsub-emulator"):
        start_pubsub_emulator(tmp_path, sdk_root=tmp_path / "empty-sdk")


# --- each emulator with its client library -----------------------------------------------------


def test_pubsub_delivers_a_published_message(
    pubsub_emulator: PubSubEmulator, local_project: str, fresh_name
) -> None:
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(local_project, fresh_name("requests"))
    subscription = subscriber.subscription_path(local_project, fresh_name("dispatch"))
    publisher.create_topic(name=topic)
    subscriber.create_subscription(name=subscription, topic=topic)

    publisher.publish(topic, b"train resnet", kind="train").result(timeout=10)

    received = []
    deadline = time.monotonic() + 10
    while not received and time.monotonic() < deadline:
        response = subscriber.pull(subscription=subscription, max_messages=1, timeout=5)
        received = list(response.received_messages)
    assert [each.message.data for each in received] == [b"train resnet"]
    assert received[0].message.attributes["kind"] == "train"
    subscriber.acknowledge(subscription=subscription, ack_ids=[received[0].ack_id])


def test_firestore_create_is_refused_when_the_document_exists(
    clean_firestore: FirestoreEmulator, local_project: str
) -> None:
    from google.api_core.exceptions import AlreadyExists
    from google.cloud import firestore

    document = firestore.Client(project=local_project).collection("runs").document("run-1")
    document.create({"attempt": 1})

    with pytest.raises(AlreadyExists):
        document.create({"attempt": 2})
    assert document.get().to_dict() == {"attempt": 1}


def test_firestore_reset_deletes_every_document(
    clean_firestore: FirestoreEmulator, local_project: str
) -> None:
    from google.cloud import firestore

    document = firestore.Client(project=local_project).collection("runs").document("run-1")
    document.create({"attempt": 1})

    clean_firestore.reset(local_project)

    assert not document.get().exists


def test_storage_lists_uploaded_objects_by_prefix(
    clean_storage: StorageEmulator, local_project: str, fresh_name
) -> None:
    from google.cloud import storage

    client = storage.Client(project=local_project)
    bucket = client.create_bucket(fresh_name("datasets"))
    for name in ("imagenet/2024/_SUCCESS", "imagenet/2024/part-0", "cifar/_SUCCESS"):
        bucket.blob(name).upload_from_string(b"x")

    listed = [blob.name for blob in client.list_blobs(bucket.name, prefix="imagenet/")]

    assert sorted(listed) == ["imagenet/2024/_SUCCESS", "imagenet/2024/part-0"]


def test_storage_wipe_deletes_every_bucket(
    clean_storage: StorageEmulator, local_project: str, fresh_name
) -> None:
    from google.cloud import storage

    client = storage.Client(project=local_project)
    client.create_bucket(fresh_name("datasets"))

    clean_storage.wipe()

    assert list(client.list_buckets()) == []


@pytest.mark.skipif(
    not vertex_ai_emulator_available(), reason="`python -m vertex_ai_emulator` does not exist yet"
)
def test_vertex_ai_emulator_is_healthy_on_both_ports(vertex_ai_emulator: VertexAIEmulator) -> None:
    with urllib.request.urlopen(vertex_ai_emulator.admin_url + "health", timeout=5) as response:
        assert response.status == 200
        assert json.load(response) == {"status": "ok"}
    assert tcp_open(vertex_ai_emulator.host, vertex_ai_emulator.grpc_port)()


@pytest.mark.skipif(
    not vertex_ai_emulator_available(), reason="`python -m vertex_ai_emulator` does not exist yet"
)
def test_vertex_ai_reset_clears_the_request_log(
    clean_vertex_ai: VertexAIEmulator, local_project: str
) -> None:
    parent = f"projects/{local_project}/locations/us-central1"
    urllib.request.urlopen(f"http://{clean_vertex_ai.address}/v1/{parent}/customJobs").close()
    assert _logged_requests(clean_vertex_ai) != []

    clean_vertex_ai.reset()

    assert _logged_requests(clean_vertex_ai) == []


def _logged_requests(emulator: VertexAIEmulator) -> list[dict]:
    with urllib.request.urlopen(emulator.admin_url + "requests", timeout=5) as response:
        return json.load(response)["requests"]


# --- stopping ----------------------------------------------------------------------------------


@pytest.mark.integration
def test_stopping_the_pubsub_emulator_leaves_no_process_of_its_group(tmp_path: Path) -> None:
    emulator = start_pubsub_emulator(tmp_path)
    members = live_members(emulator.process.process_group_id)
    assert members, "the emulator's group should have live processes while it runs"

    emulator.stop()

    assert [pid for pid in members if is_alive(pid)] == []
    assert live_members(emulator.process.process_group_id) == []
    assert not tcp_open(emulator.host, emulator.port)()


@pytest.mark.integration
def test_a_stack_starts_emulators_concurrently_and_stops_them_all(tmp_path: Path) -> None:
    started = time.monotonic()
    with start_emulators(["pubsub", "storage"], tmp_path) as stack:
        elapsed = time.monotonic() - started
        slowest = max(emulator.startup_seconds for emulator in stack.emulators.values())
        total = sum(emulator.startup_seconds for emulator in stack.emulators.values())
        assert slowest <= elapsed < total, "a concurrent start takes the slowest, not the sum"
        assert set(stack.env) == {"PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST"}
        groups = [emulator.process.process_group_id for emulator in stack.emulators.values()]

    assert [group for group in groups if live_members(group)] == []
