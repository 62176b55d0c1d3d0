"""ListCustomJobs with a label filter, page by page through the client's pager."""

from __future__ import annotations

import pytest
from emulator_test_support import PARENT, flex_start_job

pytestmark = pytest.mark.integration


def test_a_label_filter_lists_only_matching_jobs_across_pages(job_client, admin):
    for index in range(5):
        job_client.create_custom_job(
            parent=PARENT, custom_job=flex_start_job(f"wanted-{index}", labels={"run": "wanted"})
        )
    for index in range(2):
        job_client.create_custom_job(
            parent=PARENT, custom_job=flex_start_job(f"other-{index}", labels={"run": "other"})
        )

    pager = job_client.list_custom_jobs(
        request={"parent": PARENT, "filter": 'labels.run="wanted"', "page_size": 2}
    )
    pages = list(pager.pages)

    assert [len(page.custom_jobs) for page in pages] == [2, 2, 1]
    listed = sorted(job.display_name for page in pages for job in page.custom_jobs)
    assert listed == [f"wanted-{index}" for index in range(5)]
    assert len(admin.requests("ListCustomJobs")) == 3


def test_an_unfiltered_list_of_an_empty_location_is_empty(job_client, admin):
    assert list(job_client.list_custom_jobs(parent=PARENT)) == []
