"""The registry helper of the workspace: tables that refuse a taken name, and lookups that suggest the close names.

Every registry of evr1-cache, evr1-eval and evr1-train (decoders, resamplers, resize rules, model families, memory
presets, benchmarks, backends, eval presets, engines, module groups) is a plain dict filled at import time; this
module is the one place that says what happens on a second registration (refused, naming who holds the name) and on
an unknown name (`unknown 'x'; did you mean 'y'? (known: ...)`), so a typo in a config is a one-line fix everywhere.
Standard library only (the spec uses it). evr1-rewards, a leaf that imports no other package, keeps its own.

A settings object read from a mapping (a config node, a JSON file) is the same kind of table: its dataclass fields
are the known names, and `check_fields` refuses the others the same way, so a typo never falls back to a default.

Names (stable): register_unique, registering, lookup, unknown_name, did_you_mean, close_names, check_fields.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["check_fields", "close_names", "did_you_mean", "lookup", "register_unique", "registering", "unknown_name"]

_T = TypeVar("_T")
_V = TypeVar("_V")


def close_names(name: object, known: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The known names closest to `name` (best first; none below `cutoff` similarity)."""
    return difflib.get_close_matches(str(name).strip(), list(dict.fromkeys(known)), n=n, cutoff=cutoff)


def did_you_mean(name: object, known: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> str:
    """`did you mean 'a' or 'b'?`, or "" when nothing is close."""
    close = close_names(name, known, n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def unknown_name(what: str, name: object, known: Iterable[str], *, fix: str | None = None, cutoff: float = 0.6) -> str:
    """The one message for an unknown name: `unknown <what> 'x'; did you mean 'y'? (known: a, b)`.

    `fix` replaces the list of known names (for long lists: say where to find them instead)."""
    names = sorted(set(known))
    hint = did_you_mean(name, names, cutoff=cutoff)
    tail = fix if fix is not None else f"known: {', '.join(names)}"
    return f"unknown {what} {name!r}; " + (f"{hint} " if hint else "") + f"({tail})"


def check_fields(what: str, given: Iterable[str], cls: DataclassInstance | type[DataclassInstance]) -> None:
    """Refuse the keys of `given` that are not fields of the dataclass `cls`: `ValueError("unknown <what> keys
    ['fpss'] (did you mean 'fps'?); known: a, b, ...")`."""
    known = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(given) - set(known))
    if unknown:
        hint = did_you_mean(unknown[0], known, n=1)
        hint = f" ({hint})" if hint else ""
        raise ValueError(f"unknown {what} keys {unknown}{hint}; known: {', '.join(known)}")


def lookup(
    table: Mapping[str, _V],
    name: str,
    what: str,
    *,
    aliases: Mapping[str, str] | None = None,
    fix: str | None = None,
    cutoff: float = 0.6,
) -> _V:
    """`table[name]` (or the entry an alias points to); an unknown name raises `KeyError(unknown_name(...))`."""
    key = name.strip()
    if aliases:
        key = aliases.get(key, key)
    if key in table:
        return table[key]
    raise KeyError(unknown_name(what, name, [*table, *(aliases or {})], fix=fix, cutoff=cutoff))


def register_unique(table: MutableMapping[str, _V], name: str, value: _V, what: str) -> _V:
    """`table[name] = value`; a second registration of `name` is a bug and raises."""
    if name in table:
        raise ValueError(f"{what} {name!r} is already registered")
    table[name] = value
    return value


def registering(table: MutableMapping[str, _T], name: str, what: str) -> Callable[[_T], _T]:
    """A decorator adding its target to `table` under `name` (`register_unique`)."""
    return lambda value: register_unique(table, name, value, what)
