"""The reward contract: what goes into a scorer and what comes out."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, runtime_checkable

from evr1_rewards.errors import RewardConfigError
from evr1_rewards.extract import Response

if TYPE_CHECKING:
    from evr1_rewards.sandbox.config import SandboxConfig

Mode = Literal["reward", "metric"]
"""`reward`: strict (RL training; malformed answers score 0). `metric`: benchmark conventions (e.g. lmms-eval swaps
reversed spans; regression may follow the official `<=` MRA)."""

MODES: tuple[Mode, ...] = ("reward", "metric")


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardInput:
    """One model response to score. `extras` carries options, coordinate conventions, tolerances, tests …"""

    response: str
    ground_truth: object
    problem_type: str
    extras: Mapping[str, object] = field(default_factory=dict)
    sample_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardResult:
    """`overall = w_acc·accuracy + w_fmt·format`; `details` keeps per-scorer diagnostics for logging."""

    overall: float
    accuracy: float
    format: float
    problem_type: str
    details: Mapping[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        """The numeric part, with a fixed key set (what RL frameworks log and stack across a batch)."""
        return {"overall": self.overall, "accuracy": self.accuracy, "format": self.format}


_SET_RESULT = tuple(
    RewardResult.__dict__[n].__set__ for n in ("overall", "accuracy", "format", "problem_type", "details")
)


def make_result(
    overall: float, accuracy: float, format: float, problem_type: str, details: Mapping[str, object]
) -> RewardResult:
    """`RewardResult(...)` at half the cost (the router builds one per sample): the slots are set directly, which
    a frozen dataclass's generated `__init__` does through `object.__setattr__`. Same object, same equality."""
    r = object.__new__(RewardResult)
    so, sa, sf, sp, sd = _SET_RESULT
    so(r, overall)
    sa(r, accuracy)
    sf(r, format)
    sp(r, problem_type)
    sd(r, details)
    return r


@dataclass(frozen=True, slots=True)
class RewardWeights:
    """Validated weights: both in [0, 1] and summing to 1 (so `overall` stays in [0, 1])."""

    accuracy: float = 0.9
    format: float = 0.1

    def __post_init__(self) -> None:
        for name in ("accuracy", "format"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
                raise RewardConfigError(f"reward weight {name!r} must be a number in [0, 1], got {v!r}")
        if abs(self.accuracy + self.format - 1.0) > 1e-6:
            raise RewardConfigError(
                f"reward weights must sum to 1, got accuracy={self.accuracy} + format={self.format} "
                f"= {self.accuracy + self.format}"
            )

    @classmethod
    def coerce(cls, weights: RewardWeights | Mapping[str, float] | None) -> RewardWeights:
        if weights is None:
            return cls()
        if isinstance(weights, RewardWeights):
            return weights
        if not isinstance(weights, Mapping):
            raise RewardConfigError(
                f"weights must be a mapping like {{'accuracy': 0.9, 'format': 0.1}}, got {weights!r}"
            )
        unknown = set(weights) - {"accuracy", "format"}
        if unknown:
            raise RewardConfigError(f"unknown reward weight keys {sorted(unknown)}; use 'accuracy' and 'format'")
        acc, fmt = weights.get("accuracy"), weights.get("format")
        if acc is None:  # (the one given fixes the other)
            return cls() if fmt is None else cls(accuracy=1.0 - float(fmt), format=float(fmt))
        return cls(accuracy=float(acc), format=1.0 - float(acc) if fmt is None else float(fmt))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a scorer returns: accuracy in [0, 1], whether the answer payload parsed for the type, and diagnostics."""

    accuracy: float
    parsed: bool
    details: Mapping[str, object] = field(default_factory=dict)


T = TypeVar("T")


class Scorer(Protocol[T]):
    """One problem type. `parse_truth` is strict (raises GroundTruthError); `score` is total on any response.

    `T` is the scorer's parsed ground truth: whatever `parse_truth` returns is what `score` receives (the router
    caches it, since GRPO scores each ground truth n times in a row).
    """

    name: str

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> T: ...

    def score(self, response: Response, truth: T, ctx: Context) -> Outcome: ...


T_contra = TypeVar("T_contra", contravariant=True)


@runtime_checkable
class FormatsTruth(Protocol[T_contra]):
    """Optional for a scorer: the canonical text of a parsed ground truth (it parses back to the same truth).

    Used for `GroundTruth.text` (what evr1-eval stores and shows); built-in scorers implement it, plugins may."""

    def format_truth(self, truth: T_contra) -> str: ...


@dataclass(frozen=True, slots=True)
class Context:
    """Per-call settings a scorer may read."""

    extras: Mapping[str, object]
    mode: Mode = "reward"
    sandbox: SandboxConfig | None = None
    """How `code` answers run (None: from the environment, see `evr1_rewards.sandbox.config`)."""
