"""`CacheFrameSource`: the `FrameSource` tools use, on evr1-cache's reader — served from the cache, built on first use.

A tool's stream (the whole video under the tool's spec) is one ordinary cache entry: `CacheReader.ensure` builds it
on the first call exactly as `evr1-cache build` would, and every later call (any episode, process or engine) maps the
file read-only, so a warm call costs a header parse and a slice, not a decode.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from evr1_cache.errors import CacheMiss
from evr1_cache.reader import CacheReader
from evr1_cache.spec import SamplingSpec, VideoMeta

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CacheFrameSource"]


class CacheFrameSource:
    """Frames of a video under a spec from the cache at `root` (written through on a miss with `decoder`)."""

    def __init__(self, root: str | os.PathLike[str], *, decoder: str = "auto", write: bool = True) -> None:
        if write:  # a write-through cache may start empty
            Path(root).mkdir(parents=True, exist_ok=True)
        self.reader = CacheReader(root)
        self.decoder = decoder
        self.write = write

    def video(self, source: str | os.PathLike[str], spec: SamplingSpec) -> tuple[np.ndarray, VideoMeta]:
        """uint8 `[T, H, W, 3]` (a read-only map of the entry) and the `VideoMeta`; CacheMiss when the entry is
        missing and `write=False`, MediaError for a source that cannot be decoded."""
        try:
            entry = self.reader.entry(source, spec, mmap=True)
        except CacheMiss:
            if not self.write:
                raise
            self.reader.ensure(source, spec, decoder=self.decoder)
            entry = self.reader.entry(source, spec, mmap=True)
        return entry.frames, entry.video_meta
