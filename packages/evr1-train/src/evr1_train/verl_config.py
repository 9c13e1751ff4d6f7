"""Checks and derived settings for a composed config before verl starts (fail in seconds, not after Ray is up).

Why: verl validates its own keys, but not evr1's cross-key rules — a hybrid group needs n > k, the off-policy
loss needs the V1 trainer and must wrap the algorithm's own loss, the frame cache folder must be set. verl-free
(OmegaConf only), so tests run it on every preset.

Names (stable): prepare_verl_config(cfg) -> cfg (edited in place), ConfigError
"""

from __future__ import annotations

from typing import Any

from evr1_train.data.options import DataOptions
from evr1_train.errors import ConfigError
from evr1_train.hybrid import HybridConfig
from evr1_train.hybrid.config import LOSS_NAME

__all__ = ["ConfigError", "prepare_verl_config"]


def _node(cfg: Any, dotted: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, dotted, throw_on_missing=False)


def _lora_and_frozen(cfg: Any) -> None:
    """`evr1.lora.exclude` -> verl's `actor_rollout_ref.model.exclude_modules` (one regex); `evr1.frozen_modules`
    validated and handed to the Ray workers (`EVR1_FROZEN_MODULES` in verl's `ray_kwargs.ray_init.runtime_env`)."""
    import json

    from omegaconf import OmegaConf, open_dict

    from evr1_train.engine.config import lora_exclude
    from evr1_train.modules import exclude_regex, pattern_of
    from evr1_train.verl_hooks.freeze import ENV_VAR

    groups = list(_node(cfg, "evr1.lora.exclude") or [])
    frozen = [str(s) for s in (_node(cfg, "evr1.frozen_modules") or [])]
    for spec in [*groups, *frozen]:
        try:
            pattern_of(str(spec))
        except ValueError as exc:
            key = "evr1.lora.exclude" if spec in groups else "evr1.frozen_modules"
            raise ConfigError(f"{key}: {exc}") from None
    with open_dict(cfg):
        current = _node(cfg, "actor_rollout_ref.model.exclude_modules")
        wanted = exclude_regex([str(g) for g in groups])
        if wanted and (not isinstance(current, str) or wanted not in current):  # idempotent
            cfg.actor_rollout_ref.model.exclude_modules = lora_exclude(cfg)
        if frozen:
            actor = cfg.actor_rollout_ref.actor
            if actor.get("strategy") == "fsdp" and not OmegaConf.select(actor, "fsdp_config.use_orig_params"):
                raise ConfigError(
                    "evr1.frozen_modules with actor_rollout_ref.actor.strategy=fsdp needs "
                    "actor_rollout_ref.actor.fsdp_config.use_orig_params=true (FSDP1 flattens frozen and trainable "
                    "weights together); or use strategy=fsdp2"
                )
            env_var = f"ray_kwargs.ray_init.runtime_env.env_vars.{ENV_VAR}"
            OmegaConf.update(cfg, env_var, json.dumps(frozen), force_add=True)  # beside any env_vars already set


def prepare_verl_config(cfg: Any, check_paths: bool = True) -> Any:
    """Validate evr1's keys, derive `evr1_hybrid` loss settings, return the same (edited) config."""
    from omegaconf import OmegaConf, open_dict

    node = cfg.data.evr1
    missing = OmegaConf.is_missing(node, "cache_dir") or node.get("cache_dir") in (None, "")
    if missing and node.get("video_source", "prefer_cache") != "decode":
        if check_paths:
            raise ConfigError(
                "data.evr1.cache_dir is not set: pass the `evr1-cache build --out` folder "
                "(data.evr1.cache_dir=DIR), or decode on the fly with data.evr1.video_source=decode"
            )
        with open_dict(cfg):
            cfg.data.evr1.cache_dir = None
            cfg.data.evr1.video_source = "decode"
    DataOptions.from_mapping(_node(cfg, "data.evr1"))
    hybrid = HybridConfig.from_mapping(_node(cfg, "evr1.hybrid"))
    hybrid.check_group_size(int(_node(cfg, "actor_rollout_ref.rollout.n") or 1))  # a no-op when hybrid is off
    use_v1 = bool(_node(cfg, "trainer.use_v1"))
    loss_mode = str(_node(cfg, "actor_rollout_ref.actor.policy_loss.loss_mode") or "vanilla")
    with open_dict(cfg):
        if hybrid.off_policy:
            if not use_v1:
                raise ConfigError(
                    "evr1.hybrid.offline_handling=off_policy needs verl's V1 trainer (trainer.use_v1=true, "
                    "trainer.v1.trainer_mode=evr1); this preset uses the legacy trainer (e.g. ReMax) — "
                    "use evr1.hybrid.offline_handling=on_policy there"
                )
            if _node(cfg, "trainer.v1.trainer_mode") != "evr1":
                raise ConfigError("evr1.hybrid.offline_handling=off_policy needs trainer.v1.trainer_mode=evr1")
            if loss_mode != LOSS_NAME:
                cfg.evr1.hybrid.base_loss_mode = loss_mode
                cfg.actor_rollout_ref.actor.policy_loss.loss_mode = LOSS_NAME
        elif loss_mode == LOSS_NAME:
            raise ConfigError(
                f"actor_rollout_ref.actor.policy_loss.loss_mode={LOSS_NAME} is only meaningful with "
                "evr1.hybrid.enable=true and evr1.hybrid.offline_handling=off_policy"
            )
    _lora_and_frozen(cfg)
    if hybrid.enable and _node(cfg, "actor_rollout_ref.rollout.agent.default_agent_loop") != "evr1_hybrid":
        raise ConfigError(
            "evr1.hybrid.enable=true needs actor_rollout_ref.rollout.agent.default_agent_loop=evr1_hybrid "
            "(the agent loop that returns stored trajectories)"
        )
    return cfg
