"""verl adapter: `reward.custom_reward_function.path=pkg://evr1_rewards.integrations.verl` (name `compute_score`).

verl 0.9's reward loop calls `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...,
**reward_kwargs)` once per sample and stacks every key of the returned dict into `reward_extra_info`, so the key set
is fixed: `score`, `accuracy`, `format`.

Where the problem type comes from (first hit): `extra_info["problem_type"]`, the `problem_type` reward kwarg, then
`data_source` itself (so `data_source: "multiple choice"` works). Scorer extras (options, image_size, tests, …) are
read from `extra_info["extras"]` and from `extra_info`'s own keys. Reward kwargs: `accuracy_weight` / `format_weight`
(or `weights`), `mode`, `think`, `on_unknown`, `on_error`, `end_of_turn_tokens`, and for `code` the sandbox:
`sandbox` (backend name or SandboxFusion URL), `sandbox_fusion_url`, `sandbox_workers`, `unsafe_local`.

verl passes these from `reward.custom_reward_function.reward_kwargs` (verl/trainer/ppo/reward.py), a key its config
does not declare, so on verl's command line each needs a leading `+` (Hydra's "append a new key"):
`+reward.custom_reward_function.reward_kwargs.accuracy_weight=0.8
+reward.custom_reward_function.reward_kwargs.sandbox_fusion_url=http://sandbox:8080`. Without the `+` Hydra stops with
"Could not override 'reward.custom_reward_function.reward_kwargs.accuracy_weight'. Key 'accuracy_weight' is not in
struct". In a YAML config file no `+` is needed.

A `None` in `extra_info` (or `extra_info.extras`) is an absent key: parquet fills keys missing from some rows with None.
"""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.errors import RewardConfigError
from evr1_rewards.integrations._common import (
    cached_router,
    merge_extras,
    plain,
    sandbox_from,
    tokens_from,
    weights_from,
)
from evr1_rewards.types import RewardInput

EXTRA_KEYS = ("score", "accuracy", "format")


def compute_score(
    data_source: str | None = None,
    solution_str: str | None = None,
    ground_truth: object = None,
    extra_info: Mapping[str, object] | None = None,
    **kw: object,
) -> dict[str, float]:
    """Score one verl sample → {"score": overall, "accuracy": …, "format": …}."""
    info = plain(extra_info) if isinstance(extra_info, Mapping) else {}
    assert isinstance(info, dict)
    problem_type = info.get("problem_type") or kw.get("problem_type") or data_source
    if not problem_type:
        raise RewardConfigError(
            "verl sample has no problem type: set extra_info.problem_type, the problem_type reward kwarg or data_source"
        )
    extras = merge_extras({k: v for k, v in info.items() if k != "extras"}, info.get("extras"))
    acc, fmt = weights_from(kw)
    router = cached_router(
        acc, fmt, str(kw.get("mode", "reward")), str(kw.get("think", "optional")),
        str(kw.get("on_unknown", "raise")), str(kw.get("on_error", "raise")), sandbox_from(kw),
        tokens_from(kw.get("end_of_turn_tokens")),
    )  # fmt: skip
    sample_id = info.get("index", info.get("id"))
    result = router.score(
        RewardInput(
            response=solution_str or "",
            ground_truth=plain(ground_truth),
            problem_type=str(problem_type),
            extras=extras,
            sample_id=None if sample_id is None else str(sample_id),
        )
    )
    return {"score": result.overall, "accuracy": result.accuracy, "format": result.format}
