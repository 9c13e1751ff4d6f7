"""The decode budget: how large a decoded frame, and a video's decoded frames, may be; checked before decoding.

Why: a 0.75 MB H.264 file of two 16000 x 16000 frames took 5.3 GB and 28 s to cache (each frame is 384 MB in YUV
and 768 MB in RGB, once per decoder thread). Sizes are known before any pixel is decoded (the stream header), so a
stream over the budget is refused there, with the numbers and the fix, and the decoders are told the same ceiling
(FFmpeg's `max_pixels`: a frame whose size changes mid-stream is refused by the decoder before it is allocated).
Frames under the budget decode exactly as before: the budget never changes a pixel, it only refuses.

- a frame: at most `MAX_FRAME_PIXELS` (8192 x 8192: every real video format, 8K included);
- a video: the array of its kept, resized frames (the spec's frame count and pixel limits) at most `MAX_VIDEO_BYTES`,
  whatever the spec says (decoded frames are resized one chunk at a time, never all held);
- decoder threads: FFmpeg holds one frame per thread, so large frames get fewer threads (`decode_threads`).
"""

from __future__ import annotations

import os

from evr1_cache.errors import MediaError

#: Hard cap on the pixels of one decoded frame (8192 x 8192 = 64 Mi pixels, 192 MiB in RGB).
MAX_FRAME_PIXELS = 8192 * 8192
#: Hard cap on the RGB bytes of one video's kept frames after resizing (the array allocated for the whole video).
MAX_VIDEO_BYTES = 4 << 30
#: Decoded bytes (YUV, about 1.5 per pixel, one frame per thread) the decoder threads may hold together.
THREAD_FRAME_BYTES = 1 << 30


def check_frame(path: str, width: int, height: int) -> None:
    """MediaError unless a `width` x `height` frame fits `MAX_FRAME_PIXELS`."""
    if width * height > MAX_FRAME_PIXELS:
        raise MediaError(
            path,
            f"frames of {width}x{height} ({width * height / 2**20:.0f} Mi pixels) exceed the decode budget of "
            f"{MAX_FRAME_PIXELS / 2**20:.0f} Mi pixels per frame (evr1_cache.budget)",
            "downscale the video (e.g. ffmpeg -vf scale=-2:2160) or drop it",
        )


def check_video(path: str, width: int, height: int, kept: int, out_height: int, out_width: int) -> None:
    """MediaError unless a `width` x `height` frame fits the frame budget and the `kept` frames resized to `out_height`
    x `out_width` (the array that is allocated for the whole video) fit `MAX_VIDEO_BYTES`. The decoded frames
    themselves are never all held: each is resized as it arrives, and at most one chunk per resize thread waits
    (`resampling.ResizeStream`), so their count does not matter, their size does."""
    check_frame(path, width, height)
    size = kept * out_height * out_width * 3
    if size > MAX_VIDEO_BYTES:
        raise MediaError(
            path,
            f"{kept} frames of {out_width}x{out_height} take {size / 2**30:.1f} GiB, over the decode budget of "
            f"{MAX_VIDEO_BYTES / 2**30:.0f} GiB per video (evr1_cache.budget)",
            "lower the frame count or pixel limits of the spec",
        )


def decode_threads(threads: int, width: int, height: int) -> int:
    """Decoder threads for frames of `width` x `height`: `threads` as given (0: FFmpeg's automatic count), or fewer
    when the frames the threads hold together would pass `THREAD_FRAME_BYTES` (never fewer than one)."""
    wanted = threads if threads > 0 else os.cpu_count() or 1
    allowed = max(1, THREAD_FRAME_BYTES // max(1, width * height * 3 // 2))
    return threads if wanted <= allowed else allowed


def codec_options() -> dict[str, str]:
    """FFmpeg decoder options that bound a frame inside the decoder, before it is allocated: twice the budget, as
    decoders check their padded, aligned buffer size (a 96x64 H.264 frame is refused at max_pixels=96*64); the
    budget itself is checked on the stream header first (`check_frame`), with a clear message."""
    return {"max_pixels": str(2 * MAX_FRAME_PIXELS)}
