"""Lazy package exports for the workspace: a package's public names load from their submodules on first use.

Importing evr1_cache, evr1_train or one of their subpackages must stay light (no numpy, torch or verl), yet their
`__init__` exports names whose modules are heavy. `lazy_exports` returns the module-level `__getattr__` and `__dir__`
(PEP 562) that import a name's module when the name is first read, keep the value in the package, and read
`__version__` from the installed metadata. (evr1-rewards, a leaf that imports no other package, reads its own version.)

Names (stable): lazy_exports.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str], *, dist: str | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for `package`: `table` maps each lazy name to the module defining it; with `dist`,
    `__version__` is that distribution's installed version ("0+unknown" in a source tree never installed)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name == "__version__" and dist is not None:  # the installed metadata is the one truth (~20 ms: lazily)
            from importlib.metadata import PackageNotFoundError, version

            try:
                return version(dist)
            except PackageNotFoundError:
                return "0+unknown"
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace.get("__all__", ()))

    return __getattr__, __dir__
