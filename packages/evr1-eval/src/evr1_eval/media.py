"""Frames for a sample: from the evr1-cache store when present (same SamplingSpec -> same entry the trainer uses),
else decoded once from the source with the same spec. Runs in worker threads (decoders release the GIL).

Everything cache-related goes through evr1-cache's public API: `CacheReader.entry` (a validated `CacheEntry`) and,
with `write_cache`, `CacheReader.ensure` (build the entry exactly as `evr1-cache build` would, then serve it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evr1_eval.backends.base import ImageInput, VideoInput

if TYPE_CHECKING:
    from evr1_cache import CacheReader, ImageSpec, SamplingSpec
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


def spec_key(spec: object) -> str:
    """A stable id of a sampling spec: evr1-cache's own key for its specs, a hash of the repr for anything else."""
    from evr1_cache.spec import ImageSpec, SamplingSpec

    if isinstance(spec, (SamplingSpec, ImageSpec)):
        return spec.key()
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:16]


def media_key(path: str, spec: object) -> str:
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
        if write_cache and self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.write_cache = write_cache
        self._reader: CacheReader | None = None
        self._image_spec = image_spec

    @property
    def reader(self) -> CacheReader | None:
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
        from evr1_cache import CacheMiss

        reader = self.reader
        if reader is not None:
            if self.write_cache:
                hit = reader.contains(path, spec)
                entry = reader.ensure(path, spec)  # decode once, store, serve the stored entry
                return VideoInput(frames=entry.frames, metadata=entry.to_hf(), key=media_key(path, spec)), hit
            try:
                entry = reader.entry(path, spec)
                return VideoInput(frames=entry.frames, metadata=entry.to_hf(), key=media_key(path, spec)), True
            except CacheMiss:
                pass
        from evr1_cache import decode_video

        frames, meta = decode_video(path, spec)
        return VideoInput(frames=frames, metadata=meta.to_hf(), key=media_key(path, spec)), False

    def load_image(self, path: str) -> ImageInput:
        from evr1_cache import CacheMiss

        spec = self.image_spec
        reader = self.reader
        if reader is not None:
            if self.write_cache:
                return ImageInput(pixels=reader.ensure(path, spec).frames, key=media_key(path, spec))
            try:
                return ImageInput(pixels=reader.entry(path, spec).frames, key=media_key(path, spec))
            except CacheMiss:
                pass
        from evr1_cache import load_image

        return ImageInput(pixels=load_image(path, spec), key=media_key(path, spec))

    def load(self, sample: Sample, spec: SamplingSpec) -> Media:
        videos: list[VideoInput] = []
        hits = 0
        for path in sample.videos:
            video, hit = self.load_video(path, spec)
            videos.append(video)
            hits += hit
        images = tuple(self.load_image(p) for p in sample.images)
        return Media(videos=tuple(videos), images=images, cache_hits=hits)
