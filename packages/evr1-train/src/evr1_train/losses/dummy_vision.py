"""Zero-gradient participation of the vision tower for micro-batches without pixels (mixed image/video/text batches).

Why: under FSDP every rank must run the same collectives. A rank whose micro-batch is text-only would skip the
vision tower's all-gather while another rank runs it, and training hangs. verl 0.9.1's own Qwen2/2.5/3-VL forward
patch already adds a dummy pass for text-only micro-batches on the verl path; this helper gives the same guarantee
to plain transformers models (the local engine) and is what our tests compare verl's patch against.

The dummy input is a zero patch grid of the modality's shape, its output enters the loss with weight exactly 0,
so every vision parameter receives a gradient tensor of zeros (not None) and the update is unchanged.

Names (stable): vision_zero_term(model, kind="image") -> scalar tensor (== 0.0, differentiable),
needs_dummy(pixel_values, pixel_values_videos) -> bool, add_dummy_vision(inputs_embeds, model, **pixels) -> tensor
"""

from __future__ import annotations

from typing import Any

import torch


def vision_zero_term(model: Any, kind: str = "image") -> torch.Tensor:
    """0 * (mean of the vision tower's outputs on a 4x4-patch zero input [2 frames for "video"])."""
    owners = (model, getattr(model, "model", model))
    visual = next((o.visual for o in owners if getattr(o, "visual", None) is not None), None)
    if visual is None:
        raise AttributeError(f"{type(model).__name__} has no vision tower (`.visual`); is it a Qwen-VL model?")
    vc = getattr(getattr(model, "config", None), "vision_config", None)
    if vc is None:
        raise AttributeError(f"{type(model).__name__}.config has no vision_config")
    in_ch = getattr(vc, "in_channels", getattr(vc, "in_chans", 3))
    patch_dim = in_ch * vc.temporal_patch_size * vc.patch_size**2
    t = 2 if kind == "video" else 1
    side = 2 * getattr(vc, "spatial_merge_size", 2)
    param = next(visual.parameters())
    pixels = torch.zeros((t * side * side, patch_dim), dtype=param.dtype, device=param.device)
    grid = torch.tensor([[t, side, side]], dtype=torch.long, device=param.device)
    return sum((0.0 * x.float().mean() for x in _tensors(visual(pixels, grid_thw=grid))), param.new_zeros(()))


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple | list):
        return [t for o in out for t in _tensors(o)]
    if hasattr(out, "to_tuple"):  # transformers ModelOutput (pooler_output, deepstack features, ...)
        return [t for o in out.to_tuple() for t in _tensors(o)]
    return []


def needs_dummy(pixel_values: Any = None, pixel_values_videos: Any = None) -> bool:
    """Qwen-VL runs images and videos through one tower, so only a micro-batch with neither needs the dummy."""
    return pixel_values is None and pixel_values_videos is None


def add_dummy_vision(
    inputs_embeds: torch.Tensor, model: Any, pixel_values: Any = None, pixel_values_videos: Any = None
) -> torch.Tensor:
    """inputs_embeds + 0 * vision(dummy) when the micro-batch has no pixels; unchanged otherwise."""
    if not needs_dummy(pixel_values, pixel_values_videos):
        return inputs_embeds
    return inputs_embeds + vision_zero_term(model).to(inputs_embeds.dtype)
