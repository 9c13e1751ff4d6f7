"""Media access for every consumer: one loader that serves a video's or an image's pixels from the frame cache or a decode.

Why one loader: evaluation, training, the viewers and agent tools must show a model the same pixels for the same
(file, `SamplingSpec`). Each used to have its own loader; now each asks this one, which reads the cache through
`CacheReader` (a validated entry, or a miss) and decodes with `decode_video` / `load_image` (the same code
`evr1-cache build` runs), so a cached and a decoded frame set are identical bit for bit.

Modes (`MEDIA_MODES`; `media_mode` also takes the `cache_only` spelling of evr1-train's config):
- `cache-only`: a miss is a `MediaMissError` naming the row, the file, the spec and the fix (training that must never
  decode in a rollout worker);
- `prefer-cache`: a miss is decoded now (counted in `misses`, logged); with `write_cache` it is built into the cache
  first, exactly as `evr1-cache build` would, and served from there;
- `decode`: the cache is not read.
Images are small: in every mode an image the cache cannot serve is read from its file.

Every path is turned into the file that is opened by `resolve`, the one place where a media path is checked.
`frames(path, spec)` is the entry point for tools that ask for new frames of a source (another fps, a time window):
computed and cached on first use, served from the cache afterwards, with their timestamps.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from evr1_cache.errors import CacheMiss, MediaError
from evr1_cache.image import image_pixels
from evr1_cache.paths import is_url
from evr1_cache.reader import CacheReader, Ref
from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image as PILImage

    from evr1_cache.entry import CacheEntry
    from evr1_cache.paths import MediaPaths

logger = logging.getLogger(__name__)

MediaMode = Literal["cache-only", "prefer-cache", "decode"]
MEDIA_MODES: tuple[MediaMode, ...] = get_args(MediaMode)

#: A failed cache read: absent, built for another spec or source, damaged, or the source unreadable.
_CACHE_TROUBLE = (CacheMiss, MediaError, OSError, ValueError)

__all__ = [
    "MEDIA_MODES",
    "ImageFrames",
    "MediaLoader",
    "MediaMissError",
    "MediaMode",
    "VideoFrames",
    "media_key",
    "media_mode",
]


class MediaMissError(ValueError):
    """A video is not in the cache in `cache-only` mode, or a video or image cannot be decoded or read at all."""


def media_mode(value: str) -> MediaMode:
    """`value` as a mode (`cache_only` and `cache-only` alike); ValueError naming the choices otherwise."""
    mode = value.replace("_", "-")
    if mode not in MEDIA_MODES:
        raise ValueError(f"media mode {value!r} is not one of {', '.join(MEDIA_MODES)}")
    return mode


def media_key(path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec) -> str:
    """Id of one exact frame set (source path + spec key): lets an engine reuse processed media across questions."""
    return hashlib.sha256(f"{os.fspath(path)}\0{spec.key()}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class VideoFrames:
    """The frames a model sees of one video: uint8 `[T, H, W, 3]`, their `VideoMeta` (indices, fps, timestamps)."""

    frames: np.ndarray
    meta: VideoMeta
    #: `media_key(path, spec)`: the same for the same frames, whether cached or decoded.
    key: str
    #: Whether the frames came from the cache (False: decoded now).
    cached: bool

    @property
    def timestamps(self) -> tuple[float, ...]:
        """Seconds from the video's first frame of each frame served."""
        return self.meta.timestamps


@dataclass(frozen=True, slots=True)
class ImageFrames:
    """The pixels a model sees of one image: uint8 `[H, W, 3]` within the image budget."""

    pixels: np.ndarray
    key: str | None
    cached: bool


class MediaLoader:
    """Serves videos and images under a mode (see the module docstring); thread-safe, keeps no open files."""

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        mode: MediaMode | None = None,
        video_spec: SamplingSpec | None = None,
        image_spec: ImageSpec | None = None,
        write_cache: bool = False,
        media_root: str | os.PathLike[str] | None = None,
        paths: MediaPaths | None = None,
        miss_fix: str = "run `evr1-cache build` on the dataset with the same video settings, or use prefer-cache",
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.mode = media_mode(mode or ("prefer-cache" if self.cache_dir is not None else "decode"))
        if write_cache and self.cache_dir is None:
            raise ValueError("write_cache needs a cache directory (--cache-dir)")
        if self.mode == "cache-only" and self.cache_dir is None:
            raise ValueError("the cache-only media mode needs a cache directory")
        if write_cache and self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.write_cache = write_cache
        self.video_spec = video_spec or SamplingSpec()
        self.image_spec = image_spec or ImageSpec()
        self.media_root = Path(media_root) if media_root else None
        #: The confinement rule a file must pass before it is decoded or read (None: the caller confined the paths).
        self.paths = paths
        self.miss_fix = miss_fix
        #: Videos decoded because the cache could not serve them (prefer-cache).
        self.misses = 0
        self._reader: CacheReader | None = None
        self._lock = threading.Lock()

    # -- paths and the cache ---------------------------------------------------------------------------------------
    def resolve(self, path: str | os.PathLike[str]) -> str:
        """The file a media reference names: `file://` dropped, a relative path joined to `media_root`. Every media
        file this loader opens passes through here (the one place where a path is checked)."""
        p = os.fspath(path)
        if is_url(p) and not p.startswith("file://"):
            # a URL is never joined to media_root: an allowed one is its downloaded copy (evr1_cache.remote, the
            # cache's source); a refused or failed one stays the URL, refused by `_readable` naming the row
            try:
                return self.paths.resolve(p) if self.paths is not None and self.paths.remote is not None else p
            except MediaError:
                return p
        p = p.removeprefix("file://")
        if not os.path.isabs(p) and self.media_root is not None:
            p = os.path.normpath(os.path.join(self.media_root, p))
        return p

    def _readable(self, source: str, row: str) -> str:
        """`source` as the file that is opened: checked by `paths` (remote, outside the media folder: MediaPathError)
        when the loader has a rule. Only files that are decoded or read pass here: a cache hit opens no media file."""
        return source if self.paths is None else self.paths.resolve(source, f"row {row}")

    @property
    def reader(self) -> CacheReader | None:
        """The cache's reader (None in decode mode or without a cache directory); FileNotFoundError naming the fix
        when the directory does not exist."""
        if self.cache_dir is None or self.mode == "decode":
            return None
        with self._lock:
            if self._reader is None:
                self._reader = CacheReader(self.cache_dir)
            return self._reader

    def cached(self, path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec, ref: Ref | None = None) -> bool:
        """Whether the cache holds `path` under `spec` (by `ref`, the `video_cache[i]` of a built dataset, if given)."""
        reader = self.reader
        if reader is None:
            return False
        return reader.contains_ref(ref, spec) if ref else reader.contains(self.resolve(path), spec)

    def entry_file(
        self, path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec, ref: Ref | None = None
    ) -> str | None:
        """Where the cache entry that serves `path` under `spec` lies, relative to the cache (what viewers record and
        show): `ref` when it names a file inside the cache, else the entry for the content and spec if it was built,
        else None. Reads no pixels and validates nothing (serving does)."""
        reader = self.reader
        if reader is None:
            return None
        if ref:
            try:
                return str(reader.ref_path(ref).relative_to(reader.root.resolve()))
            except CacheMiss:
                pass
        source = self.resolve(path)
        return str(reader.path_for(source, spec).relative_to(reader.root)) if reader.contains(source, spec) else None

    def _from_cache(self, source: str, spec: SamplingSpec | ImageSpec, ref: Ref | None) -> tuple[CacheEntry, bool]:
        """(the entry, whether it was already cached): by `ref` if given, else by content; built now with
        `write_cache`. Raises one of `_CACHE_TROUBLE` when the cache cannot serve it."""
        reader = self.reader
        if reader is None:
            raise CacheMiss("no frame cache is read")
        if ref:
            return reader.entry_at(ref, spec, source=source), True
        if self.write_cache:
            hit = reader.contains(source, spec)
            return reader.ensure(source if hit else self._readable(source, "?"), spec), hit
        return reader.entry(source, spec), True

    # -- videos --------------------------------------------------------------------------------------------------
    def video(
        self,
        path: str | os.PathLike[str],
        spec: SamplingSpec | None = None,
        *,
        ref: Ref | None = None,
        row: str = "?",
    ) -> VideoFrames:
        """The frames of one video under `spec` (default: the loader's `video_spec`) following the mode. `ref` is the
        entry a built dataset names (served only if built for `spec` from the same source content); `row` names the
        row in errors."""
        source = self.resolve(path)
        chosen = self.video_spec if spec is None else spec
        if self.mode != "decode" and self.cache_dir is not None:
            try:
                entry, hit = self._from_cache(source, chosen, ref)
                return VideoFrames(entry.frames, entry.video_meta, media_key(source, chosen), cached=hit)
            except _CACHE_TROUBLE as exc:
                if self.mode == "cache-only":
                    raise MediaMissError(
                        f"row {row}: video {source!r} is not in the frame cache {os.fspath(self.cache_dir)!r} for "
                        f"spec {chosen.key()} ({type(exc).__name__}: {exc}); {self.miss_fix}"
                    ) from exc
                self.misses += 1
                logger.info("row %s: cache miss for %s (%s); decoding instead", row, source, exc)
        return self.decoded(source, chosen, row=row)

    def decoded(self, path: str | os.PathLike[str], spec: SamplingSpec, *, row: str = "?") -> VideoFrames:
        """The frames of one video decoded now (the cache is neither read nor written)."""
        from evr1_cache.decode import decode_video

        source = self.resolve(path)
        try:
            frames, meta = decode_video(self._readable(source, row), spec)
        except (MediaError, OSError, ValueError) as exc:
            raise MediaMissError(f"row {row}: cannot decode video {source!r}: {exc}") from exc
        return VideoFrames(frames, meta, media_key(source, spec), cached=False)

    def frames(self, path: str | os.PathLike[str], spec: SamplingSpec) -> VideoFrames:
        """The frames of `path` under `spec` with their timestamps, for tools that ask for frames no build foresaw
        (another fps, a time window): computed and written to the cache on first use, served from it afterwards.
        Without a cache directory they are decoded on every call."""
        source = self.resolve(path)
        if self.cache_dir is None:
            return self.decoded(source, spec)
        try:
            reader = self.reader or CacheReader(self.cache_dir)
            try:  # a tool slices a few frames of a long stream: map the entry read-only instead of reading it all
                entry, hit = reader.entry(source, spec, mmap=True), True
            except CacheMiss:  # absent or damaged: built now
                entry, hit = reader.ensure(self._readable(source, "?"), spec), False
        except (MediaError, OSError, ValueError) as exc:
            raise MediaMissError(f"cannot decode video {source!r} under spec {spec.key()}: {exc}") from exc
        return VideoFrames(entry.frames, entry.video_meta, media_key(source, spec), cached=hit)

    # -- images --------------------------------------------------------------------------------------------------
    def image(
        self,
        item: str | os.PathLike[str] | bytes | PILImage.Image,
        *,
        ref: Ref | None = None,
        row: str = "?",
    ) -> ImageFrames:
        """The pixels of one image within `image_spec`: a file (from the cache when it holds it), encoded bytes, or an
        already opened PIL image."""
        spec = self.image_spec
        if not isinstance(item, (str, os.PathLike)):
            return ImageFrames(_image_pixels(item, spec), None, cached=False)
        source = self.resolve(item)
        if self.mode != "decode" and self.cache_dir is not None:
            try:
                entry, hit = self._from_cache(source, spec, ref)
                return ImageFrames(entry.frames, media_key(source, spec), cached=hit)
            except _CACHE_TROUBLE as exc:  # a miss or a damaged entry: read the file instead
                logger.info("row %s: image %s not served from the cache (%s); reading the file", row, source, exc)
        from evr1_cache.image import load_image  # at the call: a patched evr1_cache.image.load_image is the one used

        try:
            pixels = load_image(self._readable(source, row), spec)
        except (MediaError, OSError, ValueError) as exc:
            raise MediaMissError(f"row {row}: cannot read image {source!r}: {exc}") from exc
        return ImageFrames(pixels, media_key(source, spec), cached=False)


def _image_pixels(item: bytes | PILImage.Image, spec: ImageSpec) -> np.ndarray:
    """An in-memory image (encoded bytes or PIL) prepared as `load_image` prepares a file."""
    from PIL import Image

    if isinstance(item, bytes):
        with Image.open(io.BytesIO(item)) as img:
            img.load()
            return image_pixels(img, spec, "<image bytes>")
    return image_pixels(item, spec, "<image>")
