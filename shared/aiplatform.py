"""The one door to ``google.cloud.aiplatform_v1``: its protos and clients, imported lazily.

Why: ``from google.cloud import aiplatform_v1`` costs about 1.8 s and 45 MiB in a fresh process
(docs/architecture.md, "Costs"), because the package's ``__init__`` imports all ~40 services and
every type module, and importing any submodule (``aiplatform_v1.types.custom_job``) runs that
``__init__`` first. Dispatch uses two services and a dozen types; on a cold start it paid for the
rest.

How: the package's own ``__init__`` is read (not run) before anything imports it. Each
``from .sub.module import Name`` line becomes an entry of a table; the package is registered in
``sys.modules`` as a module whose ``__getattr__`` imports ``sub.module`` when ``Name`` is first
asked for, and caches it. Every other statement of the ``__init__`` (its ``__all__``, its
``__version__``, its Python-version checks) runs as written. The ``types`` subpackage gets the same
treatment, since every proto module imports it. ``__path__`` is the real one, so submodules import
as usual and the objects are the very ones a normal import gives. This is what the package asks
for itself on Python 3.15+ (its ``__lazy_modules__``, PEP 810).

Use it as ``from shared.aiplatform import CustomJob`` (any public name of ``aiplatform_v1``) or
``from shared.aiplatform import aiplatform_v1``; importing ``google.cloud.aiplatform_v1`` directly
after this module works too (it is the same lazy package).

If the layout changes: nothing breaks, it only gets slower. An ``__init__`` this module does not
understand (a star import, a name of ``__all__`` it cannot place, unreadable source, an error
while running its other statements) is imported the normal way; a name whose lazy import fails
makes the package run its real ``__init__`` in place, which then succeeds or fails exactly as the
normal import would. A package someone imported before this module is used as it is.
``LAZY_PACKAGES`` says which packages ended up lazy (tests check that the installed version still
is, so an upgrade that silently loses the speed-up is noticed).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

PACKAGE: Final = "google.cloud.aiplatform_v1"
TYPES_PACKAGE: Final = f"{PACKAGE}.types"

LAZY_PACKAGES: set[str] = set()
"""The packages installed lazily by this process (the others were imported the normal way)."""


@dataclass(frozen=True)
class _Layout:
    """A package ``__init__`` split in two: what may wait, and what runs now."""

    deferred: Mapping[str, tuple[str, str]]  # public name -> (absolute module, attribute)
    immediate: ast.Module  # every other statement, run at install as the real __init__ would


def lazy_package(name: str) -> ModuleType:
    """The package ``name``, lazy when its ``__init__`` is understood, else imported normally."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    layout = _layout_of(spec) if spec is not None else None
    if spec is None or layout is None:
        return importlib.import_module(name)
    module = importlib.util.module_from_spec(spec)
    full_load = _full_loader(module, spec)
    module.__dict__["__getattr__"] = _resolver(module, layout.deferred, full_load)
    module.__dict__["__dir__"] = lambda: sorted(set(module.__dict__) | set(layout.deferred))
    sys.modules[name] = module
    parent_name, _, child_name = name.rpartition(".")
    if parent_name:
        setattr(sys.modules[parent_name], child_name, module)
    try:
        exec(compile(layout.immediate, spec.origin or name, "exec"), module.__dict__)
        bound = module.__dict__.keys() | layout.deferred.keys()
        if not set(module.__dict__.get("__all__", ())) <= bound:
            raise ImportError(f"{name}.__all__ names something its __init__ does not import")
    except Exception:
        full_load()  # a layout we misread: run the real __init__, as a normal import would
        return module
    LAZY_PACKAGES.add(name)
    return module


def _layout_of(spec: ModuleSpec) -> _Layout | None:
    """The package's ``__init__`` split into deferred names and the rest; None if not plain."""
    if spec.origin is None or spec.submodule_search_locations is None or spec.loader is None:
        return None
    get_source = getattr(spec.loader, "get_source", None)
    try:
        source = get_source(spec.name) if get_source else None
        tree = ast.parse(source) if source else None
    except (ImportError, OSError, SyntaxError, ValueError):
        return None
    if tree is None:
        return None
    deferred: dict[str, tuple[str, str]] = {}
    immediate: list[ast.stmt] = []
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module:
            for alias in statement.names:
                if alias.name == "*":
                    return None  # which names a star import binds is known only by running it
                module_name = f"{spec.name}.{statement.module}"
                deferred[alias.asname or alias.name] = (module_name, alias.name)
        elif isinstance(statement, ast.ImportFrom) and statement.level > 0:
            return None  # "from . import x" or "from ..x import y": not the generated layout
        else:
            immediate.append(statement)
    if not deferred:
        return None
    return _Layout(deferred, ast.Module(body=immediate, type_ignores=[]))


def _resolver(
    module: ModuleType, deferred: Mapping[str, tuple[str, str]], full_load: Callable[[], None]
) -> Callable[[str], Any]:
    """The package's ``__getattr__``: a deferred name, or a submodule, imported on first use."""

    def resolve(attribute: str) -> Any:
        if attribute in deferred:
            module_name, name = deferred[attribute]
            try:
                value = getattr(importlib.import_module(module_name), name)
            except (ImportError, AttributeError):
                full_load()  # the normal import's outcome, whatever it is
                return getattr(module, attribute)
            setattr(module, attribute, value)  # cached: __getattr__ runs once per name
            return value
        if attribute.startswith("__"):
            raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")
        submodule_name = f"{module.__name__}.{attribute}"
        try:
            return importlib.import_module(submodule_name)
        except ModuleNotFoundError as error:
            if error.name != submodule_name:
                raise  # the submodule exists but imports something missing: say so
            raise AttributeError(
                f"module {module.__name__!r} has no attribute {attribute!r}"
            ) from None

    return resolve


def _full_loader(module: ModuleType, spec: ModuleSpec) -> Callable[[], None]:
    """Runs the package's real ``__init__`` in ``module``, once, making it a plain package."""
    lock = threading.RLock()
    loaded = False

    def full_load() -> None:
        nonlocal loaded
        with lock:
            if loaded:
                return
            loaded = True
            LAZY_PACKAGES.discard(module.__name__)
            module.__dict__.pop("__getattr__", None)
            module.__dict__.pop("__dir__", None)
            assert spec.loader is not None  # checked by _layout_of
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module.__name__, None)  # as a failed normal import leaves it
                raise

    return full_load


if TYPE_CHECKING:
    from google.cloud import aiplatform_v1
    from google.cloud.aiplatform_v1 import *  # noqa: F403  (what __getattr__ serves, typed)
else:
    aiplatform_v1 = lazy_package(PACKAGE)
    lazy_package(TYPES_PACKAGE)  # now, before a proto module imports it the eager way

    def __getattr__(name: str) -> Any:
        """Any public name of ``aiplatform_v1``: ``from shared.aiplatform import CustomJob``."""
        return getattr(aiplatform_v1, name)
