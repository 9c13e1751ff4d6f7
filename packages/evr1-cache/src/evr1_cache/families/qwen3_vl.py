"""Qwen3-VL, dense and MoE (Qwen3-VL-30B-A3B): patch 16 x merge 2 (size factor 32), qwen-vl-utils frames.

The processor writes each temporal patch (2 frames) as `<t.t seconds><|vision_start|>pads<|vision_end|>`, with `t`
the mean time of the patch's two frames: the timestamps are part of the prompt, so a wrong `fps` changes the tokens.
Qwen3-VL's video pixel budget is over all frames (`total_pixels`), unlike Qwen2.5-VL's per-frame `max_pixels`.
"""

from __future__ import annotations

from evr1_cache.families._qwen import TimestampedQwenFamily
from evr1_cache.families.registry import register

QWEN3_VL = register(
    TimestampedQwenFamily(
        name="qwen3_vl",
        title="Qwen3-VL (dense and MoE)",
        model_types=("qwen3_vl", "qwen3_vl_moe"),
        checkpoints=("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-4B-Instruct"),
        patch_size=16,
        hf_processor="Qwen3VLProcessor",
        vllm_architectures=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
    )
)
