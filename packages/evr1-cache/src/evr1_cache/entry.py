"""`CacheEntry`: what the reader hands out — frames, their metadata, the spec and the source they were built from —
frozen and validated, so no consumer re-checks shapes, spec keys or identities itself."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evr1_cache.spec import VideoMeta, check_int

if TYPE_CHECKING:
    import numpy as np
    import torch

_SPEC_KEY = re.compile(r"^[0-9a-f]{16}$")


def _json_object(text: str, what: str) -> dict[str, Any]:
    """A JSON object from a header field (ValueError naming `what` for anything else)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class ImageMeta:
    """The size of a cached still image (it is already resized under its `ImageSpec`)."""

    height: int
    width: int

    def __post_init__(self) -> None:
        for name in ("height", "width"):
            object.__setattr__(self, name, check_int("ImageMeta", name, getattr(self, name), 1))

    def to_json(self) -> str:
        return json.dumps({"height": self.height, "width": self.width}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ImageMeta:
        data = _json_object(text, "image metadata")
        if set(data) != {"height", "width"}:
            raise ValueError(f"image metadata must be {{height, width}}, got {str(data)[:80]}")
        return cls(data["height"], data["width"])


@dataclass(frozen=True)
class Source:
    """The media file an entry was built from: its path at build time and its content identity (size + BLAKE2b of
    its first, middle and last MiB; see `evr1_cache.sources.source_identity`)."""

    path: str
    identity: str

    @classmethod
    def from_json(cls, text: str) -> Source:
        data = _json_object(text, "source record")
        if not all(isinstance(data.get(k), str) for k in ("path", "identity")):
            raise ValueError(f"source record must hold string path and identity, got {str(data)[:80]}")
        return cls(data["path"], data["identity"])

    def to_json(self) -> str:
        return json.dumps({"path": self.path, "identity": self.identity}, ensure_ascii=False)


@dataclass(frozen=True, eq=False)
class CacheEntry:
    """One cache entry, validated when made: uint8 frames `[T, H, W, 3]` (video) or `[H, W, 3]` (image) whose shape
    agrees with `meta`; `spec_key` is the key of the spec it was built for; `source` the file it was built from.

    `frames` is a fresh array owned by the entry (or a read-only memory map with `mmap=True`).
    """

    frames: np.ndarray
    meta: VideoMeta | ImageMeta
    spec_key: str
    source: Source
    file: Path

    def __post_init__(self) -> None:
        import numpy as np

        f: object = self.frames  # checked as untyped values: entries are built from files
        key: object = self.spec_key
        source: object = self.source
        where = f"cache entry {self.file}"
        if not isinstance(f, np.ndarray) or f.dtype != np.uint8:
            raise ValueError(f"{where}: frames must be a uint8 array, got {getattr(f, 'dtype', type(f).__name__)}")
        if not isinstance(key, str) or not _SPEC_KEY.match(key):
            raise ValueError(f"{where}: spec key {key!r} is not 16 hex characters")
        if not isinstance(source, Source):
            raise ValueError(f"{where}: source must be a Source, got {type(source).__name__}")
        meta: object = self.meta
        want: tuple[int, ...]
        if isinstance(meta, VideoMeta):
            want = (len(meta.frames_indices), meta.resized_height, meta.resized_width, 3)
            if meta.spec_key is not None and meta.spec_key != self.spec_key:
                raise ValueError(f"{where}: VideoMeta.spec_key {meta.spec_key} != entry spec key {self.spec_key}")
        elif isinstance(meta, ImageMeta):
            want = (meta.height, meta.width, 3)
        else:
            raise ValueError(f"{where}: meta must be a VideoMeta or ImageMeta, got {type(meta).__name__}")
        if f.shape != want:
            raise ValueError(f"{where}: frames have shape {f.shape}, its metadata says {want}")

    @property
    def kind(self) -> Literal["video", "image"]:
        return "video" if isinstance(self.meta, VideoMeta) else "image"

    @property
    def video_meta(self) -> VideoMeta:
        """The `VideoMeta` of a video entry (TypeError for an image entry)."""
        if not isinstance(self.meta, VideoMeta):
            raise TypeError(f"cache entry {self.file} is an image, it has no VideoMeta")
        return self.meta

    def to_hf(self) -> dict[str, Any]:
        """transformers' / vLLM's video metadata for the frames (see `VideoMeta.to_hf`)."""
        return self.video_meta.to_hf()

    def torch(self) -> torch.Tensor:
        """The frames as a torch uint8 tensor sharing this entry's buffer (no copy). Needs torch."""
        try:
            import torch
        except ImportError as exc:
            raise ImportError("CacheEntry.torch needs torch: pip install 'evr1-cache[torch]'") from exc
        return torch.from_numpy(self.frames)
