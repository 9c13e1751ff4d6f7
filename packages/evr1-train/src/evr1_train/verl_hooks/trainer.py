"""`evr1` trainer mode: verl's synchronous V1 trainer plus evr1's loss wrapper and offline/online metrics.

Why: the two things verl's stock trainer cannot know — which samples are stored trajectories (for the off-policy
loss) and how offline and online samples score separately — need the public `set_loss_fn` hook and the metrics
step. Everything else (rollout, reward, advantages, update) is verl's own code.

Use: trainer.v1.trainer_mode=evr1 (the plugin registers it). Names (stable): Evr1Trainer, TRAINER_MODE
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from evr1_train.hybrid import hybrid_metrics_from_extra_fields
from evr1_train.losses.verl_loss import evr1_ppo_loss
from evr1_train.verl_hooks.agent_loop import hybrid_config_of

if TYPE_CHECKING:
    from evr1_cache import TrainSettings

logger = logging.getLogger(__name__)
TRAINER_MODE = "evr1"


@register_trainer(TRAINER_MODE)
class Evr1Trainer(PPOTrainerSync):  # type: ignore[misc]  # verl's PPOTrainerSync is Any to mypy (verl.*: follow_imports=skip, not installed for typecheck)
    """PPOTrainerSync + `evr1_ppo_loss` (when hybrid off-policy handling is on) + `evr1/hybrid/*` metrics."""

    # verl 0.9.1's V1 base trainer (trainer_base.py) reads `self.trainer_mode`, set from trainer.v1.trainer_mode, and
    # treats every value other than "sync" as an asynchronous mode: ReplayBufferAsync, one-prompt dataloader fetches
    # (data.gen_batch_size forced to 1), prompts tracked in the TransferQueue, TransferQueue checkpoints. "evr1" only
    # selects this class (verl's get_trainer_cls); it runs as verl's synchronous trainer, so that code sees "sync".
    _evr1_protocol: TrainSettings | None = None  # built at the first checkpoint, reused for the next ones

    @property
    def trainer_mode(self) -> str:
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, _selected_as: str) -> None:
        pass

    def on_init_end(self) -> None:
        super().on_init_end()
        hybrid = hybrid_config_of(self.config)
        if hybrid.off_policy:
            from verl.utils.config import omega_conf_to_dataclass

            actor_cfg = omega_conf_to_dataclass(self.config.actor_rollout_ref.actor)
            self.actor_rollout_wg.set_loss_fn(partial(evr1_ppo_loss, config=actor_cfg, hybrid=hybrid))
            logger.info("evr1: off-policy loss for stored trajectories (%s)", hybrid.off_policy_method)

    def _save_checkpoint(self) -> None:
        """verl's checkpoint, then `evr1_train_protocol.json` beside it (how this model was prompted and sampled)."""
        super()._save_checkpoint()
        import os

        from evr1_cache import TRAIN_SETTINGS_FILE
        from evr1_train.engine.protocol import verl_training_protocol, write_checkpoint_protocol

        folder = os.path.join(str(self.config.trainer.default_local_dir), f"global_step_{self.global_steps}")
        try:
            if self._evr1_protocol is None:
                self._evr1_protocol = verl_training_protocol(self.config)
            write_checkpoint_protocol(folder, self._evr1_protocol, self.global_steps)
        except Exception as exc:  # the weights are saved; a missing description must not end the run
            logger.warning("evr1: could not write %s into %s: %r", TRAIN_SETTINGS_FILE, folder, exc)

    def _compute_metrics(
        self, batch: Any, metrics: dict[str, Any], timing_raw: dict[str, Any], global_steps: int, epoch: int
    ) -> Any:
        out = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        if hybrid_config_of(self.config).enable:
            import transfer_queue as tq

            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
            metrics.update(hybrid_metrics_from_extra_fields(list(data.pop("extra_fields").tolist())))
        from evr1_train.rollouts.engines import maybe_dump_verl

        maybe_dump_verl(self, batch, global_steps)  # evr1.rollout_dump (no-op unless enabled and due)
        return out
