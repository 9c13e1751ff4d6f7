"""Qwen3.5, dense (e.g. Qwen3.5-9B) and MoE (e.g. Qwen3.5-35B-A3B): natively multimodal, Qwen3-VL's vision input.

transformers serves both with `Qwen3VLProcessor` (patch 16 x merge 2, timestamped temporal patches), so frames,
sizes and prompt expansion are Qwen3-VL's; the language model differs (Gated DeltaNet + attention layers).
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

QWEN3_5 = register(
    TimestampedQwenFamily(
        name="qwen3_5",
        title="Qwen3.5 (dense and MoE)",
        model_types=("qwen3_5", "qwen3_5_moe"),
        checkpoints=("Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-4B"),
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
        vllm_architectures=("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    )
)
