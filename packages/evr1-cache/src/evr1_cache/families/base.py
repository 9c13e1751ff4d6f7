"""`ModelFamily`: everything about a model family's visual input that differs between families, in one frozen record.

Why one record per family: the frame cache, the eval backends, the verl dataset and the local engine all need the
same answers — which frames, at which size, how many vision tokens, what the processor and vLLM must be told so they
do not re-sample or re-size, which tokens end an assistant turn. Asking the family instead of branching on model
names keeps those answers identical everywhere, and adding a family is one module (see `qwen2_5_vl.py`).

Standard library only, like `evr1_cache.spec`: a token planner or a data tool can compute exact vision-token counts
and prompt expansions without numpy, torch or transformers. Families hand engines plain data (dicts, tuples).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evr1_cache.spec import HF_FIELDS, ImageSpec, SamplingSpec, check_int

__all__ = ["ModelFamily", "VideoLike", "video_fields"]

#: Anything carrying a video's sampled-frame timing: a `VideoMeta`, its `to_hf()` dict or transformers' VideoMetadata.
VideoLike = Any


def video_fields(meta: VideoLike) -> tuple[tuple[int, ...], float]:
    """(frames_indices, native fps) of a `VideoMeta`, a metadata mapping or an object with those attributes."""
    if isinstance(meta, Mapping):
        indices, fps = meta.get("frames_indices"), meta.get("fps")
    else:
        indices, fps = getattr(meta, "frames_indices", None), getattr(meta, "fps", None)
    if indices is None or fps is None:
        raise ValueError(
            "video metadata needs frames_indices and fps (pass VideoMeta.to_hf() from evr1-cache); "
            f"got {sorted(meta) if isinstance(meta, Mapping) else type(meta).__name__}"
        )
    if hasattr(indices, "tolist"):
        indices = indices.tolist()
    return tuple(int(i) for i in indices), float(fps)


@dataclass(frozen=True)
class ModelFamily:
    """One model family's visual-input contract. Subclasses override the rules; instances are registered by name.

    Fields describe the family; methods are the rules every component asks:

    - frames: `sample_frame_indices` (which source frames), `resized_hw` / `resized_image_hw` (their size);
    - tokens: `video_grid` / `image_grid`, `video_tokens` / `image_tokens` (placeholder counts),
      `video_prompt` / `image_prompt` (the exact text the processor substitutes for one placeholder);
    - engines: `hf_kwargs` (processor call keywords: no re-sampling, no re-sizing), `vllm_video` (vLLM's video item),
      `video_timing` (the temporal metadata the model sees, for parity checks).
    """

    name: str
    title: str
    #: transformers `config.model_type` values served by this family.
    model_types: tuple[str, ...]
    #: Hugging Face checkpoints people train (for docs and presets; nothing is downloaded).
    checkpoints: tuple[str, ...]
    patch_size: int
    merge_size: int
    temporal_patch_size: int
    #: accepted `size_factor` values, the default first.
    size_factors: tuple[int, ...]
    #: the frame-selection rule and the reference it reproduces (file of the package, version).
    frame_rule: str
    #: the frame-size rule and its reference.
    size_rule: str
    #: the pixel resampler whose output the cache must match: "<library> <filter>" of the family's reference path.
    reference_resize: str
    #: the token the chat template writes for an image / a video, replaced by the processor's expansion.
    image_token: str
    video_token: str
    #: every special token of the family's vision spans: a sampled response must never contain one.
    vision_tokens: tuple[str, ...]
    #: tokens that end an assistant turn (EOS candidates for rollouts, stop tokens for rewards).
    end_of_turn: tuple[str, ...]
    #: the processor outputs that are per-image / per-video tensors (collated along dim 0).
    vision_keys: tuple[str, ...]
    #: transformers processor class and vLLM architectures that implement the family.
    hf_processor: str
    vllm_architectures: tuple[str, ...]
    #: True when the family's frames and sizes are the spec's own qwen-vl-utils rule: a spec naming the family is then
    #: stored without the name (same key as the family-less spec with the family's size factor, so caches are shared).
    spec_rule: bool = False

    # -- settings ------------------------------------------------------------------------------------------------
    @property
    def size_factor(self) -> int:
        """The default size factor (sides are multiples of it)."""
        return self.size_factors[0]

    @property
    def feature_tokens(self) -> tuple[str, ...]:
        """The placeholder tokens whose positions the vision features fill (images and videos). Families whose
        video expansion is built from image placeholders (GLM-4.1V, InternVL) override it."""
        return (self.image_token, self.video_token)

    def check_size_factor(self, owner: str, value: object) -> int:
        """The spec's `size_factor`, validated for this family (None = the family's default)."""
        if value is None:
            return self.size_factor
        factor = check_int(owner, "size_factor", value, 1)
        if factor not in self.size_factors:
            allowed = " or ".join(str(f) for f in self.size_factors)
            raise ValueError(
                f"{owner}.size_factor={factor} does not fit family {self.name!r} ({self.title}): use {allowed} "
                f"(patch {self.patch_size} x merge {self.merge_size}), or leave it unset"
            )
        return factor

    def default_pixels(self, kind: str, factor: int) -> tuple[int, int]:
        """(min_pixels, max_pixels) a spec of `kind` ("video" or "image") gets when they are left unset."""
        if kind == "video":
            return 128 * factor * factor, 768 * factor * factor
        return 4 * factor * factor, 16384 * factor * factor

    def check_spec(self, spec: SamplingSpec | ImageSpec) -> None:
        """Refuse settings this family's rule cannot honour (called by the spec's own validation)."""

    def check_fits(self, spec: SamplingSpec | ImageSpec, where: str = "the spec") -> None:
        """Refuse a spec made for another family: frames cached for Qwen2.5-VL (28 px) fed to Qwen3-VL (32 px), or
        Qwen-sampled frames fed to GLM-4.1V, would be silently re-sized or mis-timed by the processor."""
        want = None if self.spec_rule else self.name
        factor_ok = spec.size_factor in self.size_factors or not self.spec_rule
        if spec.family != want or not factor_ok:
            fix = (
                f"size_factor={self.size_factor} and no family"
                if self.spec_rule
                else f"family={self.name!r} (its own frame rule and budget)"
            )
            raise ValueError(
                f"{where} (family={spec.family!r}, size_factor={spec.size_factor}) does not fit the model's family "
                f"{self.name!r} ({self.title}): set {fix}, and build the cache with the same settings"
            )

    def video_spec(self, **settings: Any) -> SamplingSpec:
        """A `SamplingSpec` for this family; unset settings take the family's defaults."""
        if settings.get("nframes") is not None and "fps" not in settings:
            settings["fps"] = None
        return SamplingSpec(family=self.name, **settings)

    def image_spec(self, **settings: Any) -> ImageSpec:
        """An `ImageSpec` for this family; unset settings take the family's defaults."""
        return ImageSpec(family=self.name, **settings)

    # -- frames --------------------------------------------------------------------------------------------------
    def sample_frame_indices(self, total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]:
        raise NotImplementedError

    def resized_hw(self, height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]:
        raise NotImplementedError

    def resized_image_hw(self, height: int, width: int, spec: ImageSpec) -> tuple[int, int]:
        raise NotImplementedError

    # -- tokens --------------------------------------------------------------------------------------------------
    def _check_hw(self, height: int, width: int, factor: int) -> tuple[int, int]:
        h = check_int("frame", "height", height, 1)
        w = check_int("frame", "width", width, 1)
        if h % factor or w % factor:
            raise ValueError(
                f"a {w}x{h} frame is not a multiple of {self.name}'s size factor {factor}: resize it with "
                f"resized_hw / resized_image_hw first (the processor would re-size it)"
            )
        return h, w

    def video_grid(self, nframes: int, height: int, width: int) -> tuple[int, int, int]:
        """(t, h, w) patch grid of a video of `nframes` frames of `height` x `width` (`video_grid_thw`)."""
        n = check_int("video", "nframes", nframes, 1)
        h, w = self._check_hw(height, width, self.patch_size * self.merge_size)
        t = -(-n // self.temporal_patch_size)  # the processor repeats the last frame to fill a temporal patch
        return t, h // self.patch_size, w // self.patch_size

    def image_grid(self, height: int, width: int) -> tuple[int, int, int]:
        """(1, h, w) patch grid of one image (`image_grid_thw`)."""
        h, w = self._check_hw(height, width, self.patch_size * self.merge_size)
        return 1, h // self.patch_size, w // self.patch_size

    def video_tokens(self, nframes: int, height: int, width: int) -> int:
        """How many `video_token` placeholders one video expands to (the LLM positions its features fill)."""
        t, gh, gw = self.video_grid(nframes, height, width)
        return t * gh * gw // (self.merge_size**2)

    def image_tokens(self, height: int, width: int, spec: ImageSpec | None = None) -> int:
        """How many `image_token` placeholders one image expands to."""
        t, gh, gw = self.image_grid(height, width)
        return t * gh * gw // (self.merge_size**2)

    def video_prompt(self, meta: VideoLike, height: int, width: int) -> str:
        """The exact text the family's processor puts in place of one `video_token` (timestamps included)."""
        indices, _ = video_fields(meta)
        return self.video_token * self.video_tokens(len(indices), height, width)

    def image_prompt(self, height: int, width: int, spec: ImageSpec | None = None) -> str:
        """The exact text the family's processor puts in place of one `image_token`."""
        return self.image_token * self.image_tokens(height, width, spec)

    def expand_prompt(
        self,
        text: str,
        videos: Sequence[tuple[VideoLike, int, int]] = (),
        images: Sequence[tuple[int, int]] = (),
        image_spec: ImageSpec | None = None,
    ) -> str:
        """`text` (a rendered chat template) with every video / image placeholder expanded as the processor does.

        `videos` are `(metadata, height, width)` and `images` `(height, width)` in prompt order, sized by this
        family's rules; tokenizing the result gives the processor's `input_ids` (the planner's exact length).
        """
        pattern = re.compile(f"({re.escape(self.video_token)}|{re.escape(self.image_token)})")
        parts = pattern.split(text)
        vids, imgs = iter(videos), iter(images)
        out: list[str] = []
        for part in parts:
            try:
                if part == self.video_token:
                    meta, h, w = next(vids)
                    out.append(self.video_prompt(meta, h, w))
                    continue
                if part == self.image_token:
                    out.append(self.image_prompt(*next(imgs), image_spec))
                    continue
            except StopIteration:
                raise ValueError(
                    f"the prompt has more {part!r} placeholders than the {len(videos)} video(s) and {len(images)} "
                    "image(s) given"
                ) from None
            out.append(part)
        left = sum(1 for _ in vids) + sum(1 for _ in imgs)
        if left:
            raise ValueError(f"{left} video(s)/image(s) were given but the prompt has no placeholder for them")
        return "".join(out)

    def video_timing(self, meta: VideoLike) -> dict[str, list[float]]:
        """The temporal metadata the model is given per temporal patch (compared across engines by `parity`)."""
        indices, fps = video_fields(meta)
        return {"timestamps": [i / fps for i in indices]}

    # -- engines -------------------------------------------------------------------------------------------------
    def hf_kwargs(
        self, videos: Sequence[VideoLike] = (), image_spec: ImageSpec | None = None, *, images: bool = False
    ) -> dict[str, Any]:
        """Keyword arguments for the transformers processor call next to `text`, `images` and `videos`.

        Frames and images come from evr1-cache already sampled and sized by this family's rule, so the processor
        must neither re-sample (`do_sample_frames=False` + the videos' metadata) nor re-size them.
        """
        out: dict[str, Any] = {}
        if videos:
            out["video_metadata"] = [hf_metadata(m) for m in videos]
            out["do_sample_frames"] = False
        if videos or images:
            out["do_resize"] = False  # cached sizes are multiples of the factor within the budget: nothing to do
        return out

    def vllm_video(self, frames: Any, meta: VideoLike) -> tuple[Any, dict[str, Any]]:
        """vLLM's video item: `(frames, metadata)` with re-sampling switched off."""
        return frames, {**hf_metadata(meta), "do_sample_frames": False}

    def vllm_processor_kwargs(self, image_spec: ImageSpec | None = None) -> dict[str, Any]:
        """Per-request `mm_processor_kwargs` for vLLM: the settings `hf_kwargs` passes, minus the videos' metadata
        (vLLM reads that from each `(frames, metadata)` video item)."""
        return {"do_resize": False}


def hf_metadata(meta: VideoLike) -> dict[str, Any]:
    """transformers' `VideoMetadata(**d)` kwargs from a `VideoMeta` or its dict (unknown keys dropped)."""
    if hasattr(meta, "to_hf"):
        meta = meta.to_hf()
    if not isinstance(meta, Mapping):
        meta = {k: getattr(meta, k) for k in HF_FIELDS if getattr(meta, k, None) is not None}
    out = {k: meta[k] for k in HF_FIELDS if meta.get(k) is not None}
    if "frames_indices" in out:
        indices = out["frames_indices"]
        out["frames_indices"] = [int(i) for i in (indices.tolist() if hasattr(indices, "tolist") else indices)]
    return out
