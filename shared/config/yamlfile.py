"""The config's text (YAML, or JSON, which is YAML) to plain Python data, safely and strictly.

``parse_yaml`` reads any YAML document the way ``shared.config.yamlloaders`` does: only plain
types, and a key given twice in one mapping is an error, not silently the last one.

The config is parsed on every cold start, and importing PyYAML is the largest cost of a cold
start that matches no route (15 to 19 ms, 6 to 7 ms of it one regular expression in
``yaml.reader``). So text that is a JSON object which YAML reads the same way is read with
``json`` instead, which every Cloud Function has imported already; that is what the bundle's
config is (``deploy/bundle.py`` writes the validated YAML document as JSON, with each file its
templates refer to). Anything else, a syntax error included, goes to the YAML parser: every
document means, and every error message reads, what it did when YAML read everything.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Where PyYAML (YAML 1.1) reads a JSON text otherwise than ``json``, the text goes to YAML:
# - a tab (not whitespace between tokens to PyYAML) or a raw DEL (refused by PyYAML);
# - a raw character YAML takes as a line break (NEL, LS, PS: folded to a space inside a quoted
#   string) or refuses in a document (C0 and C1 controls, surrogates, U+FFFE and U+FFFF), and
#   the byte-order mark; escaped (``\u0085``) each reads the same in both;
# - a surrogate escape (``\ud83d\ude00``: one character to ``json``, two to PyYAML);
# - a number YAML 1.1 reads as text (``1e3``, ``1.5e3``, ``NaN``, ``Infinity``: ``_yaml_float``);
# - a key twice in one object (``json`` keeps the last one; YAML says which key it is).
_NOT_JSON_WHITESPACE = ("\t", "\x7f")
_LINE_BREAKS_AND_MARK = frozenset("\x85\u2028\u2029\ufeff")
_SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F]"


class _ReadByYaml(Exception):
    """This JSON text is one YAML reads otherwise: leave it to YAML."""


def parse_yaml(text: str) -> object:
    """The document in ``text``; ``ValueError`` saying where the syntax is wrong and why."""
    document = parse_json_object(text)
    if document is not None:
        return document
    from shared.config.yamlloaders import load_yaml  # imports PyYAML: only for YAML text

    return load_yaml(text)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The object in ``text`` when it is a JSON object that YAML reads the same, else None.

    For such text ``parse_yaml`` returns this object without importing PyYAML;
    ``deploy/bundle.py`` checks that every file it writes into a bundle is read here.
    """
    if not text.lstrip(" \r\n").startswith("{"):
        return None
    if any(character in text for character in _NOT_JSON_WHITESPACE):
        return None
    if not text.isascii() and not all(map(yaml_reads_as_itself, set(text))):
        return None
    if ("\\ud" in text or "\\uD" in text) and re.search(_SURROGATE_ESCAPE, text):
        return None
    try:
        document = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_float=_yaml_float,
            parse_constant=_not_a_yaml_number,
        )
    except (ValueError, _ReadByYaml):  # json.JSONDecodeError is a ValueError
        return None
    return document if isinstance(document, dict) else None


def yaml_reads_as_itself(character: str) -> bool:
    """A character PyYAML's reader accepts in a document (``Reader.NON_PRINTABLE``) and does not
    take as a line break; not the byte-order mark."""
    code = ord(character)
    if code < 0x80:
        return character.isprintable() or character in "\n\r"
    allowed = 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000
    return allowed and character not in _LINE_BREAKS_AND_MARK


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _ReadByYaml  # YAML refuses it, naming the key
    return document


def _yaml_float(literal: str) -> float:
    """A JSON fraction or exponent that YAML 1.1 also reads as a number: a ``.`` in the
    mantissa, and a sign on the exponent (``1.5``, ``1.0e-05``); ``1e3`` and ``1.5e3`` are text
    to YAML 1.1."""
    mantissa, _, exponent = literal.lower().partition("e")
    if "." not in mantissa or (exponent and exponent[0] not in "+-"):
        raise _ReadByYaml
    return float(literal)


def _not_a_yaml_number(literal: str) -> object:
    raise _ReadByYaml  # NaN, Infinity and -Infinity are text to YAML
