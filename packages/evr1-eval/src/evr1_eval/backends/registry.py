"""Backend registry: a dict of factories filled by `@register("name")`; unknown names suggest the closest ones."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TypeVar

from evr1_eval.backends.base import Backend, BackendConfig

Factory = Callable[[BackendConfig], Backend]
F = TypeVar("F", bound=Factory)

_BACKENDS: dict[str, Factory] = {}


def register(name: str) -> Callable[[F], F]:
    """Register a backend factory (usually the class) under `name`; a second registration of a name is a bug."""

    def deco(factory: F) -> F:
        if name in _BACKENDS:
            raise ValueError(f"backend {name!r} is already registered (by {_BACKENDS[name]!r})")
        _BACKENDS[name] = factory
        return factory

    return deco


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def create_backend(name: str, config: BackendConfig) -> Backend:
    """Instantiate a registered backend (it is not started yet: `await backend.start()`)."""
    try:
        factory = _BACKENDS[name]
    except KeyError:
        close = difflib.get_close_matches(name, _BACKENDS, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(backend_names())}.{hint}") from None
    return factory(config)


def check_backend(name: str, config: BackendConfig) -> None:
    """Fail fast, before any sample is loaded: the backend's constructor validates its settings, and its optional
    `check()` that its engine is installed and `--model` exists (raising `BackendError` with one line)."""
    backend = create_backend(name, config)
    check = getattr(backend, "check", None)
    if callable(check):
        check()
