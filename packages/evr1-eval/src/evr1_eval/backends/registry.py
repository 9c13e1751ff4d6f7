"""Backend registry: a dict of factories filled by `@register("name")`; unknown names suggest the closest ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from evr1_cache.registry import lookup, register_unique
from evr1_eval.backends.base import Backend, BackendConfig

Factory = Callable[[BackendConfig], Backend]
F = TypeVar("F", bound=Factory)

_BACKENDS: dict[str, Factory] = {}


def register(name: str) -> Callable[[F], F]:
    """Register a backend factory (usually the class) under `name`; a second registration of a name is a bug."""

    def deco(factory: F) -> F:
        entry: Factory = factory  # (the table holds factories; `factory` keeps its own type for the caller)
        register_unique(_BACKENDS, name, entry, "backend")
        return factory

    return deco


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def create_backend(name: str, config: BackendConfig) -> Backend:
    """Instantiate a registered backend (it is not started yet: `await backend.start()`)."""
    return lookup(_BACKENDS, name, "backend")(config)


def check_backend(name: str, config: BackendConfig) -> None:
    """Fail fast, before any sample is loaded: the backend's constructor validates its settings, and its optional
    `check()` that its engine is installed and `--model` exists (raising `BackendError` with one line)."""
    backend = create_backend(name, config)
    check = getattr(backend, "check", None)
    if callable(check):
        check()
