"""Advantages and losses through verl's own registered functions (`verl.trainer.ppo.core_algos`).

Why: the local engine must not be a second algorithm implementation. Every estimator in verl's
`ADV_ESTIMATOR_REGISTRY` (except those that need a critic or FSDP-only statistics) and every policy loss in
`POLICY_LOSS_REGISTRY` is called here with the same arguments verl's trainer passes (`compute_advantage`,
`workers/utils/losses.ppo_loss`). Offline (stored) tokens handled off-policy go through evr1's `hybrid_policy_loss`,
the same function the verl path registers.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from evr1_train.engine.config import LocalConfig, plain


def overlong_penalty(length: int, max_len: int, buffer_len: int, factor: float) -> float:
    """DAPO's soft overlong punishment (as verl's `dapo` reward manager): 0 up to max_len - buffer_len tokens, then
    falling linearly by `factor` per buffer_len tokens (-factor at max_len)."""
    exceed = length - (max_len - buffer_len)
    return min(-exceed / buffer_len * factor, 0.0)


def outcome_rewards(scores: Sequence[float], response_mask: torch.Tensor) -> torch.Tensor:
    """Token-level rewards `[B, R]`: the sequence score on the last response token the loss trains (verl's reward
    placement); in a multi-turn episode the mask has holes (the tools' tokens), so it is the last 1, not the count."""
    out = torch.zeros(response_mask.shape, dtype=torch.float32, device=response_mask.device)
    width = response_mask.shape[-1]
    last = (width - 1 - (response_mask.flip(-1) > 0).float().argmax(-1)).long()
    out[torch.arange(out.shape[0]), last] = torch.tensor(list(scores), dtype=torch.float32, device=out.device)
    return out * response_mask


def algo_config(cfg: LocalConfig) -> Any:
    """The `algorithm` node as an OmegaConf DictConfig (what verl's trainer hands to estimators)."""
    from omegaconf import OmegaConf

    node = plain(cfg.algorithm_node) or {}
    node.setdefault("adv_estimator", cfg.adv_estimator)
    node.setdefault("gamma", 1.0)
    node.setdefault("lam", 1.0)
    node.setdefault("norm_adv_by_std_in_grpo", cfg.norm_adv_by_std_in_grpo)
    if cfg.gdpo_reward_keys:
        node["gdpo_reward_keys"] = list(cfg.gdpo_reward_keys)
    return OmegaConf.create(node)


def compute_advantages(
    cfg: LocalConfig,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    uids: Sequence[str],
    *,
    reward_baselines: torch.Tensor | None = None,
    components: Mapping[str, Sequence[float]] | None = None,
    prompt_width: int = 1,
) -> torch.Tensor:
    """Advantages `[B, R]` from verl's estimator `cfg.adv_estimator`, called as verl's `compute_advantage` does."""
    from verl.trainer.ppo import core_algos

    name = cfg.adv_estimator
    config = algo_config(cfg)
    index = np.array(list(uids), dtype=object)
    mask = response_mask.float()
    if name == "grpo":
        adv, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards,
            response_mask=mask,
            index=index,
            norm_adv_by_std_in_grpo=cfg.norm_adv_by_std_in_grpo,
        )
        return adv
    fn = core_algos.get_adv_estimator_fn(name)
    kwargs: dict[str, Any] = {"token_level_rewards": token_level_rewards, "response_mask": mask, "config": config}
    kwargs["index"] = index
    if name == "remax":
        if reward_baselines is None:
            raise ValueError("remax needs greedy-rollout reward baselines (the engine computes them; this is a bug)")
        kwargs["reward_baselines"] = reward_baselines
    if name == "gdpo":
        if not cfg.gdpo_reward_keys:
            raise ValueError(
                "algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys, e.g. [accuracy, format] "
                "(the reward components evr1-rewards returns)"
            )
        missing = [k for k in cfg.gdpo_reward_keys if k not in (components or {})]
        if missing:
            raise ValueError(f"gdpo reward keys {missing} are not reward components; known: {sorted(components or {})}")
        kwargs["non_tensor_batch"] = {k: np.asarray(v, dtype=np.float32) for k, v in (components or {}).items()}
        ones = torch.ones(mask.shape[0], prompt_width, dtype=torch.long, device=mask.device)
        full_mask = torch.cat([ones, response_mask.long()], dim=1)
        kwargs["batch"] = {"prompts": torch.zeros(mask.shape[0], prompt_width), "attention_mask": full_mask}
    adv, _ = fn(**kwargs)
    return adv


def actor_config(cfg: LocalConfig) -> Any:
    """verl's `ActorConfig` dataclass (the `config` every registered policy loss reads), from the actor node."""
    with warnings.catch_warnings():  # verl lists its optional engines (torchtitan, megatron, ...) on import
        warnings.simplefilter("ignore")
        from verl.workers.config import ActorConfig, PolicyLossConfig

    node = plain(cfg.actor_node) or {}
    pl = dict(node.get("policy_loss") or {})
    pl["loss_mode"] = cfg.loss_mode
    pl_fields = set(PolicyLossConfig.__dataclass_fields__) - {"rollout_correction", "_target_"}
    policy_loss = PolicyLossConfig(**{k: v for k, v in pl.items() if k in pl_fields})
    simple = {
        k: node[k]
        for k in (
            "clip_ratio",
            "clip_ratio_low",
            "clip_ratio_high",
            "clip_ratio_c",
            "loss_scale_factor",
            "tau_pos",
            "tau_neg",
        )
        if node.get(k) is not None
    }
    return ActorConfig(
        strategy="local",
        rollout_n=cfg.n,
        ppo_mini_batch_size=cfg.ppo_mini_batch_size,
        ppo_micro_batch_size_per_gpu=cfg.micro_batch_size,
        loss_agg_mode=cfg.loss_agg_mode,
        entropy_coeff=cfg.entropy_coeff,
        use_kl_loss=cfg.use_kl_loss,
        kl_loss_coef=cfg.kl_loss_coef,
        kl_loss_type=cfg.kl_loss_type,
        ppo_epochs=cfg.ppo_epochs,
        policy_loss=policy_loss,
        **simple,
    )


def policy_loss(
    cfg: LocalConfig,
    actor_cfg: Any,
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    entropy: torch.Tensor | None,
    ref_log_prob: torch.Tensor | None,
    offline_mask: torch.Tensor | None,
    hybrid: Any,
    batch_num_tokens: int,
    global_batch_size: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """One micro-batch's share of the mini-batch loss, composed exactly like verl's `ppo_loss`.

    `batch_num_tokens` / `global_batch_size` describe the whole mini-batch, so summing the micro-batch losses gives
    verl's mini-batch loss whatever the micro-batch size (verl's `global_batch_info`).
    """
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty

    actor_cfg.global_batch_info.update(
        {"dp_size": 1, "batch_num_tokens": batch_num_tokens, "global_batch_size": global_batch_size}
    )
    actor_cfg.global_batch_info["loss_scale_factor"] = actor_cfg.loss_scale_factor
    mask = response_mask.bool()
    if hybrid is not None and hybrid.off_policy and offline_mask is not None and bool(offline_mask.any()):
        from evr1_train.losses.offpolicy import hybrid_policy_loss

        pg_loss, metrics = hybrid_policy_loss(
            old_log_prob,
            log_prob,
            advantages,
            mask,
            cfg.loss_agg_mode,
            actor_cfg,
            None,
            offline_mask=offline_mask,
            hybrid=hybrid,
        )
    else:
        pg_loss, metrics = get_policy_loss_fn(cfg.loss_mode)(
            old_log_prob=old_log_prob,
            log_prob=log_prob,
            advantages=advantages,
            response_mask=mask,
            loss_agg_mode=cfg.loss_agg_mode,
            config=actor_cfg,
            rollout_is_weights=None,
        )
    out = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) or torch.is_tensor(v)}
    out["actor/pg_loss"] = float(pg_loss.detach())
    loss = pg_loss
    if entropy is not None and cfg.entropy_coeff:
        ent = agg_loss(loss_mat=entropy, loss_mask=mask, loss_agg_mode=cfg.loss_agg_mode, **actor_cfg.global_batch_info)
        loss = loss - cfg.entropy_coeff * ent
        out["actor/entropy_loss"] = float(ent.detach())
    if cfg.use_kl_loss:
        if ref_log_prob is None:
            raise ValueError("actor.use_kl_loss=True but no reference log-probs were computed (engine bug)")
        kld = kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob, kl_penalty=cfg.kl_loss_type)
        kl = agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=cfg.loss_agg_mode, **actor_cfg.global_batch_info)
        loss = loss + cfg.kl_loss_coef * kl
        out["actor/kl_loss"] = float(kl.detach())
    return loss, out


def kl_in_reward(
    token_level_scores: torch.Tensor,
    old_log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_coef: float,
    penalty: str,
) -> tuple[torch.Tensor, float]:
    """verl's `apply_kl_penalty`: rewards - beta * KL(old || ref) per token; returns (rewards, mean sequence KL)."""
    from verl.trainer.ppo import core_algos

    kld = core_algos.kl_penalty(old_log_prob, ref_log_prob, kl_penalty=penalty) * response_mask
    seq_kl = (kld.sum(-1) / response_mask.sum(-1).clamp_min(1)).mean()
    return token_level_scores - kl_coef * kld, float(seq_kl)
