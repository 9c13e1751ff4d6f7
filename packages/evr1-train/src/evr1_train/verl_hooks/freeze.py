"""Frozen modules on verl: `evr1.frozen_modules` applied to the actor inside every FSDP worker.

verl 0.9.1 has no hook for freezing parameters by name (its `actor.freeze_vision_tower` key exists in the config
dataclass but nothing reads it). So, like `compat`, this is a fenced patch of one private method: the plugin wraps
`verl.workers.engine.fsdp.transformer_impl.FSDPEngine._build_module` so that the module it returns — the Hugging Face
model, before LoRA, FSDP wrapping and optimiser creation — gets `evr1_train.modules.freeze_modules` applied. The
patterns travel from the driver to the Ray workers in the `EVR1_FROZEN_MODULES` environment variable, which
`prepare_verl_config` puts into verl's own `ray_kwargs.ray_init.runtime_env.env_vars`. Installed only on verl 0.9.x,
only when the variable is set, once per process (a marker on the wrapper); each worker logs the frozen count.

Names (stable): ENV_VAR, install_freeze_patch() -> bool, freezing(build_module, specs)
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger("evr1_train.verl_hooks.freeze")
ENV_VAR = "EVR1_FROZEN_MODULES"
_MARKER = "__evr1_freeze__"


def freezing(build_module: Callable[..., Any], specs: Sequence[str]) -> Callable[..., Any]:
    """`build_module` followed by freezing `specs` on the module it returns (and a log line with the counts)."""
    from evr1_train.modules import freeze_modules

    @functools.wraps(build_module)
    def _build_module(self: Any, *args: Any, **kwargs: Any) -> Any:
        module = build_module(self, *args, **kwargs)
        report = freeze_modules(module, list(specs))
        logger.warning("evr1: %s (evr1.frozen_modules=%s)", report.line(), list(specs))
        return module

    setattr(_build_module, _MARKER, True)
    return _build_module


def install_freeze_patch() -> bool:
    """Wrap verl's FSDP engine when `EVR1_FROZEN_MODULES` names patterns; True when installed now."""
    specs = json.loads(os.environ.get(ENV_VAR, "[]") or "[]")
    if not specs:
        return False
    import verl
    from verl.workers.engine.fsdp import transformer_impl

    if not verl.__version__.startswith("0.9."):
        raise RuntimeError(
            f"evr1.frozen_modules on verl {verl.__version__}: evr1 patches verl 0.9.x's FSDPEngine._build_module only"
        )
    engine = transformer_impl.FSDPEngine
    if getattr(engine._build_module, _MARKER, False):
        return False
    engine._build_module = freezing(engine._build_module, specs)
    return True
