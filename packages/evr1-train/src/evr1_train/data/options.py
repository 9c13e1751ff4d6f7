"""`DataOptions`: how dataset rows become prompts and pixels (keys, media root, cache mode, video/image budgets).

Why its own frozen dataclass: the verl dataset class, its classmethod called inside verl's agent-loop workers, and
the local engine all read the same `data.evr1` YAML node; validating it once gives the same behaviour everywhere.

Names (stable): DataOptions, DataOptions.from_mapping(node, base_dir=None), DataOptions.video_spec(),
DataOptions.image_spec(), VIDEO_SOURCES, data_folder(files).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from evr1_cache.registry import check_fields

if TYPE_CHECKING:
    from evr1_cache import MediaPaths
    from evr1_cache.spec import ImageSpec, SamplingSpec

#: The config key that opts in to remote media (evr1_cache.RemoteMedia), named when a URL is refused.
ALLOW_REMOTE_KEY = "data.evr1.allow_remote_media"

VideoSource = Literal["prefer_cache", "cache_only", "decode"]
VIDEO_SOURCES: tuple[str, ...] = ("prefer_cache", "cache_only", "decode")

#: Video budget defaults: Qwen2.5-VL's recipe values (2 fps, 128..768 tokens/frame) with at most 64 frames for training;
#: `evr1-cache build` must be given the same values (`--max-frames 64`), or every video is a cache miss.
DEFAULT_VIDEO: dict[str, Any] = {
    "fps": 2.0,
    "nframes": None,
    "min_frames": 4,
    "max_frames": 64,
    "min_pixels": 128 * 28 * 28,
    "max_pixels": 768 * 28 * 28,
    "total_pixels": None,
    "size_factor": 28,
}
#: Image budget: independent of the video budget (EasyVideoR1 shared one `min_pixels` across both).
DEFAULT_IMAGE: dict[str, Any] = {"min_pixels": 4 * 28 * 28, "max_pixels": 1280 * 28 * 28, "size_factor": 28}


@dataclass(frozen=True)
class DataOptions:
    """Row -> model input settings.

    prompt_key / answer_key / video_key / image_key: EasyVideoR1 column names (`problem`, `answer`, `videos`, `images`).
    media_root: relative media paths are joined to it; default = the dataset file's folder. Media read from disk
        must resolve (after symlinks) inside it unless allow_outside_media=true (evr1_cache.MediaPaths); media served
        from the frame cache are not read from disk.
    allow_remote_media: URL schemes (a list or comma list from evr1_cache.REMOTE_SCHEMES: http, https) whose media
        URLs are downloaded once and read as local files; default none (every URL is refused, naming this key).
    video_source: "prefer_cache" (cache, decode + warn on a miss), "cache_only" (a miss is an error naming the row),
        "decode" (ignore the cache).
    cache_dir: the `evr1-cache build --out` folder (needed unless video_source=decode).
    video / image: keyword arguments of `evr1_cache.spec.SamplingSpec` / `ImageSpec` — they must equal the settings
        the cache was built with, otherwise the cache key differs and every video is a miss. `family` (e.g. glm4v,
        internvl) applies that model family's own frame rule and default budget (evr1_cache.families).
    system_prompt: optional system turn. think: ask for `<think>...</think>` before `<answer>...</answer>`.
    on_over_limit: what the start-up prompt-length check does with rows over `data.max_prompt_length` (set through
        `evr1.plan.on_over_limit`; see `evr1_train.data.plan_check`).
    """

    prompt_key: str = "problem"
    answer_key: str = "answer"
    video_key: str = "videos"
    image_key: str = "images"
    media_root: str | None = None
    allow_outside_media: bool = False
    allow_remote_media: str | Sequence[str] = ()
    video_source: VideoSource = "prefer_cache"
    cache_dir: str | None = None
    video: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_VIDEO))
    image: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_IMAGE))
    system_prompt: str | None = None
    think: bool = True
    offline_output_key: str = "offline_output"
    offline_flag_key: str = "has_offline_trajectory"
    #: rows longer than data.max_prompt_length at start-up: "error" (refuse, naming them) or "filter" (drop them)
    on_over_limit: str = "error"

    def __post_init__(self) -> None:
        from evr1_cache import parse_remote_schemes

        try:  # one sorted tuple, checked against the allow-list once
            object.__setattr__(self, "allow_remote_media", tuple(sorted(parse_remote_schemes(self.allow_remote_media))))
        except ValueError as exc:
            raise ValueError(f"{ALLOW_REMOTE_KEY}: {exc}") from exc
        if self.on_over_limit not in ("error", "filter"):
            raise ValueError(f"evr1.plan.on_over_limit must be error or filter, got {self.on_over_limit!r}")
        if self.video_source not in VIDEO_SOURCES:
            raise ValueError(f"data.evr1.video_source must be one of {list(VIDEO_SOURCES)}, got {self.video_source!r}")
        if self.video_source != "decode" and not self.cache_dir:
            raise ValueError(
                f"data.evr1.video_source={self.video_source} needs data.evr1.cache_dir (the `evr1-cache build --out` "
                "folder); set it, or use data.evr1.video_source=decode"
            )
        video = dict(self.video)
        if video.get("nframes") is not None and "fps" not in video:  # a fixed frame count replaces the default fps
            video["fps"] = None
        object.__setattr__(self, "video", {**_defaults(DEFAULT_VIDEO, video), **video})
        object.__setattr__(self, "image", {**_defaults(DEFAULT_IMAGE, self.image), **self.image})

    def media_paths(self) -> MediaPaths:
        """The rule media read from disk follow: inside `media_root` (else the working folder) unless opted out."""
        from evr1_cache import MediaPaths

        return MediaPaths.for_folder(
            self.media_root or os.getcwd(),
            allow_outside=self.allow_outside_media,
            opt_out="data.evr1.allow_outside_media=true",
            allow_remote=self.allow_remote_media,
            remote_opt_in=ALLOW_REMOTE_KEY,
        )

    def video_spec(self) -> SamplingSpec:
        from evr1_cache.spec import SamplingSpec

        return SamplingSpec(**dict(self.video))

    def image_spec(self) -> ImageSpec:
        from evr1_cache.spec import ImageSpec

        return ImageSpec(**dict(self.image))

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None, base_dir: str | None = None) -> DataOptions:
        """Build from the `data.evr1` node (OmegaConf or dict); unknown keys are an error listing known ones."""
        from evr1_train.engine.config import plain

        data = {k: plain(v) for k, v in (node or {}).items()}
        check_fields("data.evr1", data, cls)
        if data.get("media_root") is None and base_dir is not None:
            data["media_root"] = base_dir
        return cls(**data)


def data_folder(files: str | os.PathLike[str] | Iterable[Any] | None) -> str | None:
    """The folder of the first data file (one path or several): where relative media paths resolve by default."""
    if not files:
        return None
    first = files if isinstance(files, str | os.PathLike) else next(iter(files))
    return os.path.dirname(os.path.abspath(os.fspath(first)))


def _defaults(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults under `given`: with a model `family` (evr1_cache.families) the family's own size factor and pixel
    budget apply, not Qwen2.5-VL's (None = the family decides)."""
    if given.get("family") is None:
        return dict(defaults)
    return {**defaults, "size_factor": None, "min_pixels": None, "max_pixels": None}
