"""Pixels for the media references of a prompt: cached frames (evr1-cache) or a decode, with one clear error per miss.

Why: verl's default path decodes every video in every rollout worker (qwen-vl-utils); here frames come from the
frame cache written by `evr1-cache build`, with the exact `VideoMeta` (fps, frames_indices) the processor needs.

A row that `evr1-cache build --plan` resampled names its own video spec (`evr1_plan`, evr1_cache.plan.row_spec); the
prompt builder puts it on the row's video items and `video(..., spec=...)` serves that spec instead of the configured one.

Names (stable): MediaLoader(opts).video(path, row, ref=None, spec=None) -> (frames uint8 [T,H,W,3], metadata dict),
MediaLoader(opts).image(item, row, ref=None) -> PIL.Image (RGB, within the image budget), loader_for(opts) (per-process cache),
MediaMissError.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from evr1_train.data.options import DataOptions

if TYPE_CHECKING:
    from evr1_cache import CacheReader
    from evr1_cache.spec import SamplingSpec

logger = logging.getLogger(__name__)


class MediaMissError(ValueError):
    """A video is absent from the cache in `cache_only` mode, or cannot be decoded/read at all."""


class MediaLoader:
    """Loads one row's media following `opts.video_source`; thread-safe, one per process and options."""

    def __init__(self, opts: DataOptions) -> None:
        self.opts = opts
        self._vspec = opts.video_spec()
        self._ispec = opts.image_spec()
        self._reader: CacheReader | None = None
        self._lock = threading.Lock()
        self.misses = 0

    def _cache(self) -> CacheReader:
        with self._lock:
            if self._reader is None:
                from evr1_cache import CacheReader

                if self.opts.cache_dir is None:  # DataOptions requires it unless video_source=decode
                    raise MediaMissError("data.evr1.cache_dir is not set; the frame cache cannot be read")
                self._reader = CacheReader(self.opts.cache_dir)
            return self._reader

    def video(
        self, path: str, row: str = "?", ref: str | None = None, spec: SamplingSpec | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Frames `[T, H, W, 3]` uint8 and `VideoMeta.to_hf()` for one video of row `row`.

        `ref` is the entry file written into the dataset by `evr1-cache build` (`video_cache[i].file`): evr1-cache
        serves it only when it was built for the spec from the same source content (a stale or foreign entry is a
        miss). Without a ref the entry is looked up by source file + spec (content-addressed). `spec`: the row's own
        spec (a row `build --plan` resampled), else the configured one.
        """
        vspec = self._vspec if spec is None else spec
        mode = self.opts.video_source
        if mode != "decode":
            try:
                return self._cached_video(path, ref, vspec)
            except Exception as exc:  # a miss or an unreadable entry: the mode decides what happens
                if mode == "cache_only":
                    own = " (the row's own spec, from its evr1_plan column)" if spec is not None else ""
                    raise MediaMissError(
                        f"row {row}: video {path!r} is not in the frame cache {self.opts.cache_dir!r} for spec "
                        f"{vspec.key()}{own} ({type(exc).__name__}: {exc}); run `evr1-cache build` on the dataset "
                        "with the same video settings, or set data.evr1.video_source=prefer_cache"
                    ) from exc
                self.misses += 1
                logger.warning("row %s: cache miss for %s (%s); decoding instead", row, path, exc)
        from evr1_cache import decode_video

        try:
            frames, meta = decode_video(self.opts.media_paths().resolve(path, f"row {row}"), vspec)
        except Exception as exc:
            raise MediaMissError(f"row {row}: cannot decode video {path!r}: {exc}") from exc
        return frames, meta.to_hf()

    def _cached_video(self, path: str, ref: str | None, spec: SamplingSpec) -> tuple[Any, dict[str, Any]]:
        """A validated entry (evr1-cache checks kind, spec key, shape and, by ref, the source's identity)."""
        reader = self._cache()
        entry = reader.entry_at(ref, spec, source=path) if ref else reader.entry(path, spec)
        return entry.frames, entry.to_hf()

    def cached(self, path: str, ref: str | None = None, kind: str = "video", spec: SamplingSpec | None = None) -> bool:
        """Whether the media is served from the cache (ref built for the spec, or entry for path + spec); `spec`:
        a video row's own spec, else the configured one."""
        reader = self._cache()
        chosen = (self._vspec if spec is None else spec) if kind == "video" else self._ispec
        return bool(reader.contains_ref(ref, chosen) if ref else reader.contains(path, chosen))

    def image(self, item: Any, row: str = "?", ref: str | None = None) -> Any:
        """An RGB PIL image resized into the image budget (independent of the video budget)."""
        from PIL import Image

        if isinstance(item, dict) and item.get("bytes") is not None:
            img = Image.open(io.BytesIO(item["bytes"]))
            return _fit_image(img.convert("RGB"), self._ispec)
        if isinstance(item, Image.Image):
            return _fit_image(item.convert("RGB"), self._ispec)
        path = os.fspath(item["image"] if isinstance(item, dict) else item)
        if ref and self.opts.video_source != "decode":
            try:
                return Image.fromarray(self._cache().entry_at(ref, self._ispec, source=path).frames)
            except Exception as exc:  # a miss or a damaged entry: read the file instead
                logger.warning("row %s: cached image %s unusable (%s); reading the file", row, ref, exc)
        from evr1_cache import load_image

        try:
            pixels = load_image(self.opts.media_paths().resolve(path, f"row {row}"), self._ispec)
        except Exception as exc:
            raise MediaMissError(f"row {row}: cannot read image {path!r}: {exc}") from exc
        return Image.fromarray(pixels)


def _fit_image(img: Any, spec: Any) -> Any:
    from evr1_cache.spec import resized_image_hw

    h, w = resized_image_hw(img.height, img.width, spec)
    if (h, w) == (img.height, img.width):
        return img
    from PIL import Image

    return img.resize((w, h), Image.Resampling.BICUBIC)


_LOADERS: dict[str, MediaLoader] = {}
_LOADERS_LOCK = threading.Lock()


def loader_for(opts: DataOptions) -> MediaLoader:
    """One loader per distinct options per process (agent-loop workers call this for every sample)."""
    key = repr(opts)
    with _LOADERS_LOCK:
        if key not in _LOADERS:
            _LOADERS[key] = MediaLoader(opts)
        return _LOADERS[key]
