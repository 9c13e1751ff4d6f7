"""Scorer registry: a dict plus a `register()` decorator that refuses duplicates and suggests close names.

The names themselves (canonical constants, built-in aliases, ambiguous names, spelling normalisation) are the
vocabulary in `evr1_rewards.vocabulary`; this module maps them to scorer instances, built-ins and plugins alike.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from evr1_rewards.errors import AmbiguousProblemTypeError, MissingExtraError, RewardConfigError, UnknownProblemTypeError
from evr1_rewards.types import Scorer
from evr1_rewards.vocabulary import AMBIGUOUS, BUILTIN_ALIASES, name_key

#: The answer format of a type whose scorer registers none (open-ended text reads any answer).
DEFAULT_ANSWER_FORMAT = "the final answer"

S = TypeVar("S", bound=Scorer[Any])


@dataclass(frozen=True, slots=True)
class ScorerInfo:
    """What `evr1-rewards list` shows for one canonical type."""

    name: str
    aliases: tuple[str, ...]
    requires: tuple[str, ...]
    extra: str | None
    description: str
    #: What the prompt asks the model to put inside `<answer></answer>` (None: `DEFAULT_ANSWER_FORMAT`).
    answer_format: str | None = None

    @property
    def missing(self) -> tuple[str, ...]:
        """Optional modules this scorer needs that are not importable here."""
        return tuple(m for m in self.requires if importlib.util.find_spec(m) is None)


_SCORERS: dict[str, Scorer[Any]] = {}
_INFO: dict[str, ScorerInfo] = {}
_ALIASES: dict[str, str] = {}
_RESOLVED: dict[str, str] = {}  # raw name -> canonical key (names repeat every call)


def register(
    problem_type: str,
    *,
    aliases: Iterable[str] = (),
    requires: Iterable[str] = (),
    extra: str | None = None,
    answer_format: str | None = None,
) -> Callable[[type[S]], type[S]]:
    """Class decorator: instantiate the scorer class and route `problem_type` and its aliases to it.

    A built-in name also gets its aliases from `vocabulary.BUILTIN_ALIASES`. Names in `vocabulary.AMBIGUOUS` and
    names already taken are refused. `answer_format` is what the prompt asks for (training and evaluation read it
    through `answer_format()`): the scorer knows what it can read, so the wording lives with it.

    >>> @register("my_type", aliases=("mine",), answer_format="a colour name")   # doctest: +SKIP
    ... class MyScorer: ...
    """
    key = name_key(problem_type)
    wanted = (*BUILTIN_ALIASES.get(key, ()), *aliases)
    names = list(dict.fromkeys(n for n in (name_key(a) for a in wanted) if n != key))  # normalised, deduplicated

    def decorator(cls: type[S]) -> type[S]:
        for name in (key, *names):
            if name in AMBIGUOUS:
                raise RewardConfigError(f"problem type name {name!r} is ambiguous ({AMBIGUOUS[name]}); pick another")
            owner = _ALIASES.get(name) or (name if name in _SCORERS else None)
            if owner is not None:
                raise RewardConfigError(
                    f"problem type name {name!r} is already registered (to {owner!r}); choose another name or alias"
                )
        scorer = cls()
        scorer.name = key
        _SCORERS[key] = scorer
        doc = (cls.__doc__ or "").strip().splitlines()
        _INFO[key] = ScorerInfo(key, tuple(names), tuple(requires), extra, doc[0] if doc else "", answer_format)
        _ALIASES.update(dict.fromkeys(names, key))
        return cls

    return decorator


def _lookup(key: str) -> str | None:
    return key if key in _SCORERS else _ALIASES.get(key)


def normalize_problem_type(problem_type: str, *, aliases: Mapping[str, str] | None = None) -> str:
    """The canonical registered name for a problem type or alias.

    `aliases` are the caller's own readings, consulted first (keys and values are spelling-normalised), e.g. a
    benchmark loader's `{"REC": "repetition_counting"}`. Raises `AmbiguousProblemTypeError` for a name in
    `vocabulary.AMBIGUOUS` that `aliases` does not settle, and `UnknownProblemTypeError` (with the closest known name)
    for anything else unknown.
    """
    if aliases is None:
        hit = _RESOLVED.get(problem_type) if isinstance(problem_type, str) else None
        if hit is not None:
            return hit
    key = name_key(problem_type)
    if aliases:
        local = {name_key(k): name_key(v) for k, v in aliases.items()}
        if key in local:
            target = local[key]
            found = _lookup(target)
            if found is None:
                raise RewardConfigError(f"alias {problem_type!r} -> {target!r}: {target!r} is not a known problem type")
            return found
    found = _lookup(key)
    if found is not None:
        if aliases is None and len(_RESOLVED) < 4096 and isinstance(problem_type, str):
            _RESOLVED[problem_type] = found
        return found
    if key in AMBIGUOUS:
        raise AmbiguousProblemTypeError(str(problem_type), readings=dict(AMBIGUOUS[key]))
    names = sorted({*_SCORERS, *_ALIASES})
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    raise UnknownProblemTypeError(str(problem_type), known=sorted(_SCORERS), suggestion=close[0] if close else None)


def get_scorer(problem_type: str) -> Scorer[Any]:
    """The scorer for a problem type (aliases accepted).

    Never raises MissingExtraError itself: a scorer with an optional dependency works without it where it can (math
    scores numbers and option letters without math-verify) and raises MissingExtraError only for answers that need
    it. Call `require(problem_type)` to check the dependencies up front.
    """
    return _SCORERS[normalize_problem_type(problem_type)]


def require(problem_type: str) -> None:
    """Raise MissingExtraError when the scorer's optional dependencies are not installed."""
    info = _INFO[normalize_problem_type(problem_type)]
    missing = info.missing
    if missing:
        raise MissingExtraError(f"the {info.name!r} scorer", info.extra or "all", missing[0])


def answer_format(problem_type: str) -> str:
    """The answer format the prompt asks for (`"the option letter"`, …): the one registered with the type's scorer,
    else `DEFAULT_ANSWER_FORMAT`. Aliases accepted; an unknown type raises `UnknownProblemTypeError`."""
    return _INFO[normalize_problem_type(problem_type)].answer_format or DEFAULT_ANSWER_FORMAT


def answer_formats() -> dict[str, str]:
    """Every registered type's answer format, by canonical name (what a training run records of its prompt)."""
    return {k: answer_format(k) for k in sorted(_INFO)}


def available_types() -> tuple[str, ...]:
    """Canonical problem-type names, sorted."""
    return tuple(sorted(_SCORERS))


def describe_types() -> list[ScorerInfo]:
    """Canonical names with aliases, optional requirements and a one-line description."""
    return [_INFO[k] for k in sorted(_INFO)]
