"""evr1-rewards: task-aware verifiable rewards for video/image RL (pure Python, stdlib only).

>>> from evr1_rewards import score
>>> score("<think>red is A</think><answer>B</answer>", "B", "multiple choice").overall
1.0
"""

from __future__ import annotations

from evr1_rewards import scorers as _scorers  # noqa: F401  (registers the built-in scorers)
from evr1_rewards.errors import (
    GroundTruthError,
    MissingExtraError,
    RewardConfigError,
    RewardError,
    UnknownProblemTypeError,
)
from evr1_rewards.extract import Extraction, Response, extract, extract_answer
from evr1_rewards.registry import (
    ScorerInfo,
    available_types,
    describe_types,
    get_scorer,
    normalize_problem_type,
    register,
)
from evr1_rewards.router import RewardRouter, score
from evr1_rewards.types import Context, Mode, Outcome, RewardInput, RewardResult, RewardWeights, Scorer

__version__ = "0.1.0"

__all__ = [
    "Context",
    "Extraction",
    "GroundTruthError",
    "MissingExtraError",
    "Mode",
    "Outcome",
    "Response",
    "RewardConfigError",
    "RewardError",
    "RewardInput",
    "RewardResult",
    "RewardRouter",
    "RewardWeights",
    "Scorer",
    "ScorerInfo",
    "UnknownProblemTypeError",
    "__version__",
    "available_types",
    "describe_types",
    "extract",
    "extract_answer",
    "get_scorer",
    "normalize_problem_type",
    "register",
    "score",
]
