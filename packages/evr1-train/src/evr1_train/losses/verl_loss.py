"""`evr1_ppo_loss`: verl's own `ppo_loss` with the micro-batch's offline mask made visible to `evr1_hybrid`.

Why a wrapper and not a copy: verl's `ppo_loss` owns entropy, KL and global-batch normalisation; the only thing it
cannot do is tell a policy-loss function which samples are stored trajectories. The `evr1` trainer mode installs
this wrapper with `actor_rollout_wg.set_loss_fn` (verl's public hook); the mask comes from the per-sample
`evr1_offline` marker the agent loop writes.

Names (stable): evr1_ppo_loss(config, model_output, data, dp_group=None, *, hybrid), offline_mask_from(data)
"""

from __future__ import annotations

from typing import Any

import torch

from evr1_train.hybrid import OFFLINE_FIELD, HybridConfig
from evr1_train.losses.offpolicy import offline_context


def offline_mask_from(data: Any) -> torch.Tensor | None:
    """Per-sample bool mask from a TensorDict / dict batch: an `evr1_offline` tensor or per-sample `extra_fields`."""
    keys = set(data.keys()) if hasattr(data, "keys") else set()
    if OFFLINE_FIELD in keys:
        value = data[OFFLINE_FIELD]
        if isinstance(value, torch.Tensor):
            return value.reshape(-1).to(torch.bool)
        return torch.tensor([bool(v) for v in _as_list(value)], dtype=torch.bool)
    if "extra_fields" in keys:
        rows = _as_list(data["extra_fields"])
        return torch.tensor([bool((r or {}).get(OFFLINE_FIELD, 0)) for r in rows], dtype=torch.bool)
    return None


def _as_list(value: Any) -> list[Any]:
    if hasattr(value, "tolist"):
        return list(value.tolist())
    return list(getattr(value, "data", value))


def evr1_ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None, *, hybrid: HybridConfig) -> Any:
    """Run verl's `ppo_loss` inside `offline_context` so `evr1_hybrid` sees which samples are offline."""
    from verl.workers.utils.losses import ppo_loss

    mask = offline_mask_from(data)
    if mask is None:
        if hybrid.off_policy:
            raise KeyError(
                f"evr1: the actor batch carries no {OFFLINE_FIELD!r} marker, so offline tokens cannot be told apart; "
                "use the evr1_hybrid agent loop (actor_rollout_ref.rollout.agent.default_agent_loop=evr1_hybrid) or "
                "set evr1.hybrid.offline_handling=on_policy"
            )
        return ppo_loss(config, model_output, data, dp_group)
    with offline_context(mask, hybrid):
        return ppo_loss(config, model_output, data, dp_group)
