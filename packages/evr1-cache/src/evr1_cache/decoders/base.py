"""The decoder protocol, its registry table and what every backend shares (the frame sink, display rotation).

The backends (`pyav`, `ffmpeg_cli`) import this module to register themselves; `evr1_cache.decoders` imports the
backends, so the registry is full without any module importing back into the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from evr1_cache.registry import registering

if TYPE_CHECKING:
    import numpy as np

    from evr1_cache.probing import VideoInfo


#: Receives each kept frame as soon as it is decoded (see `Decoder.decode`).
FrameSink = Callable[["np.ndarray"], None]


class Decoder(Protocol):
    """Decode the frames at decode-order `positions` of `info.path`: one uint8 `[H, W, 3]` array per position (a list,
    not a stacked copy: they are resized next), displayed orientation (rotation applied), native resolution.
    With a `sink`, each distinct position's frame is handed to it instead, in increasing position order, as soon as it
    is decoded (so that resizing overlaps decoding), and the list is empty. Raises DecodeMismatch if the stream's frame
    count differs from `len(info.frame_times)` (after the sink saw frames: the caller discards them)."""

    name: str

    def available(self) -> bool: ...

    def version(self) -> str: ...

    def decode(
        self, info: VideoInfo, positions: Sequence[int], *, threads: int = 0, sink: FrameSink | None = None
    ) -> list[np.ndarray]: ...


DECODERS: dict[str, Callable[[], Decoder]] = {}


def register(name: str) -> Callable[[Callable[[], Decoder]], Callable[[], Decoder]]:
    """Class decorator adding a decoder factory under `name`; refuses duplicates."""
    return registering(DECODERS, name, "decoder")


def rotate(frame: np.ndarray, rotation: int) -> np.ndarray:
    """Apply a counter-clockwise display rotation to one `[H, W, C]` frame (what FFmpeg's autorotate shows)."""
    import numpy as np

    k = (rotation // 90) % 4
    return np.ascontiguousarray(np.rot90(frame, k=k)) if k else frame
