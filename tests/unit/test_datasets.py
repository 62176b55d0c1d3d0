"""shared.decode.manifests: manifests in both formats, and the files still missing."""

from __future__ import annotations

import json

import pytest

from shared.decode.manifests import (
    MAX_MANIFEST_FILES,
    InvalidManifest,
    missing_files,
    parse_manifest,
    split_gs_uri,
)

BASE = "gs://acme-datasets/coco/2026-12-01/"

PARSED = [
    (
        "train-00000.tfrecord\ntrain-00001.tfrecord\n",
        [BASE + "train-00000.tfrecord", BASE + "train-00001.tfrecord"],
    ),
    (
        # `gcloud storage ls` output, with a comment, blank lines, CRLF and a duplicate
        "# written by export.py\r\n\r\n"
        "gs://acme-datasets/coco/2026-12-01/train-00000.tfrecord\r\n"
        "  train-00000.tfrecord  \r\n"
        "gs://acme-shared/vocab/labels.txt\r\n",
        [BASE + "train-00000.tfrecord", "gs://acme-shared/vocab/labels.txt"],
    ),
    (
        json.dumps({"files": ["images/000001.jpg", "gs://acme-shared/vocab/labels.txt"]}),
        [BASE + "images/000001.jpg", "gs://acme-shared/vocab/labels.txt"],
    ),
    (
        b'  {"files": ["caf\xc3\xa9.jpg"], "created_by": "export.py"}',
        [BASE + "café.jpg"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_parse_manifest(text: str | bytes, expected: list[str]) -> None:
    assert parse_manifest(text, BASE) == expected


def test_a_manifest_at_the_bucket_root_resolves_against_the_bucket() -> None:
    assert parse_manifest("part-0", "gs://acme-datasets/") == ["gs://acme-datasets/part-0"]


INVALID = [
    ("", "lists no files"),
    ("# only a comment\n\n", "lists no files"),
    ("\n".join(f"part-{i}" for i in range(MAX_MANIFEST_FILES + 1)), "10001 files"),
    (b"part-0\n\xff\n", "not UTF-8"),
    ("x" * (4 * 1024 * 1024 + 1), "over 4194304 bytes"),
    ('{"files": ["a",}', "not JSON"),
    ('{"paths": ["a"]}', "fix the files key"),
    ('{"files": ["a", 3]}', "fix the files key"),
    ("part-0\n../other-dataset/part-0\n", "line 2: '../other-dataset/part-0'"),
    ("./part-0", "'.' or '..'"),
    ("/abs/part-0", "line 1: '/abs/part-0' must be relative"),
    ("https://example.com/part-0", "not in Cloud Storage"),
    ("gs://Acme/part-0", "not a valid gs://BUCKET/OBJECT URI"),
    ("gs://acme-datasets/", "not a valid gs://BUCKET/OBJECT URI"),
    ('{"files": ["part\\u0000-0"]}', "files[0]: 'part\\x00-0' contains a control character"),
    ("x" * 1100, "object name of 1-1024 bytes"),
]


@pytest.mark.parametrize(("text", "message_part"), INVALID)
def test_invalid_manifests(text: str | bytes, message_part: str) -> None:
    with pytest.raises(InvalidManifest) as caught:
        parse_manifest(text, BASE)
    assert message_part in str(caught.value)
    assert BASE in str(caught.value)


@pytest.mark.parametrize("base_uri", ["gs://acme-datasets/coco", "/tmp/coco/", "gs://A/"])
def test_base_uri_must_be_a_gs_directory(base_uri: str) -> None:
    with pytest.raises(ValueError, match="base_uri"):
        parse_manifest("part-0", base_uri)


def test_missing_files_keeps_order_and_asks_once_per_file() -> None:
    present = {BASE + "a", BASE + "c"}
    asked: list[str] = []

    def exists(uri: str) -> bool:
        asked.append(uri)
        return uri in present

    files = [BASE + name for name in ("a", "b", "c", "d")]
    assert missing_files(files, exists) == [BASE + "b", BASE + "d"]
    assert asked == files


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("gs://acme-datasets/coco/part-0", ("acme-datasets", "coco/part-0")),
        ("gs://acme.example.com/a b", ("acme.example.com", "a b")),
    ],
)
def test_split_gs_uri(uri: str, expected: tuple[str, str]) -> None:
    assert split_gs_uri(uri) == expected


@pytest.mark.parametrize("uri", ["gs://acme-datasets/", "gs://acme-datasets", "s3://a-b/c"])
def test_split_gs_uri_refuses_non_objects(uri: str) -> None:
    with pytest.raises(ValueError, match="gs://BUCKET/OBJECT"):
        split_gs_uri(uri)
