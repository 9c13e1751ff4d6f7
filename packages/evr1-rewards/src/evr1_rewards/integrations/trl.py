"""TRL adapter: `GRPOTrainer(reward_funcs=[make_reward_func()], ...)`.

TRL calls `reward_func(prompts=..., completions=..., completion_ids=..., **columns)` with every dataset column as a
list aligned with the completions; conversational completions are lists of `{"role", "content"}` messages. The
function returns one float per completion, or None for rows whose problem type column is empty (TRL skips those).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from evr1_rewards.integrations._common import plain
from evr1_rewards.router import RewardRouter
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
            if isinstance(item, Mapping) and "role" in item and item.get("role") != "assistant":
                continue
            if isinstance(item, Mapping) and item.get("type") not in (None, "text"):
                continue
            parts.append(
                completion_text(item.get("text", item.get("content", "")) if isinstance(item, Mapping) else item)
            )
        return "".join(parts)
    return "" if completion is None else str(completion)


def make_reward_func(
    *,
    problem_type: str | None = None,
    problem_type_column: str = "problem_type",
    ground_truth_column: str | None = None,
    extras_column: str = "extras",
    extras_columns: Sequence[str] = ("options",),
    weights: RewardWeights | Mapping[str, float] | None = None,
    component: Component = "overall",
    mode: Mode = "reward",
    think: Literal["optional", "required", "forbidden"] = "optional",
    name: str | None = None,
) -> Callable[..., list[float | None]]:
    """Build a TRL reward function.

    Args:
        problem_type: fixed type for every row; else read from `problem_type_column`.
        ground_truth_column: column with the ground truth (default: the first of "ground_truth", "solution", "answer").
        extras_column: a column holding a dict of scorer extras; `extras_columns` are copied into extras too.
        component: which part of the reward to return ("overall", "accuracy" or "format") - use one function per
            component with `GRPOConfig.reward_weights` for multi-objective setups.
    """
    router = RewardRouter(weights, mode=mode, think=think)
    if component not in ("overall", "accuracy", "format"):
        raise ValueError(f"component must be 'overall', 'accuracy' or 'format', got {component!r}")

    def reward_func(
        prompts: Sequence[object] | None = None, completions: Sequence[object] = (), **columns: object
    ) -> list[float | None]:
        gt_col = ground_truth_column or next((c for c in ("ground_truth", "solution", "answer") if c in columns), None)
        if gt_col is None or gt_col not in columns:
            raise KeyError(f"no ground-truth column among {sorted(columns)}; pass ground_truth_column=...")
        gts = columns[gt_col]
        types = [problem_type] * len(completions) if problem_type else columns.get(problem_type_column)
        if types is None:
            raise KeyError(f"no {problem_type_column!r} column; pass problem_type=... or problem_type_column=...")
        out: list[float | None] = []
        for i, completion in enumerate(completions):
            ptype = types[i]  # type: ignore[index]
            if ptype is None or ptype == "":
                out.append(None)
                continue
            extras: dict[str, object] = {}
            ex = columns.get(extras_column)
            if ex is not None and isinstance(ex[i], Mapping):  # type: ignore[index]
                extras.update(plain(ex[i]))  # type: ignore[arg-type, index, call-overload]
            for col in extras_columns:
                if col in columns and columns[col][i] is not None:  # type: ignore[index]
                    extras[col] = plain(columns[col][i])  # type: ignore[index]
            res = router.score(
                RewardInput(
                    response=completion_text(completion),
                    ground_truth=plain(gts[i]),  # type: ignore[index]
                    problem_type=str(ptype),
                    extras=extras,
                    sample_id=str(i),
                )
            )
            out.append(getattr(res, component))
        return out

    reward_func.__name__ = name or f"evr1_{component}"
    return reward_func
