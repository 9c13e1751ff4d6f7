"""Sequential, frame-exact decoders behind one small protocol, chosen by name from a registry.

Why sequential: seek-based readers returned wrong frames on awkward real containers (see docs/cache.md); a decoder here
walks the stream in decoder output order, converts only the frames it keeps, and checks the frame count it saw against
the probe, so an index always means the same frame whichever backend produced it.
"""

from __future__ import annotations

from evr1_cache.decoders import ffmpeg_cli, pyav  # noqa: F401  (each import registers one backend)
from evr1_cache.decoders.base import DECODERS, Decoder, FrameSink, register, rotate
from evr1_cache.registry import unknown_name

__all__ = ["AUTO_ORDER", "DECODERS", "Decoder", "FrameSink", "get_decoder", "register", "rotate"]


#: Order tried by `decoder="auto"`: PyAV first (in-process, bundles its own FFmpeg), then the ffmpeg CLI.
AUTO_ORDER = ("pyav", "ffmpeg")


def get_decoder(name: str = "auto") -> Decoder:
    """The decoder registered as `name` ("auto": the first available in AUTO_ORDER)."""
    if name == "auto":
        for candidate in AUTO_ORDER:
            dec = DECODERS[candidate]()
            if dec.available():
                return dec
        raise RuntimeError("no video decoder available: install PyAV (`pip install av`) or the ffmpeg CLI")
    if name not in DECODERS:
        raise KeyError(unknown_name("decoder", name, ["auto", *DECODERS]))
    dec = DECODERS[name]()
    if not dec.available():
        raise RuntimeError(f"decoder {name!r} is not available on this machine ({dec.version()})")
    return dec
