"""Rollout dumps for the evr1 viewer: what the model saw and said at a training step, for both engines.

    DumpConfig, RolloutDumpWriter, group_record, media_records   (evr1_train.rollouts.writer: stdlib + evr1-cache)
    attach_local, finish_local, maybe_dump_verl                  (evr1_train.rollouts.engines: the engine hooks)
    train_run_record, build_viewer, main                         (evr1_train.rollouts.view: `evr1-train view`)
Settings: `evr1.rollout_dump` in the training config (docs/viewer.md).
"""

from __future__ import annotations

from evr1_train.rollouts.writer import SCHEMA, DumpConfig, RolloutDumpWriter, group_record, media_records

__all__ = ("SCHEMA", "DumpConfig", "RolloutDumpWriter", "group_record", "media_records")
