"""Qwen3.5, dense (e.g. Qwen3.5-9B) and MoE (e.g. Qwen3.5-35B-A3B): natively multimodal, Qwen3-VL's vision input.

transformers serves both with `Qwen3VLProcessor` (patch 16 x merge 2, timestamped temporal patches), so frames,
sizes and prompt expansion are Qwen3-VL's; the language model differs (Gated DeltaNet + attention layers).
"""

from __future__ import annotations

from evr1_cache.families._qwen import TimestampedQwenFamily
from evr1_cache.families.registry import register

QWEN3_5 = register(
    TimestampedQwenFamily(
        name="qwen3_5",
        title="Qwen3.5 (dense and MoE)",
        model_types=("qwen3_5", "qwen3_5_moe"),
        checkpoints=("Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-4B"),
        patch_size=16,
        hf_processor="Qwen3VLProcessor",
        vllm_architectures=("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    )
)
