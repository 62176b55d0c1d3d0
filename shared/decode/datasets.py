"""Which dataset an object belongs to, for routes with ``completion: quiet``.

A route's ``dataset`` pattern names the directory of a dataset: literal text and ``{name}``
placeholders, ending in ``/``. A placeholder stands for one or more characters of one path
segment (never ``/``), so ``exports/{date}/`` puts ``exports/2026-12-01/part-00042.parquet``
in the dataset ``exports/2026-12-01/`` with ``date`` = ``2026-12-01``; an object deeper down
(``exports/2026-12-01/a/b.parquet``) belongs to the same dataset. The captures become route
parameters beside the trigger's built-ins.

Pure, and cheap: a pattern compiles once per instance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from shared.config.placeholders import PLACEHOLDER


@dataclass(frozen=True)
class DatasetMatch:
    """The dataset directory an object belongs to, and the values of the pattern's names."""

    prefix: str  # the directory, ending in "/"
    captures: Mapping[str, str] = field(default_factory=dict)


def is_folder_object(object_name: str) -> bool:
    """Whether ``object_name`` is a folder placeholder (``exports/2026-12-01/``, as the Cloud
    Console's "create folder" writes): it holds no data, so it is no object of any dataset."""
    return object_name.endswith("/")


def dataset_of(pattern: str, object_name: str) -> DatasetMatch | None:
    """The dataset of ``object_name`` under ``pattern``; None when the object is not under one
    (directly in the bucket's root above the pattern, or elsewhere)."""
    found = dataset_regex(pattern).match(object_name)
    if found is None or found.end() == len(object_name):
        return None  # not under it, or the object is the directory's own name
    return DatasetMatch(prefix=found.group(0), captures=found.groupdict())


@lru_cache(maxsize=256)
def dataset_regex(pattern: str) -> re.Pattern[str]:
    """The compiled prefix regex of a dataset pattern (a name used twice must match the same
    text twice)."""
    parts: list[str] = []
    seen: set[str] = set()
    position = 0
    for placeholder in PLACEHOLDER.finditer(pattern):
        parts.append(re.escape(pattern[position : placeholder.start()]))
        name = placeholder.group(1)
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>[^/]+)")
        seen.add(name)
        position = placeholder.end()
    parts.append(re.escape(pattern[position:]))
    return re.compile("".join(parts), re.DOTALL)
