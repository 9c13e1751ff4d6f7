"""`verl.plugins` entry point: importing this module registers evr1's pieces in the current process.

verl imports every `verl.plugins` entry point inside `import verl`, i.e. in the driver and in every Ray worker, so
names used in YAML (`evr1_hybrid` loss and agent loop, `evr1_agent` agent loop, `evr1` trainer mode) resolve everywhere. It also installs
the version-guarded text-only-vision shim of `compat` (a verl 0.9.1 bug on mixed-modality batches) and, when
`evr1.frozen_modules` is set (`EVR1_FROZEN_MODULES` in the worker's environment), the freezing wrapper of `freeze`.
verl swallows plugin import errors at debug level, so each registration logs its own failure at WARNING.

Names (stable): register() (idempotent), REGISTERED (names registered in this process)
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("evr1_train.verl_hooks.plugin")
REGISTERED: dict[str, str] = {}


def _register_loss() -> None:
    from evr1_train.hybrid.config import LOSS_NAME
    from evr1_train.losses.offpolicy import register_with_verl

    register_with_verl()
    REGISTERED[f"policy_loss:{LOSS_NAME}"] = "evr1_train.losses.offpolicy.hybrid_policy_loss"


def _register_agent_loop() -> None:
    from verl.experimental.agent_loop import agent_loop as al

    from evr1_train.verl_hooks.agent_loop import AGENT_NAME, Evr1HybridAgentLoop
    from evr1_train.verl_hooks.agent_tools import AGENT_TOOLS_NAME, Evr1AgentLoop

    for name, cls in ((AGENT_NAME, Evr1HybridAgentLoop), (AGENT_TOOLS_NAME, Evr1AgentLoop)):
        target = f"{cls.__module__}.{cls.__qualname__}"
        current = al._agent_loop_registry.get(name)  # read only: verl's `register` overwrites without a check
        if current is not None and current.get("_target_") != target:
            raise ValueError(f"agent loop {name!r} is already registered to {current}")
        al.register(name)(cls)  # verl's public decorator
        REGISTERED[f"agent_loop:{name}"] = target


def _register_trainer() -> None:
    import importlib.util

    if importlib.util.find_spec("transfer_queue") is None:  # V1 trainers need it; verl's legacy trainer does not
        return
    from evr1_train.verl_hooks import trainer

    REGISTERED[f"trainer:{trainer.TRAINER_MODE}"] = "evr1_train.verl_hooks.trainer.Evr1Trainer"


def _compat() -> None:
    from evr1_train.verl_hooks.compat import patch_qwen2_vl_text_only

    if patch_qwen2_vl_text_only():
        REGISTERED["compat:qwen2_vl_text_only"] = "evr1_train.verl_hooks.compat"


def _freeze() -> None:
    from evr1_train.verl_hooks.freeze import ENV_VAR, install_freeze_patch

    if install_freeze_patch():
        REGISTERED["freeze:fsdp_build_module"] = os.environ[ENV_VAR]


def register() -> dict[str, str]:
    for step in (_register_loss, _register_agent_loop, _register_trainer, _compat, _freeze):
        try:
            step()
        except Exception as exc:  # keep verl importable; say loudly what is missing
            logger.warning("evr1 plugin: %s failed: %s: %s", step.__name__, type(exc).__name__, exc)
    return dict(REGISTERED)


register()
