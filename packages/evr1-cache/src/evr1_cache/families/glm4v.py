"""GLM-4.1V and GLM-4.5V (`glm4v`, `glm4v_moe`): GLM's own frame rule, a budget over all frames, per-frame seconds.

Frames (transformers `Glm4vVideoProcessor.sample_frames`, identical in 5.10 and 5.19 for videos of >= 0.5 s): with
`duration = total / fps` (what transformers' own decoders report), a video of at most `max_duration` (300 s) keeps
`floor(duration * target_fps)` frames, frame `i` at `ceil(i * fps / target_fps)`; a longer one keeps
`int(300 * target_fps)` frames at `ceil(t * fps)` for `t = linspace(0, duration, n)`. Repeats are dropped and an odd
count repeats its last frame. There is no fixed-count mode and no min/max frame bound.

Sizes (`glm4v` `smart_resize`): sides are multiples of 28 and the *whole clip* `t x h x w` lies within
[`min_pixels`, `total_pixels`] (GLM's `shortest_edge` / `longest_edge`); `max_pixels` is not used for video.
Images go through the same rule with `t = 2` (one temporal patch).

Prompt: each temporal patch is `<|begin_of_image|>` + one `<|image|>` per merged patch + `<|end_of_image|>` + the
integer second of its first frame, inside the template's `<|begin_of_video|><|video|><|end_of_video|>`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evr1_cache.families.base import ModelFamily, VideoLike, video_fields
from evr1_cache.families.registry import register
from evr1_cache.spec import ImageSpec, SamplingSpec, check_positive_float

#: `Glm4vVideoProcessor.max_duration`: longer videos are sampled at a fixed count spread over the whole duration.
MAX_DURATION = 300
#: transformers' GLM-4.1V defaults: video `size` = {shortest_edge: 112*112, longest_edge: 28*28*2*30000} (t*h*w),
#: image `size` = {shortest_edge: 112*112, longest_edge: 28*28*15000} (compared with 2*h*w).
VIDEO_MIN_PIXELS = 112 * 112
VIDEO_MAX_PIXELS = 28 * 28 * 2 * 30000
IMAGE_MIN_PIXELS = 112 * 112
IMAGE_MAX_PIXELS = 28 * 28 * 15000
MAX_ASPECT_RATIO = 200


def _linspace(start: float, stop: float, num: int) -> list[float]:
    """`numpy.linspace(start, stop, num)` in the same float64 operations (i * step + start, last = stop)."""
    if num == 1:
        return [float(start)]
    step = (stop - start) / (num - 1)
    values = [i * step + start for i in range(num)]
    values[-1] = float(stop)
    return values


def glm_smart_resize(
    nframes: int, height: int, width: int, factor: int, min_pixels: float, max_pixels: float
) -> tuple[int, int]:
    """transformers' glm4v `smart_resize`, operation for operation (the budget bounds t x h x w)."""
    if nframes < 2:
        raise ValueError(f"GLM-4.1V needs at least 2 frames per video (one temporal patch), got {nframes}")
    h, w = height, width
    if h < factor or w < factor:
        scale = max(factor / h, factor / w)
        h, w = int(h * scale), int(w * scale)
    if max(h, w) / min(h, w) > MAX_ASPECT_RATIO:
        raise ValueError(
            f"a {width}x{height} frame has aspect ratio > {MAX_ASPECT_RATIO}, which GLM-4.1V refuses; crop or pad it"
        )
    h_bar = round(h / factor) * factor
    w_bar = round(w / factor) * factor
    t_bar = round(nframes / 2) * 2
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((nframes * h * w) / max_pixels)
        h_bar = max(factor, math.floor(h / beta / factor) * factor)
        w_bar = max(factor, math.floor(w / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (nframes * h * w))
        h_bar = math.ceil(h * beta / factor) * factor
        w_bar = math.ceil(w * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True)
class Glm4vFamily(ModelFamily):
    max_duration: int = MAX_DURATION

    @property
    def feature_tokens(self) -> tuple[str, ...]:
        """Only the image placeholder: a video is frame groups of `<|image|>` placeholders."""
        return (self.image_token,)

    def default_pixels(self, kind: str, factor: int) -> tuple[int, int]:
        if kind == "video":
            return VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS
        return IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS

    def check_spec(self, spec: SamplingSpec | ImageSpec) -> None:
        """No fixed frame count; the settings GLM's rule does not read are filed at fixed values, so a cache built
        with other unused values (e.g. a trainer default max_pixels) keeps the same key."""
        if isinstance(spec, SamplingSpec):
            if spec.nframes is not None:
                raise ValueError(
                    f"SamplingSpec(family='glm4v'): GLM-4.1V samples by fps only (its processor has no fixed frame "
                    f"count); drop nframes={spec.nframes} and set fps"
                )
            unused = {"min_frames": 4, "max_frames": 768, "max_pixels": VIDEO_MAX_PIXELS}
            for name, value in unused.items():
                object.__setattr__(spec, name, value)

    def sample_frame_indices(self, total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]:
        assert spec.fps is not None  # check_spec refuses nframes
        check_positive_float("sample_frame_indices", "native_fps", native_fps)  # as the Qwen rule checks it
        total = total_num_frames
        last = total - 1
        duration = total / native_fps
        if duration <= self.max_duration:
            n = max(math.floor(duration * spec.fps), 1)
            indices = [min(last, math.ceil(i * native_fps / spec.fps)) for i in range(n)]
        else:
            n = int(self.max_duration * spec.fps)
            if n >= total:
                indices = list(range(total))
            else:
                indices = [min(last, math.ceil(t * native_fps)) for t in _linspace(0, duration, n)]
        uniq = list(dict.fromkeys(indices))
        if len(uniq) % 2:
            uniq.append(uniq[-1])
        return tuple(uniq)

    def resized_hw(self, height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]:
        assert spec.size_factor is not None
        assert spec.min_pixels is not None
        budget = spec.total_pixels if spec.total_pixels is not None else VIDEO_MAX_PIXELS
        return glm_smart_resize(nframes, height, width, spec.size_factor, spec.min_pixels, budget)

    def resized_image_hw(self, height: int, width: int, spec: ImageSpec) -> tuple[int, int]:
        assert spec.size_factor is not None
        assert spec.min_pixels is not None
        assert spec.max_pixels is not None
        return glm_smart_resize(2, height, width, spec.size_factor, spec.min_pixels, spec.max_pixels)

    def frame_seconds(self, meta: VideoLike) -> list[int]:
        """The integer second written after each temporal patch: `int(index / fps)` of its first frame."""
        indices, fps = video_fields(meta)  # one second per temporal patch, a short last patch included
        return [int(i / fps) for i in indices][:: self.temporal_patch_size]

    def video_prompt(self, meta: VideoLike, height: int, width: int) -> str:
        indices, _ = video_fields(meta)
        _, gh, gw = self.video_grid(len(indices), height, width)
        per_frame = self.image_token * (gh * gw // self.merge_size**2)
        return "".join(f"<|begin_of_image|>{per_frame}<|end_of_image|>{s}" for s in self.frame_seconds(meta))

    def video_timing(self, meta: VideoLike) -> dict[str, list[float]]:
        return {"frame_seconds": [float(s) for s in self.frame_seconds(meta)]}


GLM4V = register(
    Glm4vFamily(
        name="glm4v",
        title="GLM-4.1V / GLM-4.5V",
        model_types=("glm4v", "glm4v_moe"),
        checkpoints=("zai-org/GLM-4.1V-9B-Thinking", "zai-org/GLM-4.1V-9B-Base", "zai-org/GLM-4.5V"),
        patch_size=14,
        merge_size=2,
        temporal_patch_size=2,
        size_factors=(28,),
        frame_rule="transformers Glm4vVideoProcessor.sample_frames (video_processing_glm4v.py, 5.10-5.19)",
        size_rule="transformers glm4v smart_resize over t x h x w (video_processing_glm4v.py)",
        reference_resize="torchvision bicubic antialias (transformers Glm4vVideoProcessor / Glm4vImageProcessor)",
        image_token="<|image|>",
        video_token="<|video|>",
        vision_tokens=(
            "<|begin_of_image|>",
            "<|end_of_image|>",
            "<|begin_of_video|>",
            "<|end_of_video|>",
            "<|image|>",
            "<|video|>",
        ),
        end_of_turn=("<|user|>", "<|observation|>", "<|endoftext|>"),
        vision_keys=("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw"),
        hf_processor="Glm4vProcessor",
        vllm_architectures=("Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration"),
    )
)
