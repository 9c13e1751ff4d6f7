"""The frame-sampling and metadata spec: the one contract between cache writers and every reader. Stdlib only.

Training, evaluation and Qwen's own recipes must see the same frames, timestamps and pixel budgets, so the arithmetic
here reproduces qwen-vl-utils 0.0.14 exactly (`smart_nframes`, the `torch.linspace(...).round()` frame indices,
`fetch_video`'s video pixel budget and `smart_resize`); see docs/spec.md for every rounding rule. Where that library
raises (or would hand back an unusable zero-sized frame), these functions raise `ValueError` saying what to change.
Each spec also names the *resize rule* its pixels follow (`ResizeRule`, a small registry: which reference
implementation cached pixels equal bit for bit); the pixel code itself lives in `evr1_cache.resampling`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, TypeVar

from evr1_cache.registry import check_fields, register_unique, unknown_name

__all__ = [
    "FRAME_FACTOR",
    "IMAGE_RESIZE",
    "RESIZE_RULES",
    "SIZE_FACTORS",
    "SPEC_VERSION",
    "TIMELINES",
    "VIDEO_RESIZE",
    "FamilyRules",
    "ImageSpec",
    "ResizeRule",
    "SamplingSpec",
    "VideoMeta",
    "check_int",
    "check_positive_float",
    "get_resize_rule",
    "install_family_lookup",
    "qwen_frame_indices",
    "qwen_resized_hw",
    "qwen_resized_image_hw",
    "register_resize_rule",
    "resized_hw",
    "resized_image_hw",
    "sample_frame_indices",
]

#: Bumped whenever any rule below changes what a reader would see; part of every `key()` and of every `VideoMeta`.
#: 2: video pixels equal qwen-vl-utils' torchvision resize bit for bit (1 resized them with Pillow's 8-bit bicubic).
#: 3: frame i is the i-th frame on variable-rate streams too, fps = frames / duration as torchcodec measures it (2 took
#: the frame shown at the instant i / fps there, other frames than fetch_video's).
SPEC_VERSION: Final = 3
#: Sampled frame counts are multiples of this (two frames form one temporal patch).
FRAME_FACTOR: Final = 2
#: Resized sides are multiples of this: patch 14 x merge 2 (Qwen2/2.5-VL) or patch 16 x merge 2 (Qwen3-VL).
SIZE_FACTORS: Final = (28, 32)
#: Longest/shortest side above this is refused (qwen-vl-utils' MAX_RATIO).
MAX_ASPECT_RATIO: Final = 200
#: qwen-vl-utils' per-frame video budget in tokens (x size_factor**2 pixels).
VIDEO_MIN_TOKENS: Final = 128
VIDEO_MAX_TOKENS: Final = 768
#: qwen-vl-utils' image budget in tokens (x size_factor**2 pixels).
IMAGE_MIN_TOKENS: Final = 4
IMAGE_MAX_TOKENS: Final = 16384
#: qwen-vl-utils' default MODEL_SEQ_LEN: without `total_pixels`, a video may use 90% of it (its env override is ignored).
DEFAULT_MODEL_SEQ_LEN: Final = 128000
#: Frame indices go through float32 in the reference; beyond 2**24 float32 cannot name every frame.
MAX_TOTAL_FRAMES: Final = 2**24
#: Which frame a sampled instant i / fps holds (docs/spec.md "Timelines"). "reference": the i-th frame, as
#: qwen-vl-utils' `fetch_video` (torchcodec) takes it; on a variable-rate stream it is not always the frame shown at
#: i / fps. "presentation": the frame shown at i / fps (the last one whose presentation time is <= it), so every label
#: is a true instant: for data whose answers are in real seconds (temporal grounding). Equal on constant-rate video.
TIMELINES: Final = ("reference", "presentation")


# -- validation helpers ---------------------------------------------------------------------------------------------


def check_int(owner: str, name: str, value: object, minimum: int) -> int:
    """An int field (integral floats from YAML/JSON accepted) that is at least `minimum`; the spec's, the families' and
    the tools' settings share it, so one wording names the bad value everywhere."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{owner}.{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{owner}.{name} must be >= {minimum}, got {value}")
    return value


def check_positive_float(owner: str, name: str, value: object) -> float:
    """A finite number > 0 (fps and the like), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{owner}.{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}.{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass in __post_init__


# -- resize rules -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResizeRule:
    """A named, versioned pixel-resize rule: the reference implementation whose output cached pixels equal bit for bit.

    `name` is what a spec stores; `version` is bumped whenever the implementation's output changes (it is part of the
    spec key, so entries built by an older implementation are rebuilt, never served as exact). `reference` says
    which upstream code, at which version, the rule reproduces; `kernel` the filter in words. Implementations are
    registered under the same name in `evr1_cache.resampling` (numpy; this module stays standard-library only).
    """

    name: str
    version: int
    kernel: str
    reference: str

    def __post_init__(self) -> None:
        if not self.name or not all(ch.isalnum() or ch in "-_." for ch in self.name):
            raise ValueError(f"ResizeRule.name must be a slug (letters, digits, '-', '_', '.'), got {self.name!r}")
        _set(self, "version", check_int("ResizeRule", "version", self.version, 1))

    @property
    def id(self) -> str:
        """`name/version`: what identifies the pixels (stored beside each cache entry)."""
        return f"{self.name}/{self.version}"


#: Every known rule by name; `register_resize_rule` adds one (model families bring their own reference resize).
RESIZE_RULES: dict[str, ResizeRule] = {}


def register_resize_rule(rule: ResizeRule) -> ResizeRule:
    """Add `rule` to `RESIZE_RULES`; a second rule under a taken name is refused (bump `version` instead)."""
    return register_unique(RESIZE_RULES, rule.name, rule, "resize rule")


def get_resize_rule(name: object) -> ResizeRule:
    """The registered rule `name`; an unknown name (or not a string) is a ValueError naming the closest known ones."""
    rule = RESIZE_RULES.get(name) if isinstance(name, str) else None
    if rule is None:
        raise ValueError(unknown_name("resize rule", name, RESIZE_RULES))
    return rule


_BICUBIC = "Keys cubic a = -0.5, antialiased (support 2 x scale when shrinking), separable, weights normalised"
#: Qwen-VL's video resize: qwen-vl-utils 0.0.14 `fetch_video` -> torchvision 0.28 `resize(uint8 tensor, BICUBIC,
#: antialias=True)` -> torch 2.13's float32 CPU kernel as built for x86-64 AVX2 / AVX-512 (fused multiply-adds).
VIDEO_RESIZE: Final = register_resize_rule(
    ResizeRule(
        "torchvision-bicubic-aa",
        1,
        _BICUBIC + "; float32, horizontal then vertical pass, one clamp + round-half-even at the end",
        "qwen-vl-utils 0.0.14 fetch_video: torchvision 0.28 transforms.functional.resize (uint8 -> float32) on torch "
        "2.13 aten/src/ATen/native/cpu/UpSampleKernel.cpp, x86-64 AVX2/AVX-512 kernel",
    )
)
#: The same resize as torch's portable CPU kernel computes it (CPUs without AVX2, or ATEN_CPU_CAPABILITY=default).
VIDEO_RESIZE_NOFMA: Final = register_resize_rule(
    ResizeRule(
        "torchvision-bicubic-aa-nofma",
        1,
        _BICUBIC + "; float32 without fused multiply-adds, horizontal then vertical, one clamp + round at the end",
        "as torchvision-bicubic-aa, torch's DEFAULT (non-AVX2) CPU capability kernel",
    )
)
#: Qwen-VL's image resize: qwen-vl-utils 0.0.14 `fetch_image` -> Pillow `Image.resize(size)` (BICUBIC, 8-bit passes).
IMAGE_RESIZE: Final = register_resize_rule(
    ResizeRule(
        "pillow-bicubic",
        1,
        _BICUBIC + "; Pillow's 8-bit fixed-point passes, each rounded and clipped to uint8",
        "qwen-vl-utils 0.0.14 fetch_image: PIL.Image.resize((w, h)) with Pillow's default BICUBIC (Pillow >= 10)",
    )
)


# -- settings ---------------------------------------------------------------------------------------------------------


_S = TypeVar("_S", bound="_Settings")


class _Settings:
    """What both specs share: canonical dict, strict inverse and a stable key (`kind` keeps the two apart)."""

    _kind: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # (every subclass is a dataclass)

    def to_dict(self) -> dict[str, Any]:
        """The canonical settings (defaults resolved), as stored next to a cache."""
        result = dataclasses.asdict(self)
        if result.get("family") is None:  # specs without a model family keep the keys they always had
            result.pop("family", None)
        if result.get("timeline") == TIMELINES[0]:  # ... and so do specs on the reference timeline
            result.pop("timeline")
        return result

    @classmethod
    def from_dict(cls: type[_S], data: Mapping[str, Any]) -> _S:
        """Inverse of `to_dict`; unknown keys are an error naming the closest known one."""
        check_fields(cls.__name__, data, cls)
        return cls(**data)

    def key(self) -> str:
        """16 hex chars of sha256 over the canonical JSON of the settings, SPEC_VERSION and the resize rule's version:
        the cache folder name."""
        settings = self.to_dict()
        rule = get_resize_rule(settings["resize"])
        payload = {"kind": self._kind, "spec_version": SPEC_VERSION, **settings, "resize": rule.id}
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _pixel_budget(spec: Any, owner: str, min_tokens: int, max_tokens: int, kind: str) -> None:
    """Resolve `size_factor` and the per-frame pixel bounds (defaults: token counts x factor**2) in place."""
    family = spec.family
    if family is not None and not isinstance(family, str):
        raise ValueError(f"{owner}.family must be a model-family name (evr1_cache.families), got {family!r}")
    if family is not None:  # the family's own factors (e.g. InternVL's tile side) and default budget
        factor = _family(family).check_size_factor(owner, spec.size_factor)
        lo, hi = _family(family).default_pixels(kind, factor)
    else:
        factor = check_int(owner, "size_factor", 28 if spec.size_factor is None else spec.size_factor, 1)
        if factor not in SIZE_FACTORS:
            raise ValueError(
                f"{owner}.size_factor must be 28 (Qwen2/2.5-VL: patch 14 x merge 2) or 32 (Qwen3-VL: patch 16 x merge "
                f"2), got {factor} (pass patch size x 2, not the patch size)"
            )
        lo, hi = min_tokens * factor * factor, max_tokens * factor * factor
    _set(spec, "size_factor", factor)
    if family is not None and _family(family).spec_rule:  # a Qwen family: the spec's own rule, filed without a name
        _set(spec, "family", None)
    min_pixels = check_int(owner, "min_pixels", lo if spec.min_pixels is None else spec.min_pixels, 1)
    max_pixels = check_int(owner, "max_pixels", hi if spec.max_pixels is None else spec.max_pixels, 1)
    if max_pixels < min_pixels:
        raise ValueError(f"{owner}: max_pixels ({max_pixels}) must be >= min_pixels ({min_pixels})")
    _set(spec, "min_pixels", min_pixels)
    _set(spec, "max_pixels", max_pixels)


@dataclass(frozen=True)
class SamplingSpec(_Settings):
    """How frames are chosen and sized for one video: Qwen's `fps`/`nframes` + pixel-budget settings, frozen.

    Exactly one of `fps` (target frames per second, bounded by `min_frames`/`max_frames`) and `nframes` (a fixed
    count) is used; with neither, `fps=2.0`. `min_pixels`/`max_pixels` bound each frame (defaults: 128 and 768 tokens
    of `size_factor`**2 pixels); `total_pixels` bounds all frames together (None = qwen-vl-utils' default budget).
    `resize` names the `ResizeRule` the frames are resized with (default: Qwen's, torchvision's antialiased bicubic).
    `timeline` says which frame the instant i / fps holds on a variable-rate stream (`TIMELINES`; part of the key).
    """

    fps: float | None = None
    nframes: int | None = None
    min_frames: int = 4
    max_frames: int = 768
    min_pixels: int | None = None
    max_pixels: int | None = None
    total_pixels: int | None = None
    size_factor: int | None = None  # resolved: the family's factor, else 28
    #: A model family of `evr1_cache.families` whose own frame rule and sizes apply (None: qwen-vl-utils' rule).
    family: str | None = None
    resize: str = VIDEO_RESIZE.name
    timeline: str = TIMELINES[0]
    _kind: ClassVar[str] = "video"

    def __post_init__(self) -> None:
        owner = "SamplingSpec"
        if self.fps is not None and self.nframes is not None:
            raise ValueError(
                f"{owner}: set either fps or nframes, not both (got fps={self.fps}, nframes={self.nframes}); "
                "pass fps=None to sample a fixed number of frames"
            )
        if self.nframes is not None:
            _set(self, "nframes", check_int(owner, "nframes", self.nframes, FRAME_FACTOR))
        else:
            _set(self, "fps", check_positive_float(owner, "fps", 2.0 if self.fps is None else self.fps))
        min_frames = check_int(owner, "min_frames", self.min_frames, 1)
        max_frames = check_int(owner, "max_frames", self.max_frames, FRAME_FACTOR)
        if max_frames < min_frames:
            raise ValueError(f"{owner}: max_frames ({max_frames}) must be >= min_frames ({min_frames})")
        _set(self, "min_frames", min_frames)
        _set(self, "max_frames", max_frames)
        _pixel_budget(self, owner, VIDEO_MIN_TOKENS, VIDEO_MAX_TOKENS, "video")
        if self.total_pixels is not None:
            _set(self, "total_pixels", check_int(owner, "total_pixels", self.total_pixels, 1))
        if self.family is not None:  # settings the family's own rule cannot honour are refused here, by name
            _family(self.family).check_spec(self)
        get_resize_rule(self.resize)
        if self.timeline not in TIMELINES:
            raise ValueError(f"{owner}.timeline: " + unknown_name("timeline", self.timeline, TIMELINES))


@dataclass(frozen=True)
class ImageSpec(_Settings):
    """Pixel budget for still images, independent of the video budget (qwen-vl-utils' `fetch_image` defaults);
    `resize` names the `ResizeRule` (default: Pillow's bicubic, as `fetch_image`)."""

    min_pixels: int | None = None
    max_pixels: int | None = None
    size_factor: int | None = None  # resolved: the family's factor, else 28
    #: A model family of `evr1_cache.families` whose own image rule applies (None: qwen-vl-utils' `fetch_image`).
    family: str | None = None
    resize: str = IMAGE_RESIZE.name
    _kind: ClassVar[str] = "image"

    def __post_init__(self) -> None:
        _pixel_budget(self, "ImageSpec", IMAGE_MIN_TOKENS, IMAGE_MAX_TOKENS, "image")
        if self.family is not None:
            _family(self.family).check_spec(self)
        get_resize_rule(self.resize)


# -- frame selection ----------------------------------------------------------------------------------------------------


def _frame_count(total_num_frames: int, native_fps: float, spec: SamplingSpec) -> int:
    """qwen-vl-utils' `smart_nframes`, operation for operation (the float arithmetic is part of the contract)."""
    if spec.nframes is not None:
        nframes = round(spec.nframes / FRAME_FACTOR) * FRAME_FACTOR  # Python round: half to even (3 -> 4, 5 -> 4)
    else:
        assert spec.fps is not None  # SamplingSpec guarantees one mode
        fps = check_positive_float("sample_frame_indices", "native_fps", native_fps)
        min_frames = math.ceil(spec.min_frames / FRAME_FACTOR) * FRAME_FACTOR
        max_frames = math.floor(spec.max_frames / FRAME_FACTOR) * FRAME_FACTOR
        wanted = total_num_frames / fps * spec.fps
        bounded = min(min(max(wanted, min_frames), max_frames), total_num_frames)
        nframes = math.floor(bounded / FRAME_FACTOR) * FRAME_FACTOR
    if not FRAME_FACTOR <= nframes <= total_num_frames:
        raise ValueError(
            f"cannot sample {nframes} frame(s) from a video of {total_num_frames} frame(s): the count must lie in "
            f"[{FRAME_FACTOR}, {total_num_frames}] (use a longer video, or lower nframes/min_frames)"
        )
    return nframes


def f32(value: float) -> float:
    """Round a double to the nearest float32 (ties to even), as a C float cast does."""
    rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    return rounded


def _linspace_round(last: int, steps: int) -> tuple[int, ...]:
    """`torch.linspace(0, last, steps).round().long()` exactly as torch's x86 CPU kernels compute it.

    torch works in float32: step = f32(last / (steps - 1)); the first half is f32(step * i) and the second half is
    f32(last - step * (steps - 1 - i)) with one rounding (the AVX2/AVX-512 kernels contract it to a fused multiply-add);
    `round()` is half-to-even. For 1 <= step and last < 2**24 every intermediate below is exact in a double, so each
    `f32` is the single float32 rounding torch performs. Plain rational rounding would differ on long videos.
    """
    step = f32(last / (steps - 1))
    half = steps // 2
    out: list[int] = []
    for i in range(steps):
        value = f32(step * i) if i < half else f32(last - step * (steps - 1 - i))
        out.append(round(value))
    return tuple(out)


def sample_frame_indices(total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]:
    """Absolute indices (into the decoded source) of the frames the model sees, identical to qwen-vl-utils 0.0.14.

    The count follows `smart_nframes`; the indices are `linspace(0, total_num_frames - 1, n)` rounded as torch does.
    `native_fps` is only used in fps mode. Raises ValueError when the video is too short for the spec.
    With `spec.family` set, that model family's own rule applies (`evr1_cache.families`).
    """
    total = check_int("sample_frame_indices", "total_num_frames", total_num_frames, 1)
    if total >= MAX_TOTAL_FRAMES:
        raise ValueError(f"a video of {total} frames is beyond float32 frame indexing (< {MAX_TOTAL_FRAMES}); split it")
    if spec.family is not None:
        return _family(spec.family).sample_frame_indices(total, native_fps, spec)
    return qwen_frame_indices(total, native_fps, spec)


def qwen_frame_indices(total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]:
    """qwen-vl-utils' rule whatever `spec.family` says (the Qwen families' adapters call it)."""
    nframes = _frame_count(total_num_frames, native_fps, spec)
    return _linspace_round(total_num_frames - 1, nframes)


# -- frame size -----------------------------------------------------------------------------------------------------


def _smart_resize(height: int, width: int, factor: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """qwen-vl-utils' `smart_resize`, operation for operation, refusing a zero-sized result the library would return."""
    h = check_int("resize", "height", height, 1)
    w = check_int("resize", "width", width, 1)
    if max_pixels < min_pixels:
        raise ValueError(f"max_pixels ({max_pixels}) must be >= min_pixels ({min_pixels})")
    ratio = max(h, w) / min(h, w)
    if ratio > MAX_ASPECT_RATIO:
        raise ValueError(
            f"a {w}x{h} frame has aspect ratio {ratio:.1f} > {MAX_ASPECT_RATIO}, which Qwen-VL refuses; crop or pad it"
        )
    h_bar = max(factor, round(h / factor) * factor)
    w_bar = max(factor, round(w / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((h * w) / max_pixels)
        h_bar = math.floor(h / beta / factor) * factor
        w_bar = math.floor(w / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        h_bar = math.ceil(h * beta / factor) * factor
        w_bar = math.ceil(w * beta / factor) * factor
    if h_bar == 0 or w_bar == 0:
        raise ValueError(
            f"a {w}x{h} frame shrinks to {w_bar}x{h_bar} under max_pixels={max_pixels}: its short side falls below "
            f"{factor} pixels; raise max_pixels or crop the frame to a less extreme aspect ratio"
        )
    return h_bar, w_bar


def _video_max_pixels(nframes: int, spec: SamplingSpec) -> float:
    """The per-frame pixel cap `fetch_video` applies to `nframes` frames (may be a float, as in the library)."""
    n = check_int("resized_hw", "nframes", nframes, 1)
    factor = spec.size_factor
    assert factor is not None  # resolved in __post_init__
    assert spec.min_pixels is not None  # resolved in __post_init__
    assert spec.max_pixels is not None
    total: float = spec.total_pixels if spec.total_pixels is not None else DEFAULT_MODEL_SEQ_LEN * factor * factor * 0.9
    cap = max(min(VIDEO_MAX_TOKENS * factor * factor, total / n * FRAME_FACTOR), int(spec.min_pixels * 1.05))
    return min(spec.max_pixels, cap)


def resized_hw(height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]:
    """(height, width) of every sampled frame of a `height` x `width` video once `nframes` frames share the budget.

    With `spec.family` set, that model family's own rule applies (`evr1_cache.families`)."""
    if spec.family is not None:
        return _family(spec.family).resized_hw(height, width, nframes, spec)
    return qwen_resized_hw(height, width, nframes, spec)


def qwen_resized_hw(height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]:
    """qwen-vl-utils' `fetch_video` size whatever `spec.family` says (the Qwen families' adapters call it)."""
    assert spec.min_pixels is not None  # resolved in __post_init__
    assert spec.size_factor is not None
    return _smart_resize(height, width, spec.size_factor, spec.min_pixels, _video_max_pixels(nframes, spec))


def resized_image_hw(height: int, width: int, image_spec: ImageSpec) -> tuple[int, int]:
    """(height, width) of a still image under its own budget (qwen-vl-utils' `fetch_image`, or the family's rule)."""
    if image_spec.family is not None:
        return _family(image_spec.family).resized_image_hw(height, width, image_spec)
    return qwen_resized_image_hw(height, width, image_spec)


def qwen_resized_image_hw(height: int, width: int, image_spec: ImageSpec) -> tuple[int, int]:
    """qwen-vl-utils' `fetch_image` size whatever `image_spec.family` says."""
    assert image_spec.min_pixels is not None  # resolved in __post_init__
    assert image_spec.max_pixels is not None
    assert image_spec.size_factor is not None
    return _smart_resize(height, width, image_spec.size_factor, image_spec.min_pixels, image_spec.max_pixels)


class FamilyRules(Protocol):
    """What the spec asks of a model family (`evr1_cache.families.ModelFamily` is one): its factors, budget, checks
    and frame/size rules. The spec never imports its plugins: the families install their lookup here."""

    @property
    def spec_rule(self) -> bool: ...

    def check_size_factor(self, owner: str, value: object) -> int: ...

    def default_pixels(self, kind: str, factor: int) -> tuple[int, int]: ...

    def check_spec(self, spec: SamplingSpec | ImageSpec) -> None: ...

    def sample_frame_indices(self, total_num_frames: int, native_fps: float, spec: SamplingSpec) -> tuple[int, ...]: ...

    def resized_hw(self, height: int, width: int, nframes: int, spec: SamplingSpec) -> tuple[int, int]: ...

    def resized_image_hw(self, height: int, width: int, spec: ImageSpec) -> tuple[int, int]: ...


_family_lookup: list[Callable[[str], FamilyRules]] = []


def install_family_lookup(lookup: Callable[[str], FamilyRules]) -> None:
    """Let specs with `family=NAME` find that family: `evr1_cache.families` installs its registry's lookup on import
    (and `evr1_cache` imports it first), so the contract depends on no plugin while its plugins depend on it."""
    _family_lookup[:] = [lookup]


def _family(name: str) -> FamilyRules:
    """The model family `name`, through the lookup `evr1_cache.families` installed."""
    if not _family_lookup:
        raise RuntimeError(f"model family {name!r}: no family lookup is installed; import evr1_cache.families first")
    return _family_lookup[0](name)


# -- metadata -------------------------------------------------------------------------------------------------------

#: The fields of transformers' `VideoMetadata` (and of vLLM's video metadata dict), in that class's order.
HF_FIELDS: Final = ("total_num_frames", "fps", "width", "height", "duration", "video_backend", "frames_indices")


@dataclass(frozen=True)
class VideoMeta:
    """What a reader needs to feed cached frames to a model: transformers' `VideoMetadata` names + resize + identity.

    `fps` is the source's native rate and `frames_indices` are absolute source indices, so `timestamps` are the
    instants the frames show. `source*` fields identify the decoded file; `spec_key` names the SamplingSpec used.
    """

    total_num_frames: int
    fps: float
    duration: float
    width: int
    height: int
    frames_indices: tuple[int, ...]
    video_backend: str
    resized_height: int
    resized_width: int
    spec_version: int = SPEC_VERSION
    spec_key: str | None = None
    source: str | None = None
    source_size: int | None = None
    source_mtime_ns: int | None = None
    source_sha256: str | None = None

    def __post_init__(self) -> None:
        owner = "VideoMeta"
        if self.spec_version != SPEC_VERSION:
            raise ValueError(
                f"{owner}: spec_version {self.spec_version!r} is not this evr1-cache's {SPEC_VERSION}; rebuild the "
                "cache with this version (evr1-cache build) or install the evr1-cache that wrote it"
            )
        total = check_int(owner, "total_num_frames", self.total_num_frames, 1)
        _set(self, "total_num_frames", total)
        _set(self, "fps", check_positive_float(owner, "fps", self.fps))
        duration: object = self.duration
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 <= duration < math.inf:
            raise ValueError(f"{owner}.duration must be a finite number >= 0, got {duration!r}")
        _set(self, "duration", float(duration))
        for name in ("width", "height", "resized_height", "resized_width"):
            _set(self, name, check_int(owner, name, getattr(self, name), 1))
        raw: object = self.frames_indices
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
            raise ValueError(f"{owner}.frames_indices must be a sequence of ints, got {raw!r}")
        indices = tuple(check_int(owner, "frames_indices[]", i, 0) for i in raw)
        if not indices:
            raise ValueError(f"{owner}.frames_indices is empty: a cached video holds at least one frame")
        if indices[-1] >= total or any(b < a for a, b in itertools.pairwise(indices)):
            raise ValueError(
                f"{owner}.frames_indices must be non-decreasing and < total_num_frames={total}, got {indices[:8]}..."
            )
        _set(self, "frames_indices", indices)
        backend: object = self.video_backend
        if not isinstance(backend, str) or not backend:
            raise ValueError(f"{owner}.video_backend must name the decoder, got {backend!r}")
        for name in ("spec_key", "source", "source_sha256"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{owner}.{name} must be a string or None, got {value!r}")
        for name in ("source_size", "source_mtime_ns"):
            if getattr(self, name) is not None:
                _set(self, name, check_int(owner, name, getattr(self, name), 0))

    @property
    def timestamps(self) -> tuple[float, ...]:
        """Seconds (from the first frame) of each sampled frame: index / native fps, as transformers computes them."""
        return tuple(i / self.fps for i in self.frames_indices)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (frames_indices as a list)."""
        data = dataclasses.asdict(self)
        data["frames_indices"] = list(self.frames_indices)
        return data

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no NaN): stored in the safetensors header of a cache entry."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VideoMeta:
        """Inverse of `to_dict`; refuses unknown keys and any spec_version other than this one."""
        if "spec_version" not in data:
            raise ValueError("VideoMeta without spec_version: not written by evr1-cache; rebuild the cache")
        check_fields(cls.__name__, data, cls)
        return cls(**data)

    @classmethod
    def from_json(cls, text: str | bytes) -> VideoMeta:
        """Parse `to_json` output; refuses malformed JSON, unknown keys and unknown spec versions."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"VideoMeta JSON is malformed ({exc}); the cache entry is damaged, rebuild it") from exc
        if not isinstance(data, dict):
            raise ValueError(f"VideoMeta JSON must be an object, got {type(data).__name__}")
        return cls.from_dict(data)

    def to_hf(self) -> dict[str, Any]:
        """transformers' `VideoMetadata(**d)` kwargs, also vLLM's `(frames, d)` video metadata.

        The frames are already sampled: call HF processors with `do_sample_frames=False` (vLLM reads a missing
        `do_sample_frames` as False); otherwise Qwen3-VL re-samples and Qwen2.5-VL mis-times the frames.
        """
        data = {name: getattr(self, name) for name in HF_FIELDS}
        data["frames_indices"] = list(self.frames_indices)
        return data
