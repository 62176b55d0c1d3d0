"""shared.config.yamlfile: a JSON object is read without PyYAML only where YAML reads it the same;
everything else, errors included, is read by YAML exactly as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.config.yamlfile import parse_json_object, parse_yaml
from shared.config.yamlloaders import _StrictSafeLoader, load_yaml

REPO = Path(__file__).resolve().parents[3]
CONFIGS = [REPO / "examples" / "config.yaml", REPO / "bench" / "dispatch-config.yaml"]


def _yaml_reads(text: str) -> object:
    """What PyYAML's strict pure-Python loader, the reference, makes of ``text``."""
    return yaml.load(text, Loader=_StrictSafeLoader)  # as safe as safe_load: same loader


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
@pytest.mark.parametrize("indent", [None, 1])
def test_a_config_written_as_json_is_read_without_yaml_and_the_same(
    path: Path, indent: int | None
) -> None:
    document = _yaml_reads(path.read_text(encoding="utf-8"))
    text = json.dumps(document, indent=indent)
    assert parse_json_object(text) == document
    assert parse_yaml(text) == document == _yaml_reads(text)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": 1, "a": 2}', "a key twice: YAML names it"),
        ('{"a": 1e3}', "no '.': text to YAML 1.1"),
        ('{"a": 1.5e3}', "an exponent without its sign: text to YAML 1.1"),
        ('{"a": NaN}', "NaN is text to YAML"),
        ('{"a": -Infinity}', "so is -Infinity"),
        ('{\t"a": 1}', "a tab between tokens: an error to PyYAML"),
        ('{"a": "\x7f"}', "a raw DEL: PyYAML refuses it"),
        ('{"a": "x\x85y"}', "a raw NEL: a line break to YAML, folded to a space"),
        ('{"a": "x\u2028y"}', "a raw line separator"),
        ('{"a": "\ufeffx"}', "a byte-order mark"),
        ('{"a": "\x9f"}', "a C1 control: PyYAML refuses it"),
        ('{"a": "\\ud83d\\ude00"}', "a surrogate pair: one character to json, two to PyYAML"),
        ('{"a": 1} # note', "a comment: YAML only"),
        ("[1, 2]", "not an object"),
        ('{"a": }', "not JSON"),
        ("a: 1", "YAML"),
        ("", "empty"),
    ],
)
def test_text_yaml_reads_otherwise_is_left_to_yaml(text: str, why: str) -> None:
    assert parse_json_object(text) is None, why
    try:
        expected: object = load_yaml(text)
    except ValueError as error:
        with pytest.raises(ValueError) as raised:
            parse_yaml(text)
        assert str(raised.value) == str(error)
    else:
        assert parse_yaml(text) == expected


def test_a_duplicate_key_in_json_is_the_yaml_error() -> None:
    with pytest.raises(ValueError, match="key 'a' appears twice in this mapping"):
        parse_yaml('{"a": 1, "b": {}, "a": 2}')


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1.5, "b": -0.0, "c": 1.0e-05, "d": 2.5E+300, "e": 10000000000000000000000}',
        '{"a": "\\u0085 \\u2028 \\u007f \\ufeff \\u00e9 \\/ \\b \\f \\u0000"}',
        '{"a": "é ü 😀 \ue000", "<<": {"b": null, "c": [true, false]}}',
        '\r\n {"a":\r\n  [1,\n 2],"":""}\n',
    ],
)
def test_json_yaml_reads_the_same_is_read_without_yaml(text: str) -> None:
    document = parse_json_object(text)
    assert document is not None
    assert document == _yaml_reads(text) == yaml.load(text, Loader=yaml.CSafeLoader)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_DOCUMENTS = st.dictionaries(
    st.text(),
    st.recursive(
        _SCALARS,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
        ),
        max_leaves=12,
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(document=_DOCUMENTS, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_whatever_json_is_read_without_yaml_reads_as_yaml_reads_it(
    document: dict, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only, indent=indent)
    read = parse_json_object(text)
    if read is not None:
        assert read == _yaml_reads(text)


def test_reading_json_imports_no_yaml_and_reading_yaml_does() -> None:
    # A fresh interpreter: the test process has imported PyYAML long ago.
    code = (
        "import sys\n"
        "from shared.config.yamlfile import parse_yaml\n"
        "assert parse_yaml('{\"project\": \"acme-ml\"}') == {'project': 'acme-ml'}\n"
        "print('yaml' in sys.modules)\n"
        "assert parse_yaml('project: acme-ml') == {'project': 'acme-ml'}\n"
        "print('yaml' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.split() == ["False", "True"]
