"""InternVL3 / InternVL3.5 in transformers' format (`internvl`, e.g. OpenGVLab/InternVL3_5-8B-HF): fixed square tiles.

Frames (transformers `InternVLVideoProcessor.sample_frames`): `n` frames, one per equal segment of the video, frame
`int(f32(s/2 + i*s))` with `s = total / n` (`torch.arange(s/2, total, s).int()` in float32). `n` is `nframes`
(InternVL's recipes: 8 to 32 segments), or `int(total / fps * target_fps)` in fps mode, bounded by
`min_frames` / `max_frames`. Every frame is resized to a `size_factor x size_factor` square (the vision tower's
`image_size`, 448 for InternVL3.5; the aspect ratio is not kept, as in the processor).

Images are tiled by the processor (`crop_to_patches`: the grid of `size_factor` tiles whose aspect ratio is closest
to the image's, between `min_pixels` and `max_pixels` worth of tiles, plus a thumbnail when there is more than one
tile), so the cache keeps an image at its own size, only shrunk (aspect kept) to at most `max_pixels`.

Prompt: each tile or frame is `<img>` + `(size/14)**2 / 4` `<IMG_CONTEXT>` + `</img>`; a video is
`Frame1: <img>...</img>\\nFrame2: ...` in place of the template's `<video>`. The model gets no timestamps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evr1_cache.families.base import ModelFamily, VideoLike, hf_metadata, video_fields
from evr1_cache.families.registry import register
from evr1_cache.spec import ImageSpec, SamplingSpec, check_positive_float, f32

#: InternVL3.5's tile (`image_size`): 448 px = 32 x 32 patches of 14, pixel-shuffled 2x2 -> 256 tokens per tile.
TILE = 448
#: The processor's tiling bounds (`min_patches`, `max_patches`) by default.
MIN_TILES = 1
MAX_TILES = 12


def segment_indices(total_num_frames: int, nframes: int) -> tuple[int, ...]:
    """`torch.arange(s / 2, total, s).int()` with `s = total / nframes`, as torch's CPU kernel computes it."""
    if nframes > total_num_frames:
        raise ValueError(
            f"cannot sample {nframes} frames from a video of {total_num_frames} frame(s) (InternVL samples one frame "
            "per segment); lower nframes or drop the video"
        )
    step = total_num_frames / nframes
    start = step / 2
    size = math.ceil((total_num_frames - start) / step)
    return tuple(int(f32(start + step * i)) for i in range(size))


def tile_grid(height: int, width: int, side: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows) of transformers' `get_optimal_tiled_canvas` for a `height` x `width` image, `side` tiles."""
    grids = sorted(
        ((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1) if min_tiles <= c * r <= max_tiles),
        key=lambda g: g[0] * g[1],
    )
    aspect = width / height
    area = width * height
    best_diff, best = float("inf"), (1, 1)
    for grid in grids:
        diff = abs(aspect - grid[0] / grid[1])
        if diff < best_diff:
            best_diff, best = diff, grid
        elif diff == best_diff and area > 0.5 * side * side * grid[0] * grid[1]:
            best = grid
    return best


@dataclass(frozen=True)
class InternVLFamily(ModelFamily):
    @property
    def feature_tokens(self) -> tuple[str, ...]:
        """Only the image placeholder: every frame is an `<img>` tile of `<IMG_CONTEXT>` placeholders."""
        return (self.image_token,)

    def check_size_factor(self, owner: str, value: object) -> int:
        if value is None:
            return TILE
        if isinstance(value, bool) or not isinstance(value, int) or value < 28 or value % 28:
            raise ValueError(
                f"{owner}.size_factor={value!r}: for InternVL it is the tile side (the vision tower's image_size, "
                f"{TILE} for InternVL3.5), a multiple of 28 (patch 14 x pixel-shuffle 2)"
            )
        return value

    def default_pixels(self, kind: str, factor: int) -> tuple[int, int]:
        return MIN_TILES * factor * factor, MAX_TILES * factor * factor

    def check_spec(self, spec: SamplingSpec | ImageSpec) -> None:
        """Frames are tile squares: the video pixel budget is not read, so it is filed at fixed values (a cache built
        with other unused values keeps the same key); the frame bounds only matter in fps mode."""
        if isinstance(spec, SamplingSpec):
            assert spec.size_factor is not None
            lo, hi = self.default_pixels("video", spec.size_factor)
            for name, value in {"min_pixels": lo, "max_pixels": hi, "total_pixels": None}.items():
                object.__setattr__(spec, name, value)
            if spec.nframes is not None:
                object.__setattr__(spec, "min_frames", 4)
                object.__setattr__(spec, "max_frames", 768)

    def tokens_per_tile(self, side: int) -> int:
        return (side // self.patch_size) ** 2 // self.merge_size**2

    def sample_frame_indices(self, total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]:
        if spec.nframes is not None:
            n = spec.nframes
        else:
            assert spec.fps is not None
            check_positive_float("sample_frame_indices", "native_fps", native_fps)  # as the Qwen rule checks it
            n = min(max(int(total_num_frames / native_fps * spec.fps), spec.min_frames), spec.max_frames)
            n = min(n, total_num_frames)
        return segment_indices(total_num_frames, n)

    def resized_hw(self, height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]:
        assert spec.size_factor is not None
        return spec.size_factor, spec.size_factor

    def resized_image_hw(self, height: int, width: int, spec: ImageSpec) -> tuple[int, int]:
        """The image's own size, shrunk (aspect kept) to at most `max_pixels`: the processor does the tiling."""
        assert spec.max_pixels is not None
        if height < 1 or width < 1:
            raise ValueError(f"a {width}x{height} image has no pixels")
        if height * width <= spec.max_pixels:
            return height, width
        scale = math.sqrt(spec.max_pixels / (height * width))
        return max(1, math.floor(height * scale)), max(1, math.floor(width * scale))

    def tile_bounds(self, spec: ImageSpec | None) -> tuple[int, int, int]:
        """(tile side, min tiles, max tiles) of an image spec (the processor's `min_patches` / `max_patches`)."""
        if spec is None:
            return TILE, MIN_TILES, MAX_TILES
        assert spec.size_factor is not None
        assert spec.min_pixels is not None
        assert spec.max_pixels is not None
        side = spec.size_factor
        return side, max(1, spec.min_pixels // (side * side)), max(1, spec.max_pixels // (side * side))

    def tiles(self, height: int, width: int, spec: ImageSpec | None = None) -> int:
        """How many tiles the processor cuts the image into (the thumbnail included)."""
        side, lo, hi = self.tile_bounds(spec)
        cols, rows = tile_grid(height, width, side, lo, hi)
        n = cols * rows
        return n + 1 if n > 1 else n

    def _check_square(self, height: int, width: int) -> int:
        if height != width or height % (self.patch_size * self.merge_size):
            raise ValueError(
                f"InternVL video frames are squares of the tile side (a multiple of 28), got {width}x{height}: size "
                "them with resized_hw first"
            )
        return height

    def video_grid(self, nframes: int, height: int, width: int) -> tuple[int, int, int]:
        side = self._check_square(height, width)
        return nframes, side // self.patch_size, side // self.patch_size

    def video_tokens(self, nframes: int, height: int, width: int) -> int:
        return nframes * self.tokens_per_tile(self._check_square(height, width))

    def image_grid(self, height: int, width: int) -> tuple[int, int, int]:
        raise NotImplementedError("InternVL images are tiled, not gridded: use tiles() / image_tokens()")

    def image_tokens(self, height: int, width: int, spec: ImageSpec | None = None) -> int:
        side = self.tile_bounds(spec)[0]
        return self.tiles(height, width, spec) * self.tokens_per_tile(side)

    def image_prompt(self, height: int, width: int, spec: ImageSpec | None = None) -> str:
        return f"<img>{self.image_token * self.image_tokens(height, width, spec)}</img>"

    def video_prompt(self, meta: VideoLike, height: int, width: int) -> str:
        indices, _ = video_fields(meta)
        frame = f"<img>{self.image_token * self.tokens_per_tile(self._check_square(height, width))}</img>"
        return "\n".join(f"Frame{i + 1}: {frame}" for i in range(len(indices)))

    def video_timing(self, meta: VideoLike) -> dict[str, list[float]]:
        return {}  # InternVL's prompt and positions carry frame order only, no time

    def hf_kwargs(
        self, videos: Any = (), image_spec: ImageSpec | None = None, *, images: bool = False
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if videos:
            out["video_metadata"] = [hf_metadata(m) for m in videos]
            out["do_sample_frames"] = False
        if images:
            out.update(self.vllm_processor_kwargs(image_spec))
        return out

    def vllm_processor_kwargs(self, image_spec: ImageSpec | None = None) -> dict[str, Any]:
        """The image spec's tile bounds (without one, the checkpoint's processor config decides); frames are
        resized to the tile square by the processor (a no-op for cached frames), so `do_resize` stays on."""
        if image_spec is None:
            return {}
        _, lo, hi = self.tile_bounds(image_spec)
        return {"crop_to_patches": True, "min_patches": lo, "max_patches": hi}


INTERNVL = register(
    InternVLFamily(
        name="internvl",
        title="InternVL3 / InternVL3.5 (transformers format)",
        model_types=("internvl",),
        checkpoints=("OpenGVLab/InternVL3_5-8B-HF", "OpenGVLab/InternVL3_5-4B-HF", "OpenGVLab/InternVL3-8B-hf"),
        patch_size=14,
        merge_size=2,
        temporal_patch_size=1,
        size_factors=(TILE,),
        frame_rule="transformers InternVLVideoProcessor.sample_frames: one frame per segment (video_processing_internvl.py)",
        size_rule="every frame resized to the tile square; images tiled by GotOcr2ImageProcessor.crop_to_patches",
        reference_resize="torchvision bicubic antialias (transformers InternVLVideoProcessor / GotOcr2ImageProcessor)",
        image_token="<IMG_CONTEXT>",
        video_token="<video>",
        vision_tokens=("<img>", "</img>", "<IMG_CONTEXT>", "<video>"),
        end_of_turn=("<|im_end|>", "<|endoftext|>"),
        vision_keys=("pixel_values",),
        hf_processor="InternVLProcessor",
        vllm_architectures=("InternVLForConditionalGeneration",),
    )
)
