"""Errors raised on bad configuration or bad ground truth (never on model output)."""

from __future__ import annotations

from typing import TypeVar

_C = TypeVar("_C", bound=str)


def one_of(what: str, value: object, allowed: tuple[_C, ...]) -> _C:
    """`value` as one of the `allowed` choices (typed as those literals), else a `RewardConfigError` naming `what`."""
    for option in allowed:
        if value == option:
            return option
    raise RewardConfigError(f"{what} must be one of {allowed}, got {value!r}")


class RewardError(ValueError):
    """Base class: something about the data or configuration (not the model output) is wrong."""


class UnknownProblemTypeError(RewardError):
    """A `problem_type` that no registered scorer (or alias) handles."""

    def __init__(self, problem_type: str, *, known: list[str], suggestion: str | None = None) -> None:
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        super().__init__(
            f"unknown problem_type {problem_type!r}.{hint} Known types: {', '.join(known)} "
            "(run `evr1-rewards list` for aliases; register your own with `evr1_rewards.register`)."
        )
        self.problem_type = problem_type
        self.suggestion = suggestion


class AmbiguousProblemTypeError(UnknownProblemTypeError):
    """A `problem_type` that means different types in different communities (see `evr1_rewards.vocabulary.AMBIGUOUS`)."""

    def __init__(self, problem_type: str, *, readings: dict[str, str]) -> None:
        RewardError.__init__(
            self,
            f"problem_type {problem_type!r} is ambiguous: it can mean "
            + " or ".join(f"{meaning} - write {alias!r}" for alias, meaning in readings.items())
            + f"; or pass your context's reading, e.g. normalize_problem_type(name, aliases={{{problem_type!r}: "
            f"{next(iter(readings))!r}}})",
        )
        self.problem_type = problem_type
        self.suggestion = None
        self.readings = readings


class GroundTruthError(RewardError):
    """A ground truth that cannot be parsed for its problem type: a dataset bug, never silently scored as 0."""


class RewardConfigError(RewardError):
    """Invalid weights, mode or scorer options."""


class MissingExtraError(ImportError):
    """A scorer needs an optional dependency that is not installed."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        super().__init__(f'{what} needs the optional package {module!r}: pip install "evr1-rewards[{extra}]"')
        self.extra = extra
        self.module = module
