"""Collecting configuration problems and reporting them all in one ``ConfigError``.

Validation does not stop at the first mistake: every reader records what it finds in a
``Problems`` list under the key path of the offending value (for example
``templates.resnet-a100.worker_pools[0].accelerator.count``), and the loader raises one
``InvalidConfig`` naming the file and listing every problem, each with its fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shared.model.errors import ConfigError

# The rule a problem found while reading the config breaks, unless it names another (a guard).
CONFIG_RULE = "config"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the configuration: where, which rule, and what to change."""

    path: str  # the key path, e.g. "routes[2].gcs.bucket"; "" for the document itself
    message: str  # the rule broken and the fix, as one or two sentences
    rule: str = CONFIG_RULE  # "config", or the validation rule id it shares (guard-image, ...)

    def __str__(self) -> str:
        return f"{self.path or '(top level)'}: {self.message}"


class InvalidConfig(ConfigError):
    """The configuration breaks one or more rules; ``problems`` lists every one of them."""

    def __init__(self, source: str, problems: tuple[Problem, ...]) -> None:
        self.source = source
        self.problems = problems
        count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"config {source} has {count}:\n{lines}")


class Problems:
    """An ordered list of problems found while reading one configuration."""

    def __init__(self) -> None:
        self._found: list[Problem] = []

    def add(self, path: str, message: str, *, rule: str = CONFIG_RULE) -> None:
        self._found.append(Problem(path, message, rule))

    def add_root_cause(self, path: str, message: str, *, rule: str = CONFIG_RULE) -> None:
        """Add a problem unless one is already recorded at ``path`` or inside it.

        For checks that judge a value read earlier: when that value could not be read (a
        ``timeout: 2 days``), the check saw it as missing, and its complaint is only noise
        after the real one.
        """
        if not self.reported(path):
            self.add(path, message, rule=rule)

    def reported(self, path: str) -> bool:
        """Whether a problem is recorded at key ``path`` or at a key inside it."""
        return any(
            found.path == path or found.path.startswith((f"{path}.", f"{path}[", f"{path}("))
            for found in self._found
        )

    def __len__(self) -> int:
        return len(self._found)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self._found)

    def raise_if_any(self, source: str) -> None:
        if self._found:
            raise InvalidConfig(source, tuple(self._found))


def child(path: str, key: str) -> str:
    """The key path of ``key`` inside the mapping at ``path``."""
    return f"{path}.{key}" if path else key


def item(path: str, index: int) -> str:
    """The key path of element ``index`` of the list at ``path``."""
    return f"{path}[{index}]"
