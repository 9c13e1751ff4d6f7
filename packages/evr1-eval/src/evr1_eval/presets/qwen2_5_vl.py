"""Qwen2.5-VL's published video evaluation settings.

- "the maximum number of frames analysed per video at 768, with the total number of video tokens not exceeding
  24,576" (Qwen2.5-VL technical report, arXiv 2502.13923, Table 8 footnote); for short videos "set the FPS to 2 and
  the `total_pixels` to 24576 * 28 * 28" (maintainer, QwenLM/Qwen3-VL#925). One Qwen2.5-VL video token covers
  28 x 28 pixels of a frame pair: `total_pixels = 24_576 * 28 * 28`; `size_factor` 28.
- Per-frame bounds: qwen-vl-utils' defaults, 128-768 tokens of 28 x 28 pixels (QwenLM/Qwen3-VL#93, maintainer:
  "fps=2, min_frames=4, max_frames=768, min_pixels_perframe=128x28x28, max_pixels_perframe=768x28x28").
- Decoding: not published for the video tables; greedy (the benchmarks' own harnesses decode greedily).
"""

from __future__ import annotations

from evr1_eval.presets.registry import Preset, Source, register

OFFICIAL = register(
    Preset(
        name="qwen2_5_vl_official",
        family="qwen2_5_vl",
        description="Qwen2.5-VL as reported: 2 fps, <= 768 frames, <= 24,576 video tokens, greedy",
        sources=(
            Source("<= 768 frames, <= 24,576 video tokens", "Qwen2.5-VL technical report (arXiv 2502.13923), Table 8"),
            Source("fps 2, total_pixels 24576*28*28 for short videos", "QwenLM/Qwen3-VL#925"),
            Source("per-frame 128-768 x 28 x 28 pixels, 4-768 frames", "QwenLM/Qwen3-VL#93"),
        ),
        sampling={
            "fps": 2.0,
            "min_frames": 4,
            "max_frames": 768,
            "min_pixels": 128 * 28 * 28,
            "max_pixels": 768 * 28 * 28,
            "total_pixels": 24_576 * 28 * 28,
            "size_factor": 28,
        },
        generation={"temperature": 0.0, "top_p": 1.0, "top_k": -1},
        notes=("no decoding settings are published for Qwen2.5-VL's video results: greedy decoding",),
    )
)
