"""Off-policy token loss for stored (offline) trajectories, registered in verl's policy-loss registry as `evr1_hybrid`.

Why: EasyVideoR1 trained injected trajectories as if sampled (ratio 1 at the start, clipped like PPO), which gives
an off-policy target the on-policy update rule. Here online tokens keep verl's own loss (`base_loss_mode`: vanilla,
gspo, cispo, ... called through verl's registry, not re-implemented) and offline tokens get either
  * "shaping" (LUFFY policy shaping): per-token objective A * p / (p + gamma), p = pi_theta(token), no clipping —
    it boosts low-probability correct tokens the clipped ratio would ignore; or
  * "importance": A * min(pi_theta / pi_behaviour, importance_max) (pi_behaviour from stored log-probs, else 1).
Both parts are aggregated with verl's `agg_loss` over the same batch so the total equals one loss over all tokens.

Names (stable):
    offline_token_loss(log_prob, advantages, offline_mask, hybrid, behaviour_log_prob=None) -> per-token loss [B, T]
    hybrid_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config,
                       rollout_is_weights=None, *, offline_mask=None, hybrid=None, behaviour_log_prob=None)
        -> (loss, metrics)                         # what the local engine calls directly
    offline_context(offline_mask, hybrid, behaviour_log_prob=None)  # context manager the verl loss wrapper uses
    register_with_verl()                           # registers "evr1_hybrid" (idempotent)
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch

from evr1_train.hybrid.config import LOSS_NAME, HybridConfig

#: The current micro-batch's (offline mask [B] or [B, T] bool, hybrid settings, behaviour log-probs or None).
_CTX: contextvars.ContextVar[tuple[torch.Tensor, HybridConfig, torch.Tensor | None] | None] = contextvars.ContextVar(
    "evr1_offline_ctx", default=None
)


@contextlib.contextmanager
def offline_context(
    offline_mask: torch.Tensor, hybrid: HybridConfig, behaviour_log_prob: torch.Tensor | None = None
) -> Iterator[None]:
    """Make the offline mask of the current micro-batch visible to `evr1_hybrid` (called by verl's ppo_loss)."""
    token = _CTX.set((offline_mask, hybrid, behaviour_log_prob))
    try:
        yield
    finally:
        _CTX.reset(token)


def _token_mask(offline_mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    m = offline_mask.to(device=like.device, dtype=torch.bool)
    if m.dim() == 1:
        m = m.unsqueeze(-1).expand_as(like)
    if m.shape != like.shape:
        raise ValueError(f"offline mask shape {tuple(offline_mask.shape)} does not match tokens {tuple(like.shape)}")
    return m


def offline_token_loss(
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    offline_mask: torch.Tensor,
    hybrid: HybridConfig,
    behaviour_log_prob: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token loss of offline tokens (zero elsewhere)."""
    mask = _token_mask(offline_mask, log_prob)
    if hybrid.off_policy_method == "shaping":
        p = torch.exp(torch.clamp(log_prob, max=0.0))
        objective = p / (p + hybrid.shaping_gamma)
    else:
        behaviour = behaviour_log_prob if behaviour_log_prob is not None else torch.zeros_like(log_prob)
        ratio = torch.exp(torch.clamp(log_prob - behaviour, min=-20.0, max=20.0))
        capped = torch.clamp(ratio, max=hybrid.importance_max)
        objective = ratio * (capped / ratio.clamp_min(1e-12)).detach()  # value = capped ratio, gradient of ratio
    return torch.where(mask, -advantages * objective, torch.zeros_like(log_prob))


def _count(mask: torch.Tensor, per_seq: bool) -> torch.Tensor:
    return (mask.sum(-1) > 0).sum() if per_seq else mask.sum()


def hybrid_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
    *,
    offline_mask: torch.Tensor | None = None,
    hybrid: HybridConfig | None = None,
    behaviour_log_prob: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's base loss on online tokens + `offline_token_loss` on offline tokens, aggregated as one batch."""
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn

    ctx = _CTX.get()
    if offline_mask is None and ctx is not None:
        offline_mask, hybrid, behaviour_log_prob = ctx
    hybrid = hybrid or HybridConfig(enable=True, offline_handling="off_policy")
    base_fn = get_policy_loss_fn(hybrid.base_loss_mode)
    resp = response_mask.to(torch.bool)

    def base_loss(mask: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        """verl's configured policy loss over the tokens of `mask` (on-policy tokens)."""
        loss, metrics = base_fn(
            old_log_prob=old_log_prob,
            log_prob=log_prob,
            advantages=advantages,
            response_mask=mask,
            loss_agg_mode=loss_agg_mode,
            config=config,
            rollout_is_weights=rollout_is_weights,
        )
        return loss, dict(metrics)

    if offline_mask is None or not hybrid.off_policy:
        loss, base_metrics = base_loss(resp)
        return loss, {**base_metrics, "actor/evr1_offline_token_frac": 0.0}

    off = _token_mask(offline_mask, log_prob) & resp
    on = resp & ~off
    gbi = dict(getattr(config, "global_batch_info", None) or {}) if config is not None else {}
    per_seq = loss_agg_mode.startswith("seq-mean")
    globally_normalised = loss_agg_mode == "token-sum" or (
        gbi.get("global_batch_size") is not None if per_seq else gbi.get("batch_num_tokens") is not None
    )
    total = _count(resp, per_seq).clamp_min(1)
    metrics: dict[str, Any] = {}
    loss = log_prob.sum() * 0.0
    if on.any():
        on_loss, metrics = base_loss(on)
        loss = loss + (on_loss if globally_normalised else on_loss * _count(on, per_seq) / total)
    if off.any():
        off_mat = offline_token_loss(log_prob, advantages, off, hybrid, behaviour_log_prob)
        off_loss = agg_loss(loss_mat=off_mat, loss_mask=off, loss_agg_mode=loss_agg_mode, **gbi)
        loss = loss + (off_loss if globally_normalised else off_loss * _count(off, per_seq) / total)
        with torch.no_grad():
            p = torch.exp(log_prob[off].clamp(max=0.0))
            metrics["actor/evr1_offline_prob_mean"] = p.mean().item()
    metrics["actor/evr1_offline_token_frac"] = (off.sum() / resp.sum().clamp_min(1)).item()
    return loss, metrics


def register_with_verl() -> None:
    """Register `evr1_hybrid` in verl's policy-loss registry (idempotent; called by the verl.plugins entry point)."""
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, register_policy_loss

    if POLICY_LOSS_REGISTRY.get(LOSS_NAME) is not hybrid_policy_loss:
        register_policy_loss(LOSS_NAME)(hybrid_policy_loss)
