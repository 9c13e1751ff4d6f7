"""Compatibility shim for one verl 0.9.1 bug on the mixed-modality path (applied by the plugin, version-guarded).

verl 0.9.1 patches Qwen2/2.5-VL's forward so a text-only micro-batch still runs the vision tower (the FSDP-hang
guard). Its text-only branch does `model.visual(...).mean()`, but with the transformers versions verl itself
requires (>= 5.5) the vision tower returns a `BaseModelOutputWithPooling`, so every text-only micro-batch raises
`AttributeError: 'BaseModelOutputWithPooling' object has no attribute 'mean'` (image/video batches are unaffected).
The shim replaces only that branch with `evr1_train.losses.add_dummy_vision` (same zero-gradient dummy pass,
ModelOutput-aware) and leaves every batch with pixels to verl's own code. It is installed only on verl 0.9.x (a
version check: a later verl is left alone, and must be checked again when evr1 supports it), once per process (a
marker attribute on the replaced function); `EVR1_VERL_COMPAT=0` turns it off.

Names (stable): patch_qwen2_vl_text_only() -> bool (True when installed)
"""

from __future__ import annotations

import functools
import os
from typing import Any


def patch_qwen2_vl_text_only() -> bool:
    if os.environ.get("EVR1_VERL_COMPAT", "1") == "0":
        return False
    import verl
    from verl.models.transformers import qwen2_vl

    if not verl.__version__.startswith("0.9.") or getattr(qwen2_vl._get_input_embeds, "__evr1_compat__", False):
        return False
    original = qwen2_vl._get_input_embeds

    @functools.wraps(original)
    def _get_input_embeds(
        model: Any,
        input_ids: Any,
        attention_mask: Any = None,
        pixel_values: Any = None,
        pixel_values_videos: Any = None,
        image_grid_thw: Any = None,
        video_grid_thw: Any = None,
    ) -> Any:
        if pixel_values is not None or pixel_values_videos is not None:
            return original(
                model, input_ids, attention_mask, pixel_values, pixel_values_videos, image_grid_thw, video_grid_thw
            )
        from evr1_train.losses.dummy_vision import add_dummy_vision

        embeds = add_dummy_vision(model.get_input_embeddings()(input_ids), model)
        if attention_mask is not None:
            attention_mask = attention_mask.to(embeds.device)
        return embeds, attention_mask

    vars(_get_input_embeds)["__evr1_compat__"] = True  # the marker: a function attribute (idempotent patch)
    qwen2_vl._get_input_embeds = _get_input_embeds
    return True
