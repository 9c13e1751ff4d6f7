"""The registry pattern of evr1-cache (decoders, resamplers): a dict filled by a decorator that refuses taken names."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def registering(table: dict[str, _T], name: str, what: str) -> Callable[[_T], _T]:
    """A decorator adding its target to `table` under `name`; a second one under the same name is refused."""

    def deco(value: _T) -> _T:
        if name in table:
            raise ValueError(f"{what} {name!r} is already registered")
        table[name] = value
        return value

    return deco
