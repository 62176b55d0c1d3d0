"""Broken configs: ``parse_config`` refuses them with a ConfigError naming the key, never crashes.

Hypothesis replaces the value at a random key path of the example config with a random YAML value
(wrong type, huge, odd Unicode, nested junk) or feeds raw text; the only exception allowed is
``ConfigError``, so a bad deploy fails with a message instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config.loader import parse_config
from shared.model.errors import ConfigError

EXAMPLE_CONFIG = Path(__file__).parents[2] / "examples" / "config.yaml"
EXAMPLE = yaml.safe_load(EXAMPLE_CONFIG.read_text())
PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(["", "0", "-1s", "48h", "1e9", "{run_id}", "..", "gs://", "\u202e", "😀"]),
    st.integers(min_value=2_000, max_value=100_000).map(lambda n: "a" * n),
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)


def key_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in the parsed example: dict keys and list indices."""
    paths = [prefix] if prefix else []
    children = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in children:
        paths.extend(key_paths(child, (*prefix, key)))
    return paths


EXAMPLE_PATHS = key_paths(EXAMPLE)


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(document) if isinstance(document, dict) else list(document)
    copy[path[0]] = replaced(copy[path[0]], path[1:], value)
    return copy


def parse_or_config_error(text: str) -> None:
    try:
        parse_config(text, "mutated.yaml", EXAMPLE_CONFIG.parent)
    except ConfigError as error:
        assert str(error)


def test_the_example_parses() -> None:
    parse_config(EXAMPLE_CONFIG.read_text(), "example.yaml", EXAMPLE_CONFIG.parent)


@PROPERTY_SETTINGS
@given(path=st.sampled_from(EXAMPLE_PATHS), value=yaml_values)
def test_a_random_value_at_a_random_key_is_a_config_error_or_valid(
    path: tuple[Any, ...], value: Any
) -> None:
    parse_or_config_error(yaml.safe_dump(replaced(EXAMPLE, path, value), allow_unicode=True))


def without(document: Any, path: tuple[Any, ...]) -> Any:
    """``document`` with the key or list item at ``path`` removed."""
    head, last = path[0], path[1:]
    if last:
        return replaced(document, (head,), without(document[head], last))
    if isinstance(document, dict):
        return {key: value for key, value in document.items() if key != head}
    return [item for index, item in enumerate(document) if index != head]


@PROPERTY_SETTINGS
@given(path=st.sampled_from(EXAMPLE_PATHS))
def test_a_missing_key_is_a_config_error_or_valid(path: tuple[Any, ...]) -> None:
    parse_or_config_error(yaml.safe_dump(without(EXAMPLE, path), allow_unicode=True))


@PROPERTY_SETTINGS
@given(
    text=st.one_of(
        st.text(max_size=200), st.binary(max_size=100).map(lambda b: b.decode("latin-1"))
    )
)
def test_raw_text_is_a_config_error(text: str) -> None:
    parse_or_config_error(text)
