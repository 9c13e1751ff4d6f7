"""What the Qwen-VL families share: qwen-vl-utils' frame and size rules (`evr1_cache.spec`) and Qwen's chat tokens.

Qwen2/2.5-VL, Qwen3-VL (dense and MoE) and Qwen3.5 (dense and MoE) all take frames chosen by qwen-vl-utils'
`smart_nframes` and sized by its `smart_resize`; they differ in patch size (14 vs 16) and in how the processor writes
a video into the prompt (one run of placeholders vs. per-temporal-patch timestamps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evr1_cache.families.base import ModelFamily, VideoLike, video_fields
from evr1_cache.spec import (
    ImageSpec,
    SamplingSpec,
    qwen_frame_indices,
    qwen_resized_hw,
    qwen_resized_image_hw,
)


@dataclass(frozen=True, kw_only=True)
class QwenFamily(ModelFamily):
    """Frames, sizes and counts of qwen-vl-utils; the video expansion is one run of `<|video_pad|>`.

    What the Qwen families share (tokens, merge 2 x 2, two-frame patches, qwen-vl-utils rules) are the defaults; a
    family passes what differs (names, patch size, processor)."""

    merge_size: int = 2
    temporal_patch_size: int = 2
    size_factors: tuple[int, ...] = ()  # () = (patch_size x merge_size,), filled in
    frame_rule: str = "qwen-vl-utils 0.0.14 smart_nframes + torch.linspace(0, n-1, k).round() (vision_process.py)"
    size_rule: str = "qwen-vl-utils 0.0.14 smart_resize with fetch_video's per-frame cap (vision_process.py)"
    reference_resize: str = (
        "torchvision bicubic antialias (qwen-vl-utils fetch_video); PIL bicubic for images (fetch_image)"
    )
    image_token: str = "<|image_pad|>"
    video_token: str = "<|video_pad|>"
    #: Qwen's special tokens around vision spans (the chat template writes `<|vision_start|><|video_pad|><|vision_end|>`).
    vision_tokens: tuple[str, ...] = (
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
        "<|vision_pad|>",
    )
    #: An assistant turn ends with `<|im_end|>`; base checkpoints stop at `<|endoftext|>`.
    end_of_turn: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>")
    vision_keys: tuple[str, ...] = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw")
    spec_rule: bool = True

    def __post_init__(self) -> None:
        if not self.size_factors:
            object.__setattr__(self, "size_factors", (self.patch_size * self.merge_size,))

    def sample_frame_indices(self, total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]:
        return qwen_frame_indices(total_num_frames, native_fps, spec)

    def resized_hw(self, height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]:
        return qwen_resized_hw(height, width, nframes, spec)

    def resized_image_hw(self, height: int, width: int, spec: ImageSpec) -> tuple[int, int]:
        return qwen_resized_image_hw(height, width, spec)

    def video_timing(self, meta: VideoLike) -> dict[str, list[float]]:
        """Qwen2.5-VL's `second_per_grid_ts`: temporal patch / sampled fps (transformers' `VideoMetadata.sampled_fps`)."""
        indices, fps = video_fields(meta)
        total = meta.get("total_num_frames") if isinstance(meta, Mapping) else getattr(meta, "total_num_frames", None)
        if total is None:
            raise ValueError("video metadata needs total_num_frames (pass VideoMeta.to_hf() from evr1-cache)")
        sampled_fps = len(indices) / int(total) * fps
        return {"second_per_grid_ts": [self.temporal_patch_size / sampled_fps]}


@dataclass(frozen=True)
class TimestampedQwenFamily(QwenFamily):
    """Qwen3-VL / Qwen3.5: each temporal patch is written as `<t.t seconds><|vision_start|>pads<|vision_end|>`."""

    def frame_seconds(self, meta: VideoLike) -> list[float]:
        """Seconds the prompt gives each temporal patch: the mean of its first and last frame (last frame repeated)."""
        indices, fps = video_fields(meta)
        padded = list(indices)
        k = self.temporal_patch_size
        if len(padded) % k:
            padded += [padded[-1]] * (k - len(padded) % k)
        seconds = [i / fps for i in padded]
        return [(seconds[i] + seconds[i + k - 1]) / 2 for i in range(0, len(seconds), k)]

    def video_prompt(self, meta: VideoLike, height: int, width: int) -> str:
        indices, _ = video_fields(meta)
        _t, gh, gw = self.video_grid(len(indices), height, width)
        per_frame = self.video_token * (gh * gw // self.merge_size**2)
        return "".join(f"<{s:.1f} seconds><|vision_start|>{per_frame}<|vision_end|>" for s in self.frame_seconds(meta))

    def video_timing(self, meta: VideoLike) -> dict[str, list[float]]:
        return {"frame_seconds": self.frame_seconds(meta)}
