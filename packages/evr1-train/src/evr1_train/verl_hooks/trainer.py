"""`evr1` trainer mode: verl's synchronous V1 trainer plus evr1's loss wrapper and offline/online metrics.

Why: the two things verl's stock trainer cannot know — which samples are stored trajectories (for the off-policy
loss) and how offline and online samples score separately — need the public `set_loss_fn` hook and the metrics
step. Everything else (rollout, reward, advantages, update) is verl's own code.

Use: trainer.v1.trainer_mode=evr1 (the plugin registers it). Names (stable): Evr1Trainer, TRAINER_MODE
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from evr1_train.hybrid import hybrid_metrics_from_extra_fields
from evr1_train.losses.verl_loss import evr1_ppo_loss
from evr1_train.verl_hooks.agent_loop import hybrid_config_of

logger = logging.getLogger(__name__)
TRAINER_MODE = "evr1"


@register_trainer(TRAINER_MODE)
class Evr1Trainer(PPOTrainerSync):
    """PPOTrainerSync + `evr1_ppo_loss` (when hybrid off-policy handling is on) + `evr1/hybrid/*` metrics."""

    def on_init_end(self) -> None:
        super().on_init_end()
        hybrid = hybrid_config_of(self.config)
        if hybrid.off_policy:
            from verl.utils.config import omega_conf_to_dataclass

            actor_cfg = omega_conf_to_dataclass(self.config.actor_rollout_ref.actor)
            self.actor_rollout_wg.set_loss_fn(partial(evr1_ppo_loss, config=actor_cfg, hybrid=hybrid))
            logger.info("evr1: off-policy loss for stored trajectories (%s)", hybrid.off_policy_method)

    def _compute_metrics(self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int) -> Any:
        out = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        if hybrid_config_of(self.config).enable:
            import transfer_queue as tq

            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
            metrics.update(hybrid_metrics_from_extra_fields(list(data.pop("extra_fields").tolist())))
        from evr1_train.rollouts.engines import maybe_dump_verl

        maybe_dump_verl(self, batch, global_steps)  # evr1.rollout_dump (no-op unless enabled and due)
        return out
