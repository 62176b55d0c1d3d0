"""A ``completion: quiet`` route's keys, its ``dataset`` pattern, and whether that covers ``match``.

Users write (docs/configuration.md, "Quiet completion")::

    - name: nightly-export
      gcs:
        bucket: acme-exports
        match: "exports/*/part-*.parquet"
        completion: quiet
        dataset: "exports/{date}/"     # the directory an object belongs to
        quiet_for: 10m                 # no new object for this long: complete (at least 1m)
        min_objects: 100               # ... and at least this many objects (default 1)
        after_start: ignore            # objects written after the run started: ignore | new_run

**The dataset pattern**: literal text and ``{name}`` placeholders, ending in ``/``. A placeholder
stands for one or more characters of one directory name (``shared.decode.datasets``, which
matches objects to it at run time). Each name appears once, two placeholders never touch (where
would one end?), and no name is a built-in (``{bucket}``, ``{run_id}``, ...): the values become
route parameters beside the built-ins.

**Covering ``match``**: every object ``match`` can match must lie under a dataset directory, or it
would arrive with nowhere to go. The pattern names k directories; ``match`` covers them when:

- its first k directory names hold no ``**`` (which stands for any number of directories) and no
  character class that may match ``/``;
- each of them matches only names the pattern's directory k matches (``*`` under ``{date}``
  yes, ``*`` under ``daily`` no, ``2026-*`` under ``{date}`` yes);
- something follows the k-th ``/`` (``exports/{date}/`` covers ``exports/*/part-*.parquet`` and
  ``exports/*/**``, not ``exports/**``, ``exports/*.csv`` or ``other/*/x``).

An empty directory name (``exports//x``) is not counted against a ``*`` standing alone for a
directory: uploads do not write such names, and one that arrives is refused at run time. A
character class is taken as any one character when that cannot be judged (``[0-9]`` under a
placeholder is fine; under literal text write the literal text).

Glob semantics are ``shared.decode.routing``'s (``*`` and ``?`` within a directory, ``**``
across); the config layer may not import the decode layer, so the few tokens are read here again,
and tests/unit/config/test_quiet.py checks the verdicts against the decoder's own regexes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from shared.config.durations import describe_duration
from shared.config.fields import read_duration, read_int, read_text
from shared.config.model import (
    DEFAULT_QUIET_FOR,
    MIN_QUIET_FOR,
    QUIET_KEYS,
    AfterStart,
    GcsRoute,
    QuietRule,
    Route,
)
from shared.config.placeholders import BUILTIN_NAMES, PARAM_NAME, PLACEHOLDER
from shared.config.problems import Problems, child, item

AFTER_START_NAMES = {choice.value: choice for choice in AfterStart}
GLOB_CHARACTERS = frozenset("*?[]")
DATASET_EXAMPLE = 'e.g. "exports/{date}/" for objects such as exports/2026-12-01/part-00042.parquet'

_BRACE_TEXT = re.compile(r"\{[^{}/]*\}?")
# The glob tokens of shared.decode.routing (_GLOB_TOKEN), in the same order of preference.
_GLOB_TOKEN = re.compile(r"\*\*/|\*\*|\*|\?|\[!?\]?[^\]]*\]")


@dataclass(frozen=True)
class DatasetPattern:
    """A checked ``dataset`` pattern: its directories, each a tuple of literal text and names."""

    text: str
    directories: tuple[tuple[str, ...], ...]  # each part: literal text, or "{name}"
    names: tuple[str, ...]


def read_quiet_rule(
    gcs: Mapping[str, Any], path: str, problems: Problems, *, quiet: bool, match: str | None
) -> QuietRule | None:
    """The route's ``QuietRule`` when its completion is quiet, its ``dataset`` covering
    ``match`` (when that could be read); otherwise each quiet key it sets is a problem (it would
    silently do nothing)."""
    if not quiet:
        for key in QUIET_KEYS:
            if gcs.get(key) is not None:
                problems.add(
                    child(path, key),
                    f"{key} applies only to completion: quiet (a dataset without a marker, "
                    "complete once no new object arrived for quiet_for); set completion: quiet "
                    "or remove it",
                )
        return None
    dataset = read_dataset_pattern(gcs.get("dataset"), child(path, "dataset"), problems)
    if dataset is not None and match is not None:
        uncovered = coverage_problem(dataset, match)
        if uncovered is not None:
            problems.add(
                child(path, "dataset"),
                f"{dataset.text!r} does not cover match {match!r}: {uncovered}",
            )
            dataset = None
    quiet_for = read_quiet_for(gcs.get("quiet_for"), child(path, "quiet_for"), problems)
    min_objects = read_int(gcs.get("min_objects"), child(path, "min_objects"), problems, minimum=1)
    after_start = read_after_start(gcs.get("after_start"), child(path, "after_start"), problems)
    if dataset is None or quiet_for is None or after_start is None:
        return None
    return QuietRule(
        dataset=dataset.text,
        quiet_for=quiet_for,
        min_objects=1 if min_objects is None else min_objects,
        after_start=after_start,
    )


def read_quiet_for(value: object, path: str, problems: Problems) -> timedelta | None:
    """``quiet_for``: at least ``MIN_QUIET_FOR``; ``DEFAULT_QUIET_FOR`` when left out, None when
    wrong (once the problem is recorded)."""
    if value is None:
        return DEFAULT_QUIET_FOR
    length = read_duration(value, path, problems)
    if length is not None and length < MIN_QUIET_FOR:
        problems.add(
            path,
            f"{describe_duration(length) if length else '0s'} is too short: a dataset must be "
            f"quiet for at least {describe_duration(MIN_QUIET_FOR)}, or an upload pausing "
            "between two shards (a retry, a slow client) would start its run early; e.g. 10m",
        )
        return None
    return length


def read_after_start(value: object, path: str, problems: Problems) -> AfterStart | None:
    """``after_start``: ``ignore`` (default) or ``new_run``."""
    if value is None:
        return AfterStart.IGNORE
    name = read_text(value, path, problems)
    if name is None:
        return None
    choice = AFTER_START_NAMES.get(name)
    if choice is None:
        problems.add(
            path,
            f"{name!r} is not a choice: use ignore (objects written after the run started do "
            "nothing) or new_run (they make a new version of the dataset, with its own run)",
        )
    return choice


def check_quiet_against_data_timeout(
    routes: Mapping[int, Route], data_timeout: timedelta, problems: Problems
) -> None:
    """Each quiet route's ``quiet_for`` is shorter than ``data_timeout``: a dataset must be able
    to go quiet before its run gives up waiting (and dispatch's memory of a waiting version,
    ``policy.quiet.horizon``, relies on a version not ending within one quiet period)."""
    for index, route in routes.items():
        quiet_for = route.quiet.quiet_for if isinstance(route, GcsRoute) and route.quiet else None
        if quiet_for is not None and quiet_for >= data_timeout:
            problems.add(
                child(child(item("routes", index), "gcs"), "quiet_for"),
                f"{describe_duration(quiet_for)} is not shorter than data_timeout "
                f"({describe_duration(data_timeout)}): such a dataset would give up before it "
                "could go quiet; shorten quiet_for or lengthen data_timeout",
            )


# --- the dataset pattern ---------------------------------------------------------------------


def read_dataset_pattern(value: object, path: str, problems: Problems) -> DatasetPattern | None:
    """A ``dataset`` pattern, checked (rules in the module docstring); None when it is wrong."""
    if value is None:
        problems.add(
            path,
            "is required with completion: quiet: name the directory an object's dataset is, "
            + DATASET_EXAMPLE,
        )
        return None
    text = read_text(value, path, problems)
    if text is None:
        return None
    reason = dataset_pattern_problem(text)
    if reason is not None:
        problems.add(path, f"{text!r} {reason}")
        return None
    return parse_dataset_pattern(text)


def dataset_pattern_problem(text: str) -> str | None:
    """What is wrong with ``text`` as a ``dataset`` pattern (a sentence to follow it), or None."""
    if text.startswith("/"):
        return "starts with /: object names have no leading /; remove it"
    if not text.endswith("/"):
        return f"must end with / (it names a directory), {DATASET_EXAMPLE}"
    glob = sorted(GLOB_CHARACTERS & set(text))
    if glob:
        return (
            f"holds {' '.join(glob)}: a dataset pattern is literal text and {{name}} "
            "placeholders, not a glob (match is the glob); write {name} where a directory varies"
        )
    if "//" in text:
        return "has an empty directory name (//); remove the extra /"
    names: list[str] = []
    for brace in _BRACE_TEXT.finditer(text):
        placeholder = PLACEHOLDER.fullmatch(brace.group())
        if placeholder is None or not PARAM_NAME.fullmatch(placeholder.group(1)):
            return (
                f"holds {brace.group()!r}, which is not a placeholder: write {{name}} with a "
                "name of letters, digits and _, not starting with a digit, within one directory"
            )
        names.append(placeholder.group(1))
    if "}" in PLACEHOLDER.sub("", text):
        return "holds a } that closes no placeholder; remove it"
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        return f"names {{{repeated[0]}}} twice: give each directory placeholder its own name"
    builtins = sorted(set(names) & BUILTIN_NAMES)
    if builtins:
        return (
            f"uses {{{builtins[0]}}}, a name dispatch fills itself; name the placeholder "
            "after what the directory holds, e.g. {date}"
        )
    if "}{" in text:
        return "has two placeholders side by side: put literal text between them (e.g. {a}-{b})"
    return None


def parse_dataset_pattern(text: str) -> DatasetPattern:
    """The directories of a pattern ``dataset_pattern_problem`` accepted."""
    directories = tuple(
        tuple(part for part in re.split(r"(\{[A-Za-z0-9_]+\})", directory) if part)
        for directory in text[:-1].split("/")
    )
    names = tuple(PLACEHOLDER.findall(text))
    return DatasetPattern(text=text, directories=directories, names=names)


# --- covering match --------------------------------------------------------------------------

_OTHER = ""  # the symbol standing for every character the two patterns do not name
_CROSSING = ("**", "**/")


def coverage_problem(pattern: DatasetPattern, match: str) -> str | None:
    """Why some object ``match`` can match lies under no ``pattern`` directory, or None when
    ``pattern`` covers ``match`` (rules in the module docstring).

    The reason is a sentence about ``match``, to follow "dataset ... does not cover match ...: ".
    """
    directories = len(pattern.directories)
    segments: list[list[str]] = [[]]
    position = 0
    for token in _tokens(match):
        if len(segments) <= directories and token in _CROSSING:
            return (
                f"its directory {len(segments)} holds **, which stands for any number of "
                "directories, so its objects are not all under a dataset directory "
                f"({_directory_text(pattern, len(segments) - 1)!r} there); write * instead, or "
                "use a dataset pattern with fewer directories"
            )
        if len(segments) > directories:
            break
        if token == "/":
            segments.append([])
        else:
            segments[-1].append(token)
        position += len(token)
    if len(segments) <= directories:
        return (
            f"it names objects {_deep(len(segments) - 1)}, above the dataset's directories "
            f"({_deep(directories)}), so they would belong to no dataset; make match name the "
            "objects under the dataset's directories"
        )
    if not match[position:]:
        return (
            "it ends where a dataset directory ends, so it names the directory itself, not "
            f"objects under it; add what the objects are called, e.g. {match + '*'!r} or "
            f"{match + '**'!r}"
        )
    for index, (segment, directory) in enumerate(
        zip(segments[:directories], pattern.directories, strict=True)
    ):
        if any(_may_match_slash(token) for token in segment):
            return (
                f"its directory {index + 1} holds a character class with /, which may match /, "
                "so its objects are not all under a dataset directory; take the / out"
            )
        witness = _uncovered_name(segment, directory)
        if witness is not None:
            return (
                f"its directory {index + 1} may be named {witness!r}, which the dataset's "
                f"{_directory_text(pattern, index)!r} does not match; make the two agree "
                "(a {name} placeholder matches any one directory name)"
            )
    return None


def _may_match_slash(token: str) -> bool:
    return _is_class(token) and not token.startswith("[!") and "/" in token


def _deep(directories: int) -> str:
    return f"{directories} director{'y' if directories == 1 else 'ies'} deep"


def _tokens(match: str) -> list[str]:
    """``match`` as glob tokens and single characters; "/" stands alone."""
    tokens: list[str] = []
    position = 0
    for token in _GLOB_TOKEN.finditer(match):
        tokens.extend(match[position : token.start()])
        tokens.append(token.group())
        position = token.end()
    tokens.extend(match[position:])
    return tokens


def _directory_text(pattern: DatasetPattern, index: int) -> str:
    return "".join(pattern.directories[index])


def _uncovered_name(segment: list[str], directory: tuple[str, ...]) -> str | None:
    """A non-empty directory name the glob ``segment`` matches and ``directory`` does not, or None.

    Both are small automata over the characters either names plus one "other" symbol; the
    check walks their product (the glob's states x the subset of the pattern's), which is the
    textbook inclusion test of two regular languages.
    """
    literals = {token for token in segment if len(token) == 1 and token not in "*?"} | {
        character for part in directory if not part.startswith("{") for character in part
    }
    alphabet = [*sorted(literals), _OTHER]
    glob_start = _glob_closure({0}, segment)
    pattern_start = frozenset({(0, 0)})
    seen: set[tuple[frozenset[int], frozenset[tuple[int, int]]]] = set()
    frontier: list[tuple[frozenset[int], frozenset[tuple[int, int]], str]] = [
        (glob_start, pattern_start, "")
    ]
    while frontier:
        glob_states, pattern_states, name = frontier.pop()
        for symbol in alphabet:
            glob_next = _glob_step(glob_states, segment, symbol)
            if not glob_next:
                continue
            pattern_next = _pattern_step(pattern_states, directory, symbol)
            text = name + (symbol or _other_character(literals))
            if len(segment) in glob_next and not _pattern_accepts(pattern_next, directory):
                return text
            if (glob_next, pattern_next) not in seen:
                seen.add((glob_next, pattern_next))
                frontier.append((glob_next, pattern_next, text))
    return None


def _glob_closure(states: set[int], segment: list[str]) -> frozenset[int]:
    closed = set(states)
    for state in sorted(states):
        position = state
        while position < len(segment) and segment[position] == "*":
            position += 1  # * may match nothing
            closed.add(position)
    return frozenset(closed)


def _glob_step(states: frozenset[int], segment: list[str], symbol: str) -> frozenset[int]:
    following: set[int] = set()
    for state in states:
        if state == len(segment):
            continue
        token = segment[state]
        if token == "*":
            following.add(state)
        elif token in ("?", symbol) or (_is_class(token) and _class_may_match(token, symbol)):
            following.add(state + 1)
    return _glob_closure(following, segment)


def _is_class(token: str) -> bool:
    return len(token) > 1 and token.startswith("[")


def _class_may_match(token: str, symbol: str) -> bool:
    """Whether the class may match ``symbol``; "other" may always be one of its characters."""
    if symbol == _OTHER:
        return True
    negated = token.startswith("[!")
    members = (token[2:-1] if negated else token[1:-1]).replace("\\", "\\\\")
    if not negated and members.startswith("^"):
        members = "\\" + members
    try:
        return re.fullmatch(f"[^/{members}]" if negated else f"[{members}]", symbol) is not None
    except re.error:
        return True  # the decoder refuses it when it compiles the route's match


# A pattern state is (part index, characters of that literal part consumed); a placeholder part
# is left after one character or more: (index, 1) means "inside it, may end here".


def _pattern_step(
    states: frozenset[tuple[int, int]], directory: tuple[str, ...], symbol: str
) -> frozenset[tuple[int, int]]:
    following: set[tuple[int, int]] = set()
    for state in _pattern_closure(states, directory):
        index, consumed = state
        if index == len(directory):
            continue
        part = directory[index]
        if part.startswith("{"):
            following.add((index, 1))
        elif consumed < len(part) and part[consumed] == symbol:
            following.add((index, consumed + 1))
    return frozenset(following)


def _pattern_closure(
    states: frozenset[tuple[int, int]], directory: tuple[str, ...]
) -> set[tuple[int, int]]:
    closed = set(states)
    for index, consumed in states:
        if index < len(directory):
            part = directory[index]
            done = consumed == 1 if part.startswith("{") else consumed == len(part)
            if done:
                closed.add((index + 1, 0))
    return closed


def _pattern_accepts(states: frozenset[tuple[int, int]], directory: tuple[str, ...]) -> bool:
    return (len(directory), 0) in _pattern_closure(states, directory)


def _other_character(literals: set[str]) -> str:
    return next(character for character in "xyzqXYZQ0123456789_" if character not in literals)
