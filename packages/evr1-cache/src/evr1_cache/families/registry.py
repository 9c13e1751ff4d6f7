"""The family registry: a dict filled by `register()`, looked up by name, alias or a checkpoint's `model_type`.

A second registration of a name (or of a `model_type` another family serves) is a bug and raises; an unknown name
raises with the closest known names, so a typo in a config is a one-line fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypeVar

from evr1_cache.families.base import ModelFamily
from evr1_cache.registry import lookup
from evr1_cache.spec import install_family_lookup

F = TypeVar("F", bound=ModelFamily)

_FAMILIES: dict[str, ModelFamily] = {}
_BY_MODEL_TYPE: dict[str, str] = {}


def register(family: F) -> F:
    """Add `family` under its name and its `model_types`; duplicates are refused (with who holds the name)."""
    if not family.name or family.name != family.name.strip():
        raise ValueError(f"a model family needs a non-empty name without spaces, got {family.name!r}")
    if family.name in _FAMILIES:
        raise ValueError(f"model family {family.name!r} is already registered ({_FAMILIES[family.name].title})")
    taken = [t for t in family.model_types if t in _BY_MODEL_TYPE]
    if taken:
        raise ValueError(
            f"model family {family.name!r}: model_type(s) {taken} already belong to {_BY_MODEL_TYPE[taken[0]]!r}"
        )
    _FAMILIES[family.name] = family
    for model_type in family.model_types:
        _BY_MODEL_TYPE[model_type] = family.name
    return family


def family_names() -> list[str]:
    """Registered family names, sorted."""
    return sorted(_FAMILIES)


def all_families() -> list[ModelFamily]:
    return [_FAMILIES[n] for n in family_names()]


def get_family(name: str | ModelFamily) -> ModelFamily:
    """The family registered as `name` (a family name or a transformers `model_type`); close names are suggested."""
    if isinstance(name, ModelFamily):
        return name
    fix = f"known: {', '.join(family_names())}"
    return lookup(_FAMILIES, str(name), "model family", aliases=_BY_MODEL_TYPE, fix=fix, cutoff=0.5)


install_family_lookup(get_family)  # specs with `family=NAME` resolve through this registry (the spec imports no plugin)


def family_for_model(model: str | os.PathLike[str]) -> ModelFamily:
    """The family of a local checkpoint folder (its `config.json` `model_type`) or of a model_type / family name.

    A Hugging Face id (`Qwen/Qwen3-VL-8B-Instruct`) that is not a local folder is matched by the checkpoints the
    families list; anything else raises with the known families (nothing is downloaded).
    """
    path = Path(model)
    config = path / "config.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{config}: not a readable model config ({exc})") from exc
        model_type = data.get("model_type") if isinstance(data, dict) else None
        if not isinstance(model_type, str):
            raise ValueError(f"{config} has no model_type; cannot tell the model family")
        try:
            return get_family(model_type)
        except KeyError:
            raise KeyError(
                f"{config}: model_type {model_type!r} is not served by any evr1 model family (known: "
                f"{', '.join(family_names())}); add one with evr1_cache.families.register()"
            ) from None
    text = os.fspath(model)
    for family in _FAMILIES.values():
        if text in family.checkpoints:
            return family
    return get_family(text)


def family_or_none(model: str | os.PathLike[str] | None) -> ModelFamily | None:
    """`family_for_model`, or None when the model is unknown (callers then keep their spec as given)."""
    if not model:
        return None
    try:
        return family_for_model(model)
    except (KeyError, ValueError):
        return None


def family_of_processor(processor: object) -> ModelFamily | None:
    """The family of a loaded transformers processor: by its tokenizer's checkpoint folder, else by its class name
    (families sharing a processor class share its rules); None when neither is known."""
    tokenizer = getattr(processor, "tokenizer", processor)
    found = family_or_none(getattr(tokenizer, "name_or_path", None) or None)
    if found is not None:
        return found
    name = type(processor).__name__
    return next((f for f in all_families() if f.hf_processor == name), None)
