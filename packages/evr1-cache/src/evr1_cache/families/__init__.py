"""Model-family adapters: what differs between VLM families' visual input, asked instead of branching on model names.

One module per family, registered by name and by the transformers `model_type`s it serves:

| family | model types | frames | size factor |
|---|---|---|---|
| `qwen2_5_vl` | qwen2_vl, qwen2_5_vl | qwen-vl-utils | 28 |
| `qwen3_vl` | qwen3_vl, qwen3_vl_moe | qwen-vl-utils | 32 |
| `qwen3_5` | qwen3_5, qwen3_5_moe | qwen-vl-utils | 32 |
| `glm4v` | glm4v, glm4v_moe | GLM-4.1V's processor | 28 |
| `internvl` | internvl | one frame per segment | tile side (448) |

    from evr1_cache.families import get_family, family_for_model
    fam = family_for_model("path/to/checkpoint")          # by config.json's model_type
    spec = fam.video_spec(fps=2.0, max_frames=64)          # SamplingSpec(family=...): the family's rule applies
    n = fam.video_tokens(16, 448, 448)                     # vision placeholders of one video
    text = fam.video_prompt(meta, meta.resized_height, meta.resized_width)  # the processor's exact expansion

Standard library only (a nox session and an import-linter contract check it); engines get plain data.
Adding a family = one module here (a `ModelFamily` subclass or instance + `register`) and its tests.
"""

from __future__ import annotations

from evr1_cache.families import glm4v, internvl, qwen2_5_vl, qwen3_5, qwen3_vl  # noqa: F401  (register them)
from evr1_cache.families.base import ModelFamily, hf_metadata, video_fields
from evr1_cache.families.registry import (
    all_families,
    family_for_model,
    family_names,
    family_of_processor,
    family_or_none,
    get_family,
    register,
)

__all__ = [
    "ModelFamily",
    "all_families",
    "family_for_model",
    "family_names",
    "family_of_processor",
    "family_or_none",
    "get_family",
    "hf_metadata",
    "register",
    "video_fields",
]
