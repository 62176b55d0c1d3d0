"""YAML text to plain Python data, safely and strictly.

``yaml.safe_load`` builds only plain types (no objects from tags), but it silently keeps the last
of two equal keys in a mapping: a template pasted twice, or ``args`` given twice, would lose
half the user's intent without a word. This loader refuses duplicate keys instead.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.constructor import ConstructorError


class _StrictSafeLoader(yaml.SafeLoader):
    """``SafeLoader`` that rejects a key appearing twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *anchor" may repeat on purpose
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable):
                if key in seen:
                    raise ConstructorError(
                        None,
                        None,
                        f"key {key!r} appears twice in this mapping; keep one of them",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> object:
    """The document in ``text``; ``ValueError`` saying where the syntax is wrong and why."""
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # as safe as safe_load: same loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ValueError(f"YAML syntax error at {where}: {error.problem}") from error
    except yaml.YAMLError as error:
        raise ValueError(f"YAML syntax error: {error}") from error
