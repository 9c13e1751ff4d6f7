"""evr1-train: video RL with verifiable rewards on verl (Ray, FSDP, vLLM) and on a single-process local engine.

Importing the package is light (no torch, verl or transformers); the public names below load on first use:
    HybridConfig, plan_group, fit_offline_response, hybrid_metrics       (evr1_train.hybrid, pure Python)
    DataOptions, RowInputs, row_to_inputs                                (evr1_train.data, verl-free)
    hybrid_policy_loss, vision_zero_term                                 (evr1_train.losses, torch)
    Evr1Dataset                                                          (evr1_train.data.dataset, verl)
    Evr1SFTDataset                                                       (evr1_train.data.sft_dataset, verl)
    prepare_verl_config                                                  (evr1_train.verl_config)
    MODULE_GROUPS, freeze_modules                                        (evr1_train.modules, pure Python)
Console script: `evr1-train` (evr1_train.cli, a Hydra app).
"""

from __future__ import annotations

from evr1_cache.lazy import lazy_exports

_LAZY = {
    name: f"evr1_train.{module}"
    for module, names in {
        "hybrid": "HybridConfig plan_group fit_offline_response hybrid_metrics",
        "data": "DataOptions RowInputs row_to_inputs",
        "losses": "hybrid_policy_loss vision_zero_term",
        "data.dataset": "Evr1Dataset",
        "data.sft_dataset": "Evr1SFTDataset",
        "modules": "MODULE_GROUPS freeze_modules",
        "verl_config": "prepare_verl_config",
    }.items()
    for name in names.split()
}

__all__ = [*sorted(_LAZY), "__version__"]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, dist="evr1-train")
