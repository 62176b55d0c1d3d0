"""ListCustomJobs: parent scoping, newest first, filters through the service, paging tokens."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from core_builders import CANONICAL_PARENT, PARENT, job, new_emulator

from vertex_ai_emulator.core import Emulator
from vertex_ai_emulator.errors import EmulatorError
from vertex_ai_emulator.paging import MAX_PAGE_SIZE


def create_jobs(emulator: Emulator, count: int, **labels: str) -> list[str]:
    names = []
    for index in range(count):
        names.append(emulator.create_custom_job(PARENT, job(f"job-{index}", labels=labels)).name)
        emulator.advance_clock(index % 2)  # some share a create_time: ids break the tie
    return names


def all_pages(emulator: Emulator, parent: str, page_size: int, filter: str = "") -> list[list[str]]:
    pages, token = [], ""
    while True:
        response = emulator.list_custom_jobs(parent, filter, page_size, token)
        pages.append([listed.name for listed in response.custom_jobs])
        token = response.next_page_token
        if not token:
            return pages


def test_lists_newest_first_in_pages_with_empty_token_on_the_last() -> None:
    emulator = new_emulator()
    names = create_jobs(emulator, 7)
    pages = all_pages(emulator, PARENT, 3)
    assert pages == [names[::-1][0:3], names[::-1][3:6], names[::-1][6:7]]


def test_paging_is_stable_when_jobs_are_created_between_pages() -> None:
    emulator = new_emulator()
    names = create_jobs(emulator, 4)
    first = emulator.list_custom_jobs(PARENT, page_size=2)
    create_jobs(emulator, 2)
    second = emulator.list_custom_jobs(PARENT, page_size=2, page_token=first.next_page_token)
    assert [listed.name for listed in second.custom_jobs] == [names[1], names[0]]


def test_lists_only_jobs_of_the_parent_whether_named_by_id_or_number() -> None:
    emulator = new_emulator()
    mine = create_jobs(emulator, 2)
    emulator.create_custom_job("projects/acme-ml/locations/europe-west4", job())
    emulator.create_custom_job("projects/other/locations/us-central1", job())
    assert all_pages(emulator, CANONICAL_PARENT, 10) == [mine[::-1]]
    assert all_pages(emulator, PARENT, 10) == [mine[::-1]]


def test_filter_by_label_finds_a_run() -> None:
    emulator = new_emulator()
    create_jobs(emulator, 3, team="cv")
    wanted = emulator.create_custom_job(PARENT, job(labels={"run-key": "r-42"})).name
    assert all_pages(emulator, PARENT, 10, 'labels.run-key="r-42"') == [[wanted]]


@pytest.mark.parametrize(
    ("page_size", "page_token", "filter", "fragment"),
    [
        (-1, "", "", "page_size"),
        (0, "not-a-token", "", "Invalid page_token"),
        (0, "eyJ4IjoxfQ==", "", "Invalid page_token"),  # valid base64 JSON, wrong shape
        (1, "FROM_OTHER_QUERY", "labels.team=cv", "different list request"),
        (0, "", "nonsense here", "Invalid filter"),
    ],
)
def test_bad_list_requests_are_invalid_arguments(
    page_size: int, page_token: str, filter: str, fragment: str
) -> None:
    emulator = new_emulator()
    create_jobs(emulator, 3)
    if page_token == "FROM_OTHER_QUERY":
        page_token = emulator.list_custom_jobs(PARENT, page_size=1).next_page_token
    with pytest.raises(EmulatorError) as raised:
        emulator.list_custom_jobs(PARENT, filter, page_size, page_token)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in raised.value.message


def test_page_size_is_capped() -> None:
    emulator = new_emulator()
    create_jobs(emulator, 3)
    assert len(emulator.list_custom_jobs(PARENT, page_size=MAX_PAGE_SIZE * 10).custom_jobs) == 3


@pytest.mark.parametrize(
    "name",
    [
        "projects/acme-ml/locations/us-central1/customJobs",
        "projects/acme-ml/customJobs/1",
        "projects/acme-ml/locations/us-central1/persistentResources/1",
    ],
)
def test_malformed_job_names_are_invalid_arguments(name: str) -> None:
    with pytest.raises(EmulatorError) as raised:
        new_emulator().get_custom_job(name)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_job_is_not_found() -> None:
    with pytest.raises(EmulatorError) as raised:
        new_emulator().get_custom_job(f"{CANONICAL_PARENT}/customJobs/42")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND


def test_concurrent_creates_get_distinct_names() -> None:
    emulator = new_emulator()
    with ThreadPoolExecutor(max_workers=8) as pool:
        names = list(pool.map(lambda i: create_jobs(emulator, 1)[0], range(40)))
    assert len(set(names)) == 40
    assert len(emulator.list_custom_jobs(PARENT, page_size=100).custom_jobs) == 40
