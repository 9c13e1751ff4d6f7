"""Write RGB frames as a video file: the one encoder behind the generated test clips and the quickstart's data.

Why one, and why without x264's assembly: with its CPU-specific routines libx264 did not always give the same bytes
for the same frames and settings (up to one generated test clip in six once other work had run in the process, 4 of
the quickstart's 308 clips between two runs; both gone with `asm=0`, at about 1.2x the encode time of a 720p clip),
so two test sessions building "the same" fixture cached different pixels and the quickstart's "same spec and seed,
same pixels" did not hold. The portable C code reads only the pixels it is given: the bytes then depend on the
frames and settings alone.
"""

from __future__ import annotations

import fractions
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evr1_cache.atomic import atomic_path

if TYPE_CHECKING:
    import numpy as np


def write_video(
    path: str | os.PathLike[str],
    frames: Iterable[np.ndarray],
    fps: float,
    *,
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
    timestamps: Sequence[float] | None = None,
    gop: int | None = None,
    crf: int = 18,
) -> Path:
    """Encode `frames` (RGB uint8 `[H, W, 3]`, all one size) at `fps` into `path`, atomically; returns the path.

    `timestamps` (seconds, one per frame, increasing) makes a variable-frame-rate clip on a millisecond time base;
    `gop` sets the keyframe interval; `codec` is any FFmpeg encoder (`libx264`, `mpeg4`, `mjpeg`, ...), the container
    follows the suffix (`.mp4`, `.avi`, `.mkv`).
    """
    import av

    out = Path(path)
    rate = fractions.Fraction(fps).limit_denominator(1001)
    time_base = fractions.Fraction(1, 1000) if timestamps is not None else 1 / rate
    count = 0
    with atomic_path(out, keep_suffix=True) as tmp, av.open(str(tmp), "w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.pix_fmt = pix_fmt
        stream.codec_context.time_base = time_base
        if gop is not None:
            stream.codec_context.gop_size = gop
        for i, img in enumerate(frames):
            if i == 0:
                stream.height, stream.width = img.shape[:2]
                if codec == "libx264":  # asm=0: reproducible bytes (see the module docstring)
                    preset = "ultrafast" if max(img.shape[:2]) > 640 else "veryfast"
                    stream.options = {"crf": str(crf), "preset": preset, "x264-params": "asm=0"}
                elif codec in ("mpeg4", "mjpeg", "mpeg2video", "mpeg1video"):
                    stream.codec_context.qmax = 4
            if timestamps is not None and i >= len(timestamps):
                raise ValueError(f"got {len(timestamps)} timestamps for more frames than that")
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = round(timestamps[i] * 1000) if timestamps is not None else i
            frame.time_base = time_base
            container.mux(stream.encode(frame))
            count = i + 1
        if count == 0:
            raise ValueError(f"{out}: no frames to write")
        if timestamps is not None and count != len(timestamps):
            raise ValueError(f"got {len(timestamps)} timestamps for {count} frames")
        container.mux(stream.encode())
    return out
