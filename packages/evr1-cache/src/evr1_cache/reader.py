"""Read cached frames for training and evaluation: `CacheReader(dir).load(video_path, spec) -> (frames, VideoMeta)`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta
from evr1_cache.store import (
    CorruptEntry,
    entry_key,
    entry_relpath,
    meta_from_json,
    read_entry,
    source_identity,
    spec_key,
)

if TYPE_CHECKING:
    import numpy as np
    import torch


class CacheMiss(KeyError):
    """No finished entry for this (file, spec) in the cache."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class CacheReader:
    """Look entries up by the media file and the spec they were built with; a stale or foreign entry is never served.

    Thread-safe for reads; keeps no open files.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"cache directory {self.root} does not exist; build it with `evr1-cache build`")

    def path_for(self, media_path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec) -> Path:
        """Where the entry for `media_path` under `spec` lives (whether or not it exists)."""
        return self.root / entry_relpath(spec, entry_key(source_identity(media_path), spec))

    def contains(self, media_path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec) -> bool:
        try:
            return self.path_for(media_path, spec).is_file()
        except OSError:
            return False

    def load(
        self, video_path: str | os.PathLike[str], spec: SamplingSpec, *, mmap: bool = False
    ) -> tuple[np.ndarray, VideoMeta]:
        """(uint8 `[T, H, W, 3]`, VideoMeta) cached for `video_path` under `spec`; CacheMiss if not built."""
        frames, header = self._read(video_path, spec, "video", mmap=mmap)
        return frames, meta_from_json(header["meta"])

    def load_image(self, image_path: str | os.PathLike[str], image_spec: ImageSpec) -> np.ndarray:
        """uint8 `[H, W, 3]` cached for `image_path` under `image_spec`; CacheMiss if not built."""
        frames, _ = self._read(image_path, image_spec, "image")
        return frames

    def load_torch(self, video_path: str | os.PathLike[str], spec: SamplingSpec) -> tuple[torch.Tensor, VideoMeta]:
        """Like `load`, as a torch uint8 `[T, H, W, 3]` tensor sharing the loaded buffer (no copy). Needs torch."""
        try:
            import torch
        except ImportError as exc:
            raise ImportError("load_torch needs torch: pip install 'evr1-cache[torch]'") from exc
        frames, meta = self.load(video_path, spec)
        return torch.from_numpy(frames), meta

    def load_ref(self, ref: Mapping[str, Any] | str) -> tuple[np.ndarray, dict[str, Any]]:
        """Load by a cache reference written into the output dataset (`{"file": ...}` or the relative path itself).

        Returns (frames, metadata dict): `metadata["meta"]` is the VideoMeta dict for a video entry.
        """
        rel = ref if isinstance(ref, str) else str(ref["file"])
        path = self.root / rel
        if not path.is_file():
            raise CacheMiss(f"cache entry {rel} not found under {self.root}")
        frames, header = read_entry(path)
        return frames, {k: (json.loads(v) if k in ("meta", "source", "spec") else v) for k, v in header.items()}

    def _read(
        self, media_path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec, kind: str, *, mmap: bool = False
    ) -> tuple[np.ndarray, dict[str, str]]:
        try:
            path = self.path_for(media_path, spec)
        except FileNotFoundError as exc:
            raise CacheMiss(f"{media_path}: source file not found, so its cache entry cannot be located") from exc
        if not path.is_file():
            raise CacheMiss(
                f"{media_path}: not in cache {self.root} for spec {spec_key(spec)}; "
                "build it with `evr1-cache build` or decode on the fly with `evr1_cache.decode_video`"
            )
        try:
            frames, header = read_entry(path, mmap=mmap)
        except CorruptEntry as exc:
            raise CacheMiss(f"{media_path}: cache entry is corrupt ({exc}); run `evr1-cache verify --delete`") from exc
        if header.get("kind") != kind or header.get("spec_key") != spec_key(spec):
            raise CacheMiss(f"{media_path}: entry {path.name} was built for another spec or kind")
        return frames, header
