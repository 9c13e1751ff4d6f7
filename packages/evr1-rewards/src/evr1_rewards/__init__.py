"""evr1-rewards: task-aware verifiable rewards for video/image RL (pure Python, stdlib only).

>>> from evr1_rewards import score
>>> score("<think>red is A</think><answer>B</answer>", "B", "multiple choice").overall
1.0

Public API (typed, stable): scoring (`score`, `RewardRouter`, `RewardInput`, `RewardResult`, `RewardWeights`), the
problem-type vocabulary (`evr1_rewards.vocabulary`: canonical constants, aliases, `normalize_problem_type`), the
prompt format both engines ask with (`evr1_rewards.prompt_format`; each type's `answer_format`, registered with its
scorer),
ground-truth parsing (`parse_ground_truth` -> `GroundTruth`), answer extraction (`extract`, `extract_answer`), the
errors, agent episodes (`agent_reward`, `AgentShaping`, `AgentReward`: the answer's reward minus optional call
costs), end-of-turn tokens (`END_OF_TURN_TOKENS`, `add_end_of_turn_tokens`, `end_of_turn_tokens`,
`strip_end_of_turn`), and for scorer authors `register`, `Scorer`, `Outcome`, `Context`, `Response`.
"""

from __future__ import annotations

from evr1_rewards import prompt_format, vocabulary
from evr1_rewards import scorers as _scorers  # noqa: F401  (registers the built-in scorers)
from evr1_rewards.agent import AgentReward, AgentShaping, agent_reward
from evr1_rewards.end_of_turn import (
    END_OF_TURN_TOKENS,
    add_end_of_turn_tokens,
    end_of_turn_tokens,
    strip_end_of_turn,
)
from evr1_rewards.errors import (
    AmbiguousProblemTypeError,
    GroundTruthError,
    MissingExtraError,
    RewardConfigError,
    RewardError,
    UnknownProblemTypeError,
)
from evr1_rewards.extract import Extraction, Response, extract, extract_answer
from evr1_rewards.ground_truth import GroundTruth, parse_ground_truth
from evr1_rewards.registry import (
    ScorerInfo,
    answer_format,
    available_types,
    describe_types,
    get_scorer,
    normalize_problem_type,
    register,
    require,
)
from evr1_rewards.router import RewardRouter, score
from evr1_rewards.scorers.multiple_choice import Choices, parse_options
from evr1_rewards.truth import clean_extras
from evr1_rewards.types import (
    Context,
    FormatsTruth,
    Mode,
    Outcome,
    RewardInput,
    RewardResult,
    RewardWeights,
    Scorer,
)

__all__ = [
    "END_OF_TURN_TOKENS",
    "AgentReward",
    "AgentShaping",
    "AmbiguousProblemTypeError",
    "Choices",
    "Context",
    "Extraction",
    "FormatsTruth",
    "GroundTruth",
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
    "add_end_of_turn_tokens",
    "agent_reward",
    "answer_format",
    "available_types",
    "clean_extras",
    "describe_types",
    "end_of_turn_tokens",
    "extract",
    "extract_answer",
    "get_scorer",
    "normalize_problem_type",
    "parse_ground_truth",
    "parse_options",
    "prompt_format",
    "register",
    "require",
    "score",
    "strip_end_of_turn",
    "vocabulary",
]


def __getattr__(name: str) -> str:
    if name == "__version__":  # the installed metadata is the one truth; read lazily (importlib.metadata: ~20 ms)
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("evr1-rewards")
        except PackageNotFoundError:  # a source tree on sys.path that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'evr1_rewards' has no attribute {name!r}")
