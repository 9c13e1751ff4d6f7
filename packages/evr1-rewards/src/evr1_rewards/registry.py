"""Scorer registry: a dict plus a `register()` decorator that refuses duplicates and suggests close names."""

from __future__ import annotations

import difflib
import importlib.util
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from evr1_rewards.errors import MissingExtraError, RewardConfigError, UnknownProblemTypeError
from evr1_rewards.types import Scorer

T = TypeVar("T")

_SEP = re.compile(r"[\s\-_/]+")


@dataclass(frozen=True, slots=True)
class ScorerInfo:
    """What `evr1-rewards list` shows for one canonical type."""

    name: str
    aliases: tuple[str, ...]
    requires: tuple[str, ...]
    extra: str | None
    description: str

    @property
    def missing(self) -> tuple[str, ...]:
        """Optional modules this scorer needs that are not importable here."""
        return tuple(m for m in self.requires if importlib.util.find_spec(m) is None)


_SCORERS: dict[str, Scorer] = {}
_INFO: dict[str, ScorerInfo] = {}
_ALIASES: dict[str, str] = {}
_RESOLVED: dict[str, str] = {}  # raw name -> canonical key (names repeat every call)


def _key(name: str) -> str:
    """Case, spaces, hyphens and underscores are not significant: 'Spatial-Temporal Grounding' == 'spatial_temporal_grounding'."""
    return _SEP.sub("_", str(name).strip().lower()).strip("_")


def register(
    problem_type: str, *, aliases: Iterable[str] = (), requires: Iterable[str] = (), extra: str | None = None
) -> Callable[[T], T]:
    """Class decorator: instantiate the scorer class and route `problem_type` and its aliases to it.

    >>> @register("my_type", aliases=("mine",))   # doctest: +SKIP
    ... class MyScorer: ...
    """
    key = _key(problem_type)
    names = list(dict.fromkeys(n for n in (_key(a) for a in aliases) if n != key))  # normalised, deduplicated

    def decorator(cls: T) -> T:
        for name in (key, *names):
            owner = _ALIASES.get(name) or (name if name in _SCORERS else None)
            if owner is not None:
                raise RewardConfigError(
                    f"problem type name {name!r} is already registered (to {owner!r}); choose another name or alias"
                )
        scorer = cls() if isinstance(cls, type) else cls
        scorer.name = key  # type: ignore[attr-defined, union-attr]
        _SCORERS[key] = scorer  # type: ignore[assignment]
        doc = (getattr(cls, "__doc__", None) or "").strip().splitlines()
        _INFO[key] = ScorerInfo(key, tuple(names), tuple(requires), extra, doc[0] if doc else "")
        for name in names:
            _ALIASES[name] = key
        return cls

    return decorator


def _ensure_builtin() -> None:
    if not _SCORERS:
        importlib.import_module("evr1_rewards.scorers")


def normalize_problem_type(problem_type: str) -> str:
    """The canonical registered name for a problem type or alias; UnknownProblemTypeError (with a suggestion) otherwise."""
    hit = _RESOLVED.get(problem_type) if isinstance(problem_type, str) else None
    if hit is not None and hit in _SCORERS:
        return hit
    _ensure_builtin()
    key = _key(problem_type)
    if key in _SCORERS:
        if len(_RESOLVED) < 4096:
            _RESOLVED[problem_type] = key
        return key
    if key in _ALIASES:
        if len(_RESOLVED) < 4096:
            _RESOLVED[problem_type] = _ALIASES[key]
        return _ALIASES[key]
    names = sorted({*_SCORERS, *_ALIASES})
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    raise UnknownProblemTypeError(problem_type, known=sorted(_SCORERS), suggestion=close[0] if close else None)


def get_scorer(problem_type: str) -> Scorer:
    """The scorer for a problem type (aliases accepted); raises MissingExtraError if its optional deps are absent."""
    key = normalize_problem_type(problem_type)
    return _SCORERS[key]


def require(problem_type: str) -> None:
    """Raise MissingExtraError when the scorer's optional dependencies are not installed."""
    info = _INFO[normalize_problem_type(problem_type)]
    missing = info.missing
    if missing:
        raise MissingExtraError(f"the {info.name!r} scorer", info.extra or "all", missing[0])


def available_types() -> tuple[str, ...]:
    """Canonical problem-type names, sorted."""
    _ensure_builtin()
    return tuple(sorted(_SCORERS))


def describe_types() -> list[ScorerInfo]:
    """Canonical names with aliases, optional requirements and a one-line description."""
    _ensure_builtin()
    return [_INFO[k] for k in sorted(_INFO)]
