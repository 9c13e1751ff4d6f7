"""The single-process local engine: the verl recipe (same data code, rewards, hybrid mixer, verl's core_algos) on one
CPU or GPU. `run(cfg)` is what `evr1-train engine=local` calls; `LocalTrainer` drives it step by step.

Public API: run, RunSummary, LocalConfig, LocalTrainer (RL), SFTTrainer (supervised warm start), TrainerState
(`state_dict()` / `load_state_dict()`). torch/transformers/verl load on first use, not on import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evr1_cache.lazy import lazy_exports

if TYPE_CHECKING:
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.local import RunSummary, run
    from evr1_train.engine.sft import SFTTrainer
    from evr1_train.engine.state import TrainerState
    from evr1_train.engine.trainer import LocalTrainer

_LAZY = {
    "run": "evr1_train.engine.local",
    "RunSummary": "evr1_train.engine.local",
    "LocalConfig": "evr1_train.engine.config",
    "LocalTrainer": "evr1_train.engine.trainer",
    "SFTTrainer": "evr1_train.engine.sft",
    "TrainerState": "evr1_train.engine.state",
}
__all__ = ["LocalConfig", "LocalTrainer", "RunSummary", "SFTTrainer", "TrainerState", "run"]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
