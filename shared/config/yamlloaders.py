"""PyYAML's safe loaders made strict, and the YAML parse itself: imported only for text that is
not a JSON object YAML reads the same (``shared.config.yamlfile``), because importing PyYAML is
the largest cost of a cold start that reads a JSON config.

``yaml.safe_load`` builds only plain types (no objects from tags), but it silently keeps the last
of two equal keys in a mapping: a template pasted twice, or ``args`` given twice, would lose
half the user's intent without a word. These loaders refuse duplicate keys instead.

The parse uses libyaml (``CSafeLoader``, about ten times faster) when PyYAML was built with it.
Its error messages are terser than the pure-Python parser's ("found undefined alias" without the
alias), so a document libyaml refuses is parsed again by the pure-Python loader, whose verdict
and message are the ones reported: a broken config reads the same either way, and only the happy
path is faster.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.constructor import ConstructorError


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """``SafeConstructor`` that rejects a key appearing twice in one mapping."""

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


class _StrictSafeLoader(_UniqueKeys, yaml.SafeLoader):
    """The pure-Python safe loader, with unique keys: the reference for what is valid."""


_StrictFastLoader: type | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _StrictCSafeLoader(_UniqueKeys, yaml.CSafeLoader):
        """libyaml's safe loader, with unique keys: the same constructor, a C parser."""

    _StrictFastLoader = _StrictCSafeLoader


def load_yaml(text: str) -> object:
    """The YAML document in ``text``; ``ValueError`` saying where the syntax is wrong and why."""
    if _StrictFastLoader is not None:
        try:
            return yaml.load(text, Loader=_StrictFastLoader)  # as safe as safe_load
        except yaml.YAMLError:
            pass  # parsed again below, for the pure-Python parser's verdict and message
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # as safe as safe_load: same loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ValueError(f"YAML syntax error at {where}: {error.problem}") from error
    except yaml.YAMLError as error:
        raise ValueError(f"YAML syntax error: {error}") from error
