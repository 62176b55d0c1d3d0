"""The layers of ``shared/`` (docs/architecture.md), enforced from the code's own imports.

- Pure layers (model, policy, decode, config, validation) import no adapter, no handler and no
  Google Cloud client: read statically (every import statement, including those inside
  functions), and checked again at run time by importing each module in a fresh interpreter.
  Protocol-buffer messages are data, not clients: ``shared.aiplatform`` may hand the pure layers
  ``aiplatform_v1`` types, and ``google.protobuf`` / ``google.rpc`` messages are allowed.
- The model imports only the model; adapters import no handler; nothing in ``shared`` imports
  the operator tooling or the local emulators.
- Neither the modules nor the packages import each other in a cycle.

Each failure names the module and the import that breaks the rule.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "shared"
OTHER_PACKAGES = {"functions": REPO / "functions", "tooling": REPO / "tooling"}

PURE_LAYERS = (
    "shared.model",
    "shared.policy",
    "shared.decode",
    "shared.config",
    "shared.validation",
)
ADAPTERS = "shared.adapters"
HANDLERS = "shared.handlers"
# Foundation modules every layer may use: the lazy door to aiplatform_v1 and structured logging.
FOUNDATION = ("shared", "shared.aiplatform", "shared.logs")
OUTSIDE_THE_LIBRARY = ("tooling", "functions", "emulator_stack", "vertex_ai_emulator", "bench")

# Google modules that are messages (data), not clients: allowed in the pure layers.
MESSAGE_MODULES = ("google.protobuf", "google._upb", "google.rpc", "google.type", "proto")
# What loading aiplatform_v1's types pulls in besides messages: namespace packages and the
# version helpers of google.api_core's package __init__ (no client, no transport).
MESSAGE_SUPPORT = frozenset(
    {
        "google",
        "google.cloud",
        "google.api_core",
        "google.api_core.version",
        "google.api_core._python_package_support",
        "google.api_core._python_version_support",
        "google.cloud.aiplatform_v1.gapic_version",
    }
)


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        path = module_path(self.importer).relative_to(REPO)
        return f"{path}:{self.line} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_path(name: str) -> Path:
    path = REPO / Path(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def project_modules() -> tuple[str, ...]:
    roots = [LIBRARY, *OTHER_PACKAGES.values()]
    return tuple(
        sorted(
            module_name(path)
            for root in roots
            for path in root.rglob("*.py")
            if "__pycache__" not in path.parts
        )
    )


def _imports_of(name: str) -> Iterator[Import]:
    path = module_path(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            known = set(project_modules())
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            found = [module for module in submodules if module in known]
            yield from (Import(name, module, node.lineno) for module in found or [target])


@cache
def imports() -> tuple[Import, ...]:
    return tuple(found for name in project_modules() for found in _imports_of(name))


def _within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _library_modules(*layers: str) -> list[str]:
    return [module for module in project_modules() if _within(module, *layers)]


def _violations(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [
        str(found)
        for found in imports()
        if _within(found.importer, *importers) and _within(found.imported, *forbidden)
    ]


def test_the_pure_layers_import_no_adapter_and_no_handler() -> None:
    assert _violations(PURE_LAYERS, (ADAPTERS, HANDLERS)) == []


def test_the_pure_layers_import_no_google_module_but_messages() -> None:
    found = [
        str(each)
        for each in imports()
        if _within(each.importer, *PURE_LAYERS)
        and _within(each.imported, "google", "grpc")
        and not _within(each.imported, *MESSAGE_MODULES)
    ]
    assert found == []


def test_the_model_imports_only_the_model() -> None:
    layers = ("shared.policy", "shared.decode", "shared.config", "shared.validation")
    assert _violations(("shared.model",), (*layers, ADAPTERS, HANDLERS)) == []


def test_adapters_import_no_handler() -> None:
    assert _violations((ADAPTERS,), (HANDLERS,)) == []


def test_the_library_imports_no_tooling_and_no_local_emulator() -> None:
    assert _violations(("shared",), OUTSIDE_THE_LIBRARY) == []


def test_the_function_entry_points_import_only_the_library() -> None:
    assert _violations(("functions",), ("tooling", "emulator_stack", "vertex_ai_emulator")) == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _package_of(module: str) -> str:
    """The layer a module belongs to: a subpackage of shared, or a top-level package."""
    parts = module.split(".")
    if parts[0] == "shared" and len(parts) > 1 and (LIBRARY / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


def test_no_module_imports_itself_through_others() -> None:
    edges: dict[str, set[str]] = {}
    for each in imports():
        # A package's __init__ is imported by its own modules implicitly, not a cycle.
        inside = each.importer.startswith(each.imported + ".")
        if each.imported in project_modules() and each.imported != each.importer and not inside:
            edges.setdefault(each.importer, set()).add(each.imported)
    assert _cycles(edges) == []


def test_no_package_imports_itself_through_others() -> None:
    edges: dict[str, set[str]] = {}
    for each in imports():
        source, target = _package_of(each.importer), _package_of(each.imported)
        ours = each.imported.split(".")[0] in {"shared", *OTHER_PACKAGES}
        if ours and source != target and (target not in FOUNDATION or source == "shared"):
            edges.setdefault(source, set()).add(target)
    assert _cycles(edges) == []


_LOADED = """
import json, sys
import {module}
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("module", _library_modules(*PURE_LAYERS))
def test_importing_a_pure_module_loads_no_client_and_no_adapter(module: str) -> None:
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", _LOADED.format(module=module)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        ).stdout
    )
    clients = [
        name
        for name in loaded
        if _within(name, "google", "grpc")
        and not _within(name, *MESSAGE_MODULES, "google.cloud.aiplatform_v1.types")
        and name not in MESSAGE_SUPPORT
        and name != "google.cloud.aiplatform_v1"  # the lazy package shared.aiplatform installs
    ]
    layers = [name for name in loaded if _within(name, ADAPTERS, HANDLERS)]
    assert (clients, layers) == ([], [])
