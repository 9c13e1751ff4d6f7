"""Frames for a sample: from the evr1-cache store when present (same SamplingSpec -> same entry the trainer uses),
else decoded once from the source with the same spec. Runs in worker threads (decoders release the GIL).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_eval.backends.base import ImageInput, VideoInput

if TYPE_CHECKING:
    from evr1_cache import ImageSpec, SamplingSpec
    from evr1_eval.types import Sample


@dataclass(frozen=True, slots=True)
class Media:
    videos: tuple[VideoInput, ...]
    images: tuple[ImageInput, ...]
    #: How many videos came from the cache (the rest were decoded now).
    cache_hits: int = 0

    @property
    def nbytes(self) -> int:
        return sum(v.frames.nbytes for v in self.videos) + sum(i.pixels.nbytes for i in self.images)


def spec_key(spec: Any) -> str:
    """A stable id of a sampling spec: evr1-cache's own key for its specs, a hash of the repr otherwise."""
    if type(spec).__module__ == "evr1_cache.spec":
        from evr1_cache.store import spec_key as cache_spec_key

        return str(cache_spec_key(spec))
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:16]


def media_key(path: str, spec: Any) -> str:
    """Id of one exact frame set: lets an engine reuse processed media across questions on the same video."""
    return hashlib.sha256(f"{path}\0{spec_key(spec)}".encode()).hexdigest()[:32]


class MediaLoader:
    """Loads a sample's videos (cache first, else decode) and images, as backend inputs."""

    def __init__(
        self, cache_dir: str | Path | None = None, image_spec: ImageSpec | None = None, *, write_cache: bool = False
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir else None
        if write_cache and self.cache_dir is None:
            raise ValueError("write_cache needs a cache directory (--cache-dir)")
        if write_cache:
            self.cache_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
        self.write_cache = write_cache
        self._reader: Any = None
        self._image_spec = image_spec

    @property
    def reader(self) -> Any:
        if self._reader is None and self.cache_dir is not None:
            from evr1_cache import CacheReader

            self._reader = CacheReader(self.cache_dir)
        return self._reader

    @property
    def image_spec(self) -> ImageSpec:
        if self._image_spec is None:
            from evr1_cache import ImageSpec

            self._image_spec = ImageSpec()
        return self._image_spec

    def load_video(self, path: str, spec: SamplingSpec) -> tuple[VideoInput, bool]:
        """(frames + HF metadata, whether it came from the cache)."""
        reader = self.reader
        if reader is not None and reader.contains(path, spec):
            frames, meta = reader.load(path, spec)
            hit = True
        elif reader is not None and self.write_cache:
            self._build(reader, "video", path, spec)  # decode once, store, then read the stored entry back
            frames, meta = reader.load(path, spec)
            hit = False
        else:
            from evr1_cache import decode_video

            frames, meta = decode_video(path, spec)
            hit = False
        return VideoInput(frames=frames, metadata=meta.to_hf(), key=media_key(path, spec)), hit

    def _build(self, reader: Any, kind: str, path: str, spec: Any) -> None:
        from evr1_cache.build import build_one
        from evr1_cache.store import entry_key, source_identity

        key = entry_key(source_identity(path), spec)
        result = build_one(kind, path, key, str(reader.path_for(path, spec)), spec, self.image_spec, "auto", 0)
        if result.get("status") != "ok":
            raise RuntimeError(str(result.get("error") or f"{path}: could not be cached"))

    def load_image(self, path: str) -> ImageInput:
        spec = self.image_spec
        reader = self.reader
        if reader is not None and (reader.contains(path, spec) or self.write_cache):
            if not reader.contains(path, spec):
                self._build(reader, "image", path, spec)
            pixels = reader.load_image(path, spec)
        else:
            from evr1_cache import load_image

            pixels = load_image(path, spec)
        return ImageInput(pixels=pixels, key=media_key(path, spec))

    def load(self, sample: Sample, spec: SamplingSpec) -> Media:
        videos: list[VideoInput] = []
        hits = 0
        for path in sample.videos:
            video, hit = self.load_video(path, spec)
            videos.append(video)
            hits += hit
        images = tuple(self.load_image(p) for p in sample.images)
        return Media(videos=tuple(videos), images=images, cache_hits=hits)
