"""Qwen2-VL / Qwen2.5-VL M-RoPE position ids as the models were trained (Qwen's reference, vLLM, verl).

transformers 5.x rewrote `get_rope_index`: the text after a video starts at the video's first position plus
`max(h, w) // merge`, ignoring the video's temporal extent (and 5.10 also truncates `second_per_grid_ts` to an
integer). Qwen's reference code (transformers 4.x), vLLM (`get_mrope_input_positions`) and verl
(`verl.models.transformers.qwen2_vl.get_rope_index`) start it one past the largest position of the video. On a
video of more than one temporal patch the two disagree on every position after the video, so a model answers
differently on transformers than on vLLM. `use_reference_mrope` puts the reference rule on a loaded transformers
model: evr1-train's local engine trains and generates, and evr1-eval's transformers backend evaluates, on the positions
vLLM and verl give the cached frames. Here, in the package train and eval share, so both use one rule; torch is
imported only inside the functions (`import evr1_cache` stays light).
"""

from __future__ import annotations

import itertools
import types
from typing import Any

#: Model types whose video is one block of several temporal patches (Qwen3-VL puts each frame in its own block).
REFERENCE_MROPE_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl"})


def reference_rope_index(
    config: Any,
    input_ids: Any,
    mm_token_type_ids: Any = None,
    image_grid_thw: Any = None,
    video_grid_thw: Any = None,
    second_per_grid_ts: Any = None,
    attention_mask: Any = None,
) -> tuple[Any, Any]:
    """`(position_ids [3, batch, seq], deltas [batch, 1])` by the reference rule (see the module doc)."""
    import torch

    vision = getattr(config, "vision_config", config)
    merge = int(vision.spatial_merge_size)
    per_second = float(getattr(vision, "tokens_per_second", 1.0) or 1.0)
    has_seconds = getattr(config, "model_type", "") == "qwen2_5_vl"
    if mm_token_type_ids is None:
        mm_token_type_ids = (input_ids == config.image_token_id).long() + 2 * (input_ids == config.video_token_id)
    grids = {1: iter(image_grid_thw.tolist() if image_grid_thw is not None else []),
             2: iter(video_grid_thw.tolist() if video_grid_thw is not None else [])}  # fmt: skip
    seconds = iter(second_per_grid_ts.tolist() if second_per_grid_ts is not None else [])
    positions = torch.zeros(3, *input_ids.shape, dtype=torch.long, device=input_ids.device)
    deltas = []
    for b in range(input_ids.shape[0]):
        keep = (
            attention_mask[b].bool() if attention_mask is not None else torch.ones_like(input_ids[b], dtype=torch.bool)
        )
        kinds = mm_token_type_ids[b][keep].tolist()
        parts: list[Any] = []
        start = 0
        for kind, run in itertools.groupby(kinds):  # runs of text (0), image (1) and video (2) tokens
            n = sum(1 for _ in run)
            if kind == 0:
                parts.append(torch.arange(n).expand(3, -1) + start)
                start += n
            else:
                t, h, w = next(grids[kind])
                h, w = h // merge, w // merge
                if kind == 2 and has_seconds:  # (index * seconds * tokens/s) truncated, as in the reference
                    tt = (torch.arange(t) * float(next(seconds, 1.0)) * per_second).long()
                else:
                    tt = torch.arange(t)
                block = torch.stack([tt.repeat_interleave(h * w), torch.arange(h).repeat_interleave(w).repeat(t),
                                     torch.arange(w).repeat(h * t)]) + start  # fmt: skip
                if block.shape[1] != n:
                    raise ValueError(f"{n} vision tokens for a grid of {t}x{h}x{w}: prompt and grids disagree")
                parts.append(block)
                start = int(block.max()) + 1
        row = torch.cat(parts, dim=1) if parts else torch.zeros(3, 0, dtype=torch.long)
        positions[:, b, keep] = row.to(positions.device)
        deltas.append((int(row.max()) + 1 if row.numel() else 0) - len(kinds))
    return positions, torch.tensor(deltas, device=input_ids.device).unsqueeze(1)


def use_reference_mrope(model: Any) -> bool:
    """Give a loaded Qwen2-VL / Qwen2.5-VL transformers model the reference `get_rope_index`; True when it did."""
    inner = getattr(model, "model", model)
    config = getattr(inner, "config", None)
    if getattr(config, "model_type", None) not in REFERENCE_MROPE_TYPES or not hasattr(inner, "get_rope_index"):
        return False

    def get_rope_index(self: Any, input_ids: Any, mm_token_type_ids: Any = None, image_grid_thw: Any = None,
                       video_grid_thw: Any = None, second_per_grid_ts: Any = None, attention_mask: Any = None,
                       **_: Any) -> tuple[Any, Any]:  # fmt: skip
        return reference_rope_index(self.config, input_ids, mm_token_type_ids, image_grid_thw, video_grid_thw,
                                    second_per_grid_ts, attention_mask)  # fmt: skip

    inner.get_rope_index = types.MethodType(get_rope_index, inner)
    return True
