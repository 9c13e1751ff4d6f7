"""LoRA for the local engine through `peft`, configured exactly like verl's FSDP actor does it.

verl 0.9.1 (`workers/engine/fsdp/transformer_impl.py`, `_build_lora_module`) wraps the actor with
`get_peft_model(module, LoraConfig(task_type=CAUSAL_LM, r=model.lora_rank, lora_alpha=model.lora_alpha,
target_modules=model.target_modules, exclude_modules=model.exclude_modules, bias="none"))`, or loads
`model.lora_adapter_path` with `PeftModel.from_pretrained(..., is_trainable=True)`. The local engine reads the same
keys and builds the same `LoraConfig`, so an experiment moves between engines unchanged. A checkpoint's `actor/`
then holds only the adapter (`adapter_config.json` + `adapter_model.safetensors`); `evr1-train merge` writes a full
model folder from it, and `load_merged` gives a full model from an adapter folder (e.g. RL from a LoRA SFT run).

Names (stable): lora_config(cfg), apply_lora(model, cfg), is_adapter_folder(path), load_merged(folder, dtype),
ADAPTER_CONFIG, ADAPTER_WEIGHTS
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def lora_config(cfg: Any) -> Any:
    """peft's `LoraConfig` from a LocalConfig (the same fields verl passes)."""
    from peft import LoraConfig, TaskType

    targets = cfg.lora_target_modules
    return LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        target_modules=targets if isinstance(targets, str) else list(targets),
        exclude_modules=cfg.lora_exclude_modules,
        bias="none",
    )


def apply_lora(model: Any, cfg: Any) -> Any:
    """The model wrapped with a trainable LoRA adapter (new, or `cfg.lora_adapter_path` to continue one)."""
    from peft import PeftModel, get_peft_model

    if cfg.lora_adapter_path:
        return PeftModel.from_pretrained(model, cfg.lora_adapter_path, is_trainable=True)
    return get_peft_model(model, lora_config(cfg))


def describe_adapter(model: Any, cfg: Any) -> dict[str, Any]:
    """The adapter as the protocol file records it."""
    adapted = sorted({name.rsplit(".lora_", 1)[0] for name, _ in model.named_parameters() if ".lora_" in name})
    return {
        "type": "lora",
        "rank": cfg.lora_rank,
        "alpha": cfg.lora_alpha,
        "target_modules": cfg.lora_target_modules
        if isinstance(cfg.lora_target_modules, str)
        else list(cfg.lora_target_modules),
        "exclude_modules": cfg.lora_exclude_modules,
        "adapted_modules": len(adapted),
        "base_model": cfg.model_path,
        "merge": "evr1-train merge CHECKPOINT writes a full model folder",
    }


def is_adapter_folder(path: str | Path) -> bool:
    folder = Path(path)
    return (folder / ADAPTER_CONFIG).exists() and not (folder / "config.json").exists()


def adapter_base(folder: str | Path) -> str:
    """The base model an adapter folder was trained on (peft's `base_model_name_or_path`)."""
    data = json.loads((Path(folder) / ADAPTER_CONFIG).read_text())
    base = data.get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{folder}/{ADAPTER_CONFIG} names no base model (base_model_name_or_path); pass --base")
    return str(base)


def load_merged(folder: str | Path, dtype: Any, base: str | None = None) -> Any:
    """A plain transformers model: the adapter in `folder` merged into its base model's weights."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    from evr1_cache import check_model_path

    base = base or adapter_base(folder)
    check_model_path(base, f"the adapter's base model ({folder}/{ADAPTER_CONFIG})")
    model = AutoModelForImageTextToText.from_pretrained(base, dtype=dtype)
    return PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
