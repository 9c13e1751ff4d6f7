"""Qwen2-VL and Qwen2.5-VL: patch 14 x merge 2 (size factor 28), qwen-vl-utils frames, one run of `<|video_pad|>`.

The model's temporal positions come from `second_per_grid_ts` (temporal patch / sampled fps), which the processor
derives from the videos' metadata: without `fps` and `frames_indices` it silently assumes 24 fps.
"""

from __future__ import annotations

from evr1_cache.families._qwen import QwenFamily
from evr1_cache.families.registry import register

QWEN2_5_VL = register(
    QwenFamily(
        name="qwen2_5_vl",
        title="Qwen2-VL / Qwen2.5-VL",
        model_types=("qwen2_5_vl", "qwen2_vl"),
        checkpoints=("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2-VL-7B-Instruct"),
        patch_size=14,
        vision_keys=("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts"),
        hf_processor="Qwen2_5_VLProcessor",
        vllm_architectures=("Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration"),
    )
)
