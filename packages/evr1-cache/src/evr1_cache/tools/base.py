"""The values every tool shares: its result (text + frames with timestamps, or an error), budgets, settings, context.

Tools never decode on their own: they ask a `FrameSource` (the media loader, `evr1_cache.MediaLoader.frames`) for
the frames of a source under a `SamplingSpec` (served from the cache, computed and cached on first use), so a tool call in training and in evaluation
sees the same pixels and timestamps as the overview the model was given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from evr1_cache.registry import check_fields
from evr1_cache.spec import VIDEO_MAX_TOKENS, ImageSpec, SamplingSpec, VideoMeta, check_int

if TYPE_CHECKING:
    import numpy as np

    from evr1_cache.media import VideoFrames

__all__ = [
    "FrameSource",
    "ToolBudget",
    "ToolConfig",
    "ToolContext",
    "ToolError",
    "ToolMedia",
    "ToolResult",
]


class ToolError(ValueError):
    """A bad call (arguments, budget, window): the message is answered to the model as the tool's output."""


class FrameSource(Protocol):
    """Frames of a media source under a spec, cached on first use then reused: `evr1_cache.MediaLoader` is one
    (`MediaLoader(cache_dir, write_cache=True)`); a test or a remote store may bring another."""

    def frames(self, path: str | os.PathLike[str], spec: SamplingSpec) -> VideoFrames:
        """uint8 `[T, H, W, 3]` frames of `path` sampled and sized by `spec`, with their `VideoMeta`."""
        ...


@dataclass(frozen=True)
class ToolBudget:
    """Limits of one episode (a prompt's tool calls), checked before any pixel is served.

    `frames_per_call` bounds one `get_frames`; `calls_per_episode` and `calls_per_turn` bound the calls (the model's
    turns bound the turns); `pixels_per_episode` bounds the pixels all tool outputs add to the context (the vision
    tokens they cost are pixels / size_factor**2).
    """

    frames_per_call: int = 16
    calls_per_turn: int = 2
    calls_per_episode: int = 4
    pixels_per_episode: int = 16 * 448 * 448

    def __post_init__(self) -> None:
        for name in ("frames_per_call", "calls_per_turn", "calls_per_episode", "pixels_per_episode"):
            object.__setattr__(self, name, check_int("ToolBudget", name, getattr(self, name), 1))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> ToolBudget:
        check_fields("ToolBudget", data or {}, cls)
        return cls(**dict(data or {}))


@dataclass(frozen=True)
class ToolConfig:
    """How tools sample: the cached streams they serve from (each one cache entry per video, built on first use).

    `fps` is the rate of the window stream `get_frames` selects from (above the overview's); `frame_max_pixels` its
    per-frame budget (`min_pixels` the smallest a frame is upscaled to). `zoom` crops come from a detail stream at `zoom_fps` with `zoom_source_pixels` per frame (the
    largest budget a video spec allows by default) and are resized into `[zoom_min_pixels, zoom_max_pixels]` (a small
    region is enlarged: more pixels than the overview's per-frame budget gives it). `family` names the model family whose rules size the frames (None: qwen-vl-utils' rule).
    """

    fps: float = 4.0
    frame_max_pixels: int = 128 * 28 * 28
    zoom_fps: float = 2.0
    zoom_source_pixels: int = VIDEO_MAX_TOKENS * 28 * 28
    zoom_min_pixels: int = 256 * 28 * 28
    zoom_max_pixels: int = 512 * 28 * 28
    min_pixels: int = 16 * 28 * 28
    max_stream_frames: int = 2048
    family: str | None = None

    def __post_init__(self) -> None:
        self.frames_spec()  # invalid settings fail here, naming the field, not at the first call
        self.detail_spec()
        self.zoom_spec()

    def _spec(self, fps: float, max_pixels: int) -> SamplingSpec:
        settings: dict[str, Any] = {
            "fps": fps,
            "min_frames": 2,
            "max_frames": self.max_stream_frames,
            "min_pixels": min(self.min_pixels, max_pixels),
            "max_pixels": max_pixels,
            # per-frame budget, not shrunk by the frame count (qwen-vl-utils divides total_pixels among the frames)
            "total_pixels": max_pixels * self.max_stream_frames,
        }
        if self.family is not None:
            from evr1_cache.families import get_family

            return get_family(self.family).video_spec(**settings)
        return SamplingSpec(**settings)

    def frames_spec(self) -> SamplingSpec:
        """The window stream `get_frames` serves from."""
        return self._spec(self.fps, self.frame_max_pixels)

    def zoom_spec(self) -> ImageSpec:
        """The image budget a crop is resized to (the family's image rule)."""
        return ImageSpec(min_pixels=self.zoom_min_pixels, max_pixels=self.zoom_max_pixels, family=self.family)

    def detail_spec(self) -> SamplingSpec:
        """The high-resolution stream `zoom` crops from."""
        return self._spec(self.zoom_fps, self.zoom_source_pixels)


@dataclass(frozen=True, eq=False)
class ToolMedia:
    """Frames a tool returns: a `video` clip (`meta` gives the processor its timing) or one `image`.

    `timestamps` are seconds in the source video (absolute), one per frame; for a clip, `meta` describes the window
    as a video of its own (indices and timing relative to the window's first frame), so a processor computes the
    clip's true frame rate.
    """

    kind: Literal["video", "image"]
    frames: np.ndarray
    timestamps: tuple[float, ...]
    meta: VideoMeta | None = None
    #: Which cached stream the frames come from ("frames": `ToolConfig.frames_spec`, "detail": `detail_spec`) and
    #: their positions in its cache entry: a viewer shows those very frames (a crop: its source frame).
    stream: Literal["frames", "detail"] | None = None
    positions: tuple[int, ...] = ()

    @property
    def pixels(self) -> int:
        """Pixels this item adds to the context (all frames)."""
        shape = self.frames.shape
        return int(shape[-3] * shape[-2] * (shape[0] if self.frames.ndim == 4 else 1))


@dataclass(frozen=True, eq=False)
class ToolResult:
    """One call's answer: `text` for the model (an error message when `error` is set) and the frames it returned."""

    name: str
    arguments: Mapping[str, Any]
    text: str
    media: tuple[ToolMedia, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def pixels(self) -> int:
        return sum(m.pixels for m in self.media)

    def record(self) -> dict[str, Any]:
        """JSON-ready summary for results and viewers: the call, its outcome and the timestamps of every frame."""
        return {
            "name": self.name,
            "arguments": dict(self.arguments),
            "ok": self.ok,
            "error": self.error,
            "text": self.text,
            "media": [
                {
                    "kind": m.kind,
                    "shape": list(m.frames.shape),
                    "timestamps": [round(t, 4) for t in m.timestamps],
                    **({"stream": m.stream, "positions": list(m.positions)} if m.stream else {}),
                }
                for m in self.media
            ],
        }


@dataclass
class ToolContext:
    """What a tool sees of its episode: the video, the frame source, the settings and the budget left."""

    video: str
    source: FrameSource
    config: ToolConfig
    budget: ToolBudget
    pixels_left: int
    _held: dict[str, VideoFrames] = field(default_factory=dict, repr=False)

    def frames(self) -> tuple[np.ndarray, VideoMeta]:
        """The window stream of the video (cached on first use; held for the episode)."""
        return self._stream(self.config.frames_spec())

    def detail(self) -> tuple[np.ndarray, VideoMeta]:
        """The high-resolution stream `zoom` crops from (cached on first use; held for the episode)."""
        return self._stream(self.config.detail_spec())

    def _stream(self, spec: SamplingSpec) -> tuple[np.ndarray, VideoMeta]:
        key = spec.key()
        if key not in self._held:
            self._held[key] = self.source.frames(self.video, spec)
        return self._held[key].frames, self._held[key].meta

    def meta(self) -> VideoMeta:
        """The video's metadata (duration, native size) from the window stream."""
        return self.frames()[1]

    def charge(self, pixels: int, what: str) -> None:
        """ToolError when `pixels` more would exceed the episode's pixel budget (nothing is served then)."""
        if pixels > self.pixels_left:
            raise ToolError(
                f"{what} would add {pixels} pixels but only {self.pixels_left} of the episode's "
                f"{self.budget.pixels_per_episode} are left; ask for fewer frames or a smaller region"
            )
