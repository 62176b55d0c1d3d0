"""shared.decode.manifests: manifests in both formats, pins, listings, and what is missing."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from shared.decode.manifests import (
    MAX_MANIFEST_FILES,
    InvalidManifest,
    Listing,
    ManifestFile,
    listing_plan,
    missing_files,
    parse_manifest,
    split_gs_uri,
)

BASE = "gs://acme-datasets/coco/2026-12-01/"
MD5 = "XUFAKrxLKna5cZ2REBfFkg=="  # base64 of md5(b"hello")
MD5_HEX = "5d41402abc4b2a76b9719d911017c592"


def _uris(text: str | bytes, base: str = BASE, *, is_json: bool = False) -> list[str]:
    return [listed.uri for listed in parse_manifest(text, base, is_json=is_json)]


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
        "gs://acme-datasets/vocab/labels.txt\r\n",
        [BASE + "train-00000.tfrecord", "gs://acme-datasets/vocab/labels.txt"],
    ),
    (
        json.dumps({"files": ["images/000001.jpg", "gs://acme-datasets/vocab/labels.txt"]}),
        [BASE + "images/000001.jpg", "gs://acme-datasets/vocab/labels.txt"],
    ),
    (
        b'  {"files": ["caf\xc3\xa9.jpg"], "created_by": "export.py"}',
        [BASE + "café.jpg"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_parse_manifest(text: str | bytes, expected: list[str]) -> None:
    assert _uris(text) == expected
    assert all(listed == ManifestFile(listed.uri) for listed in parse_manifest(text, BASE))


def test_a_manifest_at_the_bucket_root_resolves_against_the_bucket() -> None:
    assert _uris("part-0", "gs://acme-datasets/") == ["gs://acme-datasets/part-0"]


PINNED = [
    ({"path": "a"}, ManifestFile(BASE + "a")),
    ({"path": "a", "generation": 17}, ManifestFile(BASE + "a", generation=17)),
    # Cloud Storage shows int64 values as JSON strings: a pin copied from it works as is.
    ({"path": "a", "generation": "17", "size": "0"}, ManifestFile(BASE + "a", 17, 0)),
    ({"path": "a", "size": 1024, "md5": MD5}, ManifestFile(BASE + "a", size=1024, md5=MD5)),
    ({"path": "a", "md5": MD5_HEX}, ManifestFile(BASE + "a", md5=MD5)),  # md5sum's hex
    ({"path": "gs://acme-datasets/x/a", "md5": None}, ManifestFile("gs://acme-datasets/x/a")),
]


@pytest.mark.parametrize(("entry", "expected"), PINNED)
def test_a_json_entry_may_pin_generation_size_and_md5(
    entry: dict[str, object], expected: ManifestFile
) -> None:
    assert parse_manifest(json.dumps({"files": ["b", entry]}), BASE) == [
        ManifestFile(BASE + "b"),
        expected,
    ]


def test_a_file_listed_twice_alike_is_listed_once() -> None:
    entries = [{"path": "a", "size": 3}, {"path": BASE + "a", "size": "3"}]
    assert parse_manifest(json.dumps({"files": entries}), BASE) == [
        ManifestFile(BASE + "a", size=3)
    ]


INVALID = [
    ("", "lists no files"),
    ("# only a comment\n\n", "lists no files"),
    ("\n".join(f"part-{i}" for i in range(MAX_MANIFEST_FILES + 1)), "10001 files"),
    (b"part-0\n\xff\n", "not UTF-8"),
    ("x" * (4 * 1024 * 1024 + 1), "over 4194304 bytes"),
    ('{"files": ["a",}', "is not valid JSON"),
    ('["a", "b"]', "fix the files key"),
    ('{"paths": ["a"]}', "fix the files key"),
    ('{"files": "a"}', "fix the files key"),
    ('{"files": ["a", 3]}', "files[1]: an entry must be a name or"),
    ('{"files": [{"name": "a"}]}', "files[0]: an entry must be a name or"),
    ('{"files": [{"path": "a", "crc32c": "x"}]}', "files[0]: unknown key 'crc32c'"),
    ('{"files": [{"path": "a", "generation": 0}]}', "generation 0 must be an integer of at"),
    ('{"files": [{"path": "a", "generation": true}]}', "generation True must be"),
    ('{"files": [{"path": "a", "size": -1}]}', "size -1 must be an integer of at least 0"),
    ('{"files": [{"path": "a", "size": 1.5}]}', "size 1.5 must be"),
    ('{"files": [{"path": "a", "size": "12kB"}]}', "size '12kB' must be"),
    ('{"files": [{"path": "a", "md5": "abc"}]}', "md5 'abc' is not an MD5 digest"),
    ('{"files": [{"path": "a", "size": 1}, {"path": "a", "size": 2}]}', "listed twice"),
    ("gs://acme-shared/vocab/labels.txt", "outside the manifest's bucket acme-datasets"),
    ('{"files": ["gs://other-bucket/a"]}', "files[0]: 'gs://other-bucket/a' is outside"),
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


def test_a_manifest_named_json_must_be_json() -> None:
    with pytest.raises(InvalidManifest, match="is not valid JSON"):
        parse_manifest("part-0\npart-1\n", BASE, is_json=True)
    assert _uris('{"files": ["part-0"]}', is_json=True) == [BASE + "part-0"]


@pytest.mark.parametrize("base_uri", ["gs://acme-datasets/coco", "/tmp/coco/", "gs://A/"])
def test_base_uri_must_be_a_gs_directory(base_uri: str) -> None:
    with pytest.raises(ValueError, match="base_uri"):
        parse_manifest("part-0", base_uri)


@dataclass(frozen=True)
class Stored:
    generation: int = 7
    size: int = 5
    md5_hash: str | None = MD5


MISSING = [
    pytest.param(ManifestFile(BASE + "a"), None, BASE + "a", id="absent"),
    pytest.param(ManifestFile(BASE + "a"), Stored(), None, id="present, nothing pinned"),
    pytest.param(ManifestFile(BASE + "a", 7, 5, MD5), Stored(), None, id="every pin holds"),
    pytest.param(
        ManifestFile(BASE + "a", generation=6),
        Stored(),
        BASE + "a (generation is 7, pinned 6)",
        id="another generation",
    ),
    pytest.param(
        ManifestFile(BASE + "a", size=9, md5="AAAAAAAAAAAAAAAAAAAAAA=="),
        Stored(),
        BASE + f"a (size is 5, pinned 9; md5 is {MD5}, pinned AAAAAAAAAAAAAAAAAAAAAA==)",
        id="size and md5 differ",
    ),
    pytest.param(
        ManifestFile(BASE + "a", md5=MD5),
        Stored(md5_hash=None),
        BASE + f"a (md5 is absent (a composite object has no MD5), pinned {MD5})",
        id="composite object, md5 pinned",
    ),
]


@pytest.mark.parametrize(("listed", "stored", "expected"), MISSING)
def test_missing_files_says_which_pin_differs(
    listed: ManifestFile, stored: Stored | None, expected: str | None
) -> None:
    found = {} if stored is None else {listed.uri: stored}
    assert missing_files([listed], found) == ([] if expected is None else [expected])


def test_missing_files_keeps_the_manifests_order() -> None:
    files = [ManifestFile(BASE + name) for name in ("d", "a", "c", "b")]
    found = {BASE + "a": Stored(), BASE + "c": Stored()}
    assert missing_files(files, found) == [BASE + "d", BASE + "b"]


def _files(*names: str) -> list[ManifestFile]:
    return [ManifestFile(f"gs://acme-datasets/{name}") for name in names]


SHARDS = [f"coco/part-{n:05d}.tfrecord" for n in range(10_000)]
LISTINGS = [
    pytest.param(
        _files(*SHARDS),
        [Listing("coco/part-0", tuple(SHARDS))],
        id="10,000 shards of one directory: one listing, 10 calls",
    ),
    pytest.param(
        _files("coco/a/x", "coco/b/y", "coco/a/z", "vocab.txt"),
        [
            Listing("vocab.txt", ("vocab.txt",)),
            Listing("coco/a/", ("coco/a/x", "coco/a/z")),
            Listing("coco/b/y", ("coco/b/y",)),
        ],
        id="one per directory; a lone file lists itself",
    ),
    pytest.param(
        _files(*(f"d{n:03d}/part-0" for n in range(40))),
        [Listing(f"d{n:03d}/part-0", (f"d{n:03d}/part-0",)) for n in range(40)],
        id="many directories: one bounded listing each, never the bucket",
    ),
]


def test_a_listing_stops_after_the_pages_its_files_fill_plus_one() -> None:
    assert Listing("d/", ("d/a",)).max_shown == 2000
    assert Listing("d/", tuple(SHARDS)).max_shown == 11_000


@pytest.mark.parametrize(("files", "expected"), LISTINGS)
def test_listing_plan(files: list[ManifestFile], expected: list[Listing]) -> None:
    assert listing_plan(files) == expected


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
