"""TRL adapter: `GRPOTrainer(reward_funcs=[RewardFunction()], ...)` (`make_reward_func()` builds the same object).

TRL calls `reward_func(prompts=..., completions=..., completion_ids=..., **columns)` with every dataset column as a
list aligned with the completions; conversational completions are lists of `{"role", "content"}` messages. The
function returns one float per completion, or None for rows whose problem type column is empty (TRL skips those).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from evr1_rewards.integrations._common import merge_extras, plain
from evr1_rewards.router import RewardRouter
from evr1_rewards.sandbox.config import SandboxConfig
from evr1_rewards.types import Mode, RewardInput, RewardWeights

Component = Literal["overall", "accuracy", "format"]


def completion_text(completion: object) -> str:
    """Plain text of a completion: a string, or the assistant content of a conversational completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return completion_text(completion.get("content", ""))
    if isinstance(completion, Sequence):
        parts: list[str] = []
        for item in completion:
            if isinstance(item, Mapping):
                if item.get("role", "assistant") != "assistant" or item.get("type") not in (None, "text"):
                    continue  # another role's turn, or an image / video part
                item = item.get("text", item.get("content", ""))
            parts.append(completion_text(item))
        return "".join(parts)
    return "" if completion is None else str(completion)


@dataclass(kw_only=True, eq=False)
class RewardFunction:
    """A TRL reward function: `GRPOTrainer(reward_funcs=[RewardFunction(...)])` (or `make_reward_func(...)`).

    A small class instance rather than a closure, so it pickles (TRL's asynchronous GRPO ships reward functions to
    worker processes); the router is rebuilt lazily after unpickling. `__name__` is what TRL logs the reward as.

    Args:
        problem_type: fixed type for every row; else read from `problem_type_column`.
        ground_truth_column: column with the ground truth (default: the first of "ground_truth", "solution", "answer").
        extras_column: a column holding a dict of scorer extras; `extras_columns` are copied into extras too. A
            `None` value (what `datasets` puts in keys a row's dict does not have) counts as absent.
        component: which part of the reward to return ("overall", "accuracy" or "format") - use one function per
            component with `GRPOConfig.reward_weights` for multi-objective setups.
        sandbox: how `code` answers run (a `SandboxConfig`, mapping, backend name or SandboxFusion URL; None: env).
        end_of_turn_tokens: more chat-template tokens to strip from completions (beyond `evr1_rewards.end_of_turn`).
    """

    problem_type: str | None = None
    problem_type_column: str = "problem_type"
    ground_truth_column: str | None = None
    extras_column: str = "extras"
    extras_columns: Sequence[str] = ("options",)
    weights: RewardWeights | Mapping[str, float] | None = None
    component: Component = "overall"
    mode: Mode = "reward"
    think: Literal["optional", "required", "forbidden"] = "optional"
    name: str | None = None
    sandbox: SandboxConfig | Mapping[str, object] | str | None = None
    end_of_turn_tokens: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.component not in ("overall", "accuracy", "format"):
            raise ValueError(f"component must be 'overall', 'accuracy' or 'format', got {self.component!r}")
        self.extras_columns = tuple(self.extras_columns)
        self.weights = RewardWeights.coerce(self.weights)
        self.sandbox = SandboxConfig.coerce(self.sandbox)
        self.end_of_turn_tokens = tuple(self.end_of_turn_tokens)
        self.__name__ = self.name or f"evr1_{self.component}"
        self._router: RewardRouter | None = None
        self.router  # noqa: B018  (validate the configuration now, not at the first training step)

    @property
    def router(self) -> RewardRouter:
        if self._router is None:
            self._router = RewardRouter(
                self.weights, mode=self.mode, think=self.think, sandbox=self.sandbox,
                end_of_turn_tokens=self.end_of_turn_tokens,
            )  # fmt: skip
        return self._router

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_router"] = None  # rebuilt on first use in the receiving process
        return state

    def __repr__(self) -> str:
        return f"RewardFunction(name={self.__name__!r}, component={self.component!r}, mode={self.mode!r})"

    def __call__(
        self, prompts: Sequence[object] | None = None, completions: Sequence[object] = (), **columns: object
    ) -> list[float | None]:
        gt_col = self.ground_truth_column or next(
            (c for c in ("ground_truth", "solution", "answer") if c in columns), None
        )
        if gt_col is None or gt_col not in columns:
            raise KeyError(f"no ground-truth column among {sorted(columns)}; pass ground_truth_column=...")
        gts = _as_list(columns[gt_col])
        types = [self.problem_type] * len(completions) if self.problem_type else columns.get(self.problem_type_column)
        if types is None:
            raise KeyError(f"no {self.problem_type_column!r} column; pass problem_type=... or problem_type_column=...")
        types = _as_list(types)
        extras_col = _as_list(columns[self.extras_column]) if columns.get(self.extras_column) is not None else None
        copied = {c: _as_list(columns[c]) for c in self.extras_columns if columns.get(c) is not None}
        router = self.router
        out: list[float | None] = []
        for i, completion in enumerate(completions):
            ptype = types[i]
            if ptype is None or ptype == "":
                out.append(None)
                continue
            extras = merge_extras(
                extras_col[i] if extras_col is not None else None, {c: col[i] for c, col in copied.items()}
            )
            res = router.score(
                RewardInput(
                    response=completion_text(completion),
                    ground_truth=plain(gts[i]),
                    problem_type=str(ptype),
                    extras=extras,
                    sample_id=str(i),
                )
            )
            out.append(getattr(res, self.component))
        return out


def _as_list(value: object) -> list[object]:
    if isinstance(value, list):
        return value
    if isinstance(value, (tuple, Sequence)) and not isinstance(value, (str, bytes)):
        return list(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return list(tolist())
    raise TypeError(f"expected a column (a list aligned with the completions), got {type(value).__name__}")


#: `make_reward_func(**options)` is `RewardFunction(**options)` (the name kept for existing code; picklable).
make_reward_func = RewardFunction
