"""shared.adapters.storage against the Cloud Storage emulator: listing a dataset's directory."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

import pytest

from emulator_stack import LOCAL_PROJECT, StorageEmulator
from shared.adapters import clients, storage


def test_list_objects_gives_every_object_under_a_prefix_with_its_generation_size_and_time(
    storage_emulator: StorageEmulator, fresh_name: Callable[[str], str]
) -> None:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("quiet"))
    for name in ("exports/d1/part-0", "exports/d1/deeper/part-1", "exports/d2/part-0"):
        bucket.blob(name).upload_from_string(name.encode())

    listed = {found.name: found for found in storage.list_objects(bucket.name, "exports/d1/")}

    assert sorted(listed) == ["exports/d1/deeper/part-1", "exports/d1/part-0"]
    shard = listed["exports/d1/part-0"]
    assert shard.size == len(b"exports/d1/part-0")
    assert shard.generation > 0
    assert shard.updated.tzinfo is not None
    assert shard.md5_hash == base64.b64encode(hashlib.md5(b"exports/d1/part-0").digest()).decode()


def test_list_objects_pages_past_a_thousand(
    storage_emulator: StorageEmulator, fresh_name: Callable[[str], str]
) -> None:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("quiet"))
    for n in range(storage.LIST_PAGE_SIZE + 5):
        bucket.blob(f"d/part-{n:05d}").upload_from_string(b"x")

    assert sum(1 for _ in storage.list_objects(bucket.name, "d/")) == storage.LIST_PAGE_SIZE + 5


def test_listing_a_missing_bucket_is_dataset_unreadable(storage_emulator: StorageEmulator) -> None:
    with pytest.raises(storage.DatasetUnreadable):
        list(storage.list_objects("no-such-bucket-vd", "x/"))


def test_list_objects_one_level_deep_with_a_delimiter(
    storage_emulator: StorageEmulator, fresh_name: Callable[[str], str]
) -> None:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("manifest"))
    for name in ("d/part-0", "d/part-1", "d/part-9/nested", "d/other", "d/deeper/part-2"):
        bucket.blob(name).upload_from_string(b"x")

    listed = storage.list_objects(bucket.name, "d/part-", delimiter="/")

    assert [found.name for found in listed] == ["d/part-0", "d/part-1"]


def test_read_object_reads_the_generation_asked_for(
    storage_emulator: StorageEmulator, fresh_name: Callable[[str], str]
) -> None:
    bucket = clients.storage_client(LOCAL_PROJECT).create_bucket(fresh_name("manifest"))
    blob = bucket.blob("d/manifest.json")
    blob.upload_from_string(b'{"files": ["a"]}')
    uri = f"gs://{bucket.name}/d/manifest.json"

    # The emulator serves the live object whatever generation is asked (Cloud Storage serves
    # that generation, or 404 once it is gone): what it can show is the read and the 404.
    assert storage.read_object(uri, 100, blob.generation) == b'{"files": ["a"]}'
    assert storage.read_object(uri, 100) == b'{"files": ["a"]}'
    blob.delete()
    with pytest.raises(storage.DatasetUnreadable, match=f"#{blob.generation} does not exist"):
        storage.read_object(uri, 100, blob.generation)
