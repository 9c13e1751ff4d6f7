"""Sequential, frame-exact decoders behind one small protocol, chosen by name from a registry.

Why sequential: seek-based readers returned wrong frames on awkward real containers (see docs/cache.md); a decoder here
walks the stream in decoder output order, converts only the frames it keeps, and checks the frame count it saw against
the probe, so an index always means the same frame whichever backend produced it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

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
_D = TypeVar("_D", bound=Callable[[], Decoder])


def register(name: str) -> Callable[[_D], _D]:
    """Class decorator adding a decoder factory under `name`; refuses duplicates."""
    return registering(DECODERS, name, "decoder")  # type: ignore[return-value]  # _D is a Callable[[], Decoder]


#: Order tried by `decoder="auto"`: PyAV first (in-process, bundles its own FFmpeg), then the ffmpeg CLI.
AUTO_ORDER = ("pyav", "ffmpeg")


def get_decoder(name: str = "auto") -> Decoder:
    """The decoder registered as `name` ("auto": the first available in AUTO_ORDER)."""
    _load_builtin()
    if name == "auto":
        for candidate in AUTO_ORDER:
            dec = DECODERS[candidate]()
            if dec.available():
                return dec
        raise RuntimeError("no video decoder available: install PyAV (`pip install av`) or the ffmpeg CLI")
    if name not in DECODERS:
        close = difflib.get_close_matches(name, list(DECODERS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown decoder {name!r}{hint} (known: auto, {', '.join(sorted(DECODERS))})")
    dec = DECODERS[name]()
    if not dec.available():
        raise RuntimeError(f"decoder {name!r} is not available on this machine ({dec.version()})")
    return dec


def _load_builtin() -> None:
    from evr1_cache.decoders import ffmpeg_cli, pyav  # noqa: F401 - registration side effect


def rotate(frame: np.ndarray, rotation: int) -> np.ndarray:
    """Apply a counter-clockwise display rotation to one `[H, W, C]` frame (what FFmpeg's autorotate shows)."""
    import numpy as np

    k = (rotation // 90) % 4
    return np.ascontiguousarray(np.rot90(frame, k=k)) if k else frame
