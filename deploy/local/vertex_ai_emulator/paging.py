"""Pagination of list calls: page sizes and opaque, keyset-based page tokens.

A token records the sort key of the last item returned and a fingerprint of the query (parent and
filter), so the next page starts right after that item even if items were added or deleted in
between, and a token cannot be reused with a different query.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TypeVar

from vertex_ai_emulator.errors import invalid_argument

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

Item = TypeVar("Item")
SortKey = tuple[int | str, ...]


def paginate(
    items: Sequence[Item],
    sort_key: Callable[[Item], SortKey],
    query: str,
    page_size: int,
    page_token: str,
) -> tuple[list[Item], str]:
    """One page of `items` in ascending `sort_key` order, and the token of the next page
    ("" on the last page). `page_size` 0 means DEFAULT_PAGE_SIZE; above MAX_PAGE_SIZE it is
    capped."""
    if page_size < 0:
        raise invalid_argument(f"page_size must not be negative, got {page_size}.")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    ordered = sorted(items, key=sort_key)
    if page_token:
        after = _decode(page_token, _fingerprint(query))
        ordered = [item for item in ordered if list(sort_key(item)) > after]
    page = ordered[:size]
    if len(ordered) <= size:
        return page, ""
    return page, _encode(_fingerprint(query), list(sort_key(page[-1])))


def _fingerprint(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()[:16]


def _encode(fingerprint: str, after: list[int | str]) -> str:
    payload = json.dumps({"q": fingerprint, "after": after}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode()


def _decode(token: str, fingerprint: str) -> list[int | str]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(token.encode()))
        after = payload["after"]
        matches_query = payload["q"] == fingerprint
    except (ValueError, KeyError, TypeError):
        raise invalid_argument(f'Invalid page_token "{token}".') from None
    if not matches_query or not isinstance(after, list):
        raise invalid_argument(
            f'Invalid page_token "{token}": it belongs to a different list request.'
        )
    return after
