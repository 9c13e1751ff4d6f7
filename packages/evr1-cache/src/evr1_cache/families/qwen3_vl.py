"""Qwen3-VL, dense and MoE (Qwen3-VL-30B-A3B): patch 16 x merge 2 (size factor 32), qwen-vl-utils frames.

The processor writes each temporal patch (2 frames) as `<t.t seconds><|vision_start|>pads<|vision_end|>`, with `t`
the mean time of the patch's two frames: the timestamps are part of the prompt, so a wrong `fps` changes the tokens.
Qwen3-VL's video pixel budget is over all frames (`total_pixels`), unlike Qwen2.5-VL's per-frame `max_pixels`.
"""

from __future__ import annotations

from evr1_cache.families._qwen import (
    QWEN_END_OF_TURN,
    QWEN_FRAME_RULE,
    QWEN_RESIZE,
    QWEN_SIZE_RULE,
    QWEN_VISION_TOKENS,
    TimestampedQwenFamily,
)
from evr1_cache.families.registry import register

QWEN3_VL = register(
    TimestampedQwenFamily(
        name="qwen3_vl",
        title="Qwen3-VL (dense and MoE)",
        model_types=("qwen3_vl", "qwen3_vl_moe"),
        checkpoints=("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-4B-Instruct"),
        patch_size=16,
        merge_size=2,
        temporal_patch_size=2,
        size_factors=(32,),
        frame_rule=QWEN_FRAME_RULE,
        size_rule=QWEN_SIZE_RULE,
        reference_resize=QWEN_RESIZE,
        image_token="<|image_pad|>",
        video_token="<|video_pad|>",
        vision_tokens=QWEN_VISION_TOKENS,
        end_of_turn=QWEN_END_OF_TURN,
        vision_keys=("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw"),
        hf_processor="Qwen3VLProcessor",
        vllm_architectures=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
    )
)
