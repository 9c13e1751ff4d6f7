"""What a video really holds: frame count, frame times, rate, size and rotation, measured rather than read from headers.

Why: headers lie (a file claiming 444 frames at 15 fps can hold 68 frames spread over 30 s), streams start at non-zero
times and phones store rotation as metadata. Frame selection needs the true count and times *before* decoding, so
`probe` demuxes every packet of the video stream (cheap: no decoding) and takes each frame's time from its packet
(pts, else dts), sorted into display order and counted from the first frame. A decoder that then sees a different
number of frames raises `DecodeMismatch`, and `probe(exact=True)` measures the times from the decoder's own output
(FFmpeg's best-effort rule: pts, falling back to dts when pts run backwards).

The timeline is the reference's (qwen-vl-utils with torchcodec, exact seek mode): frame index i is the i-th frame the
decoder outputs (presentation order), on variable-rate streams too. For a constant-frame-rate stream fps is the
stream's rate; for a variable-frame-rate stream fps = frames / duration, the duration running from the first frame's
pts to the end (pts + duration) of the last packet, as torchcodec's `average_fps`. (On AVIs with packed B-frames the
decoded pts swap neighbours, 5, 4, 8, 7, ...: torchcodec's sequential decoding returns decoder output order there
too, its seeking other frames; see docs/cache.md.)
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evr1_cache.budget import check_frame, decode_threads
from evr1_cache.errors import MediaError
from evr1_cache.paths import open_container
from evr1_cache.sources import media_file

#: Frame-time jitter (fraction of the median frame interval) still treated as a constant frame rate.
CFR_TOLERANCE = 0.25


@dataclass(frozen=True, slots=True)
class VideoInfo:
    """The measured facts about one video stream (see module docstring for the timeline rule)."""

    path: str
    width: int  #: displayed width (after rotation)
    height: int  #: displayed height (after rotation)
    rotation: int  #: counter-clockwise display rotation in degrees (0, 90, 180, 270), applied to decoded frames
    fps: float  #: rate of the frame-index timeline
    total_num_frames: int
    duration: float
    frame_times: tuple[float, ...]  #: display time of each decoded frame, seconds from the first frame
    vfr: bool
    codec: str
    header_frames: int | None  #: what the container header claims (may be wrong)
    header_fps: float | None
    exact: bool  #: times measured by decoding (True) or from packets (False)

    @property
    def header_mismatch(self) -> bool:
        """True when the container's frame count disagrees with what is really there."""
        return bool(self.header_frames) and self.header_frames != len(self.frame_times)

    def positions(self, indices: Sequence[int], timeline: str = "reference") -> list[int]:
        """Decode-order positions of the frames at timeline `indices`. "reference": the i-th frame (see above),
        clipped. "presentation" (`evr1_cache.spec.TIMELINES`): on a variable-rate stream, the frame shown at the
        instant i / fps, i.e. the last one whose time is <= it (what a player shows); the i-th frame otherwise."""
        n = len(self.frame_times)
        if timeline != "presentation" or not self.vfr:
            return [min(max(int(i), 0), n - 1) for i in indices]
        eps = min(1e-3, 0.25 / self.fps)  # a frame stamped a hair after its instant (rounded pts) still counts
        return [max(0, bisect.bisect_right(self.frame_times, i / self.fps + eps) - 1) for i in indices]

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly summary (without the per-frame times) for `evr1-cache probe`."""
        out = dataclasses.asdict(self)
        times = out.pop("frame_times")
        return {**out, "decoded_frames": len(times), "header_mismatch": self.header_mismatch}


@dataclass(frozen=True, slots=True)
class _Header:
    """What the container says about the video stream (may be wrong; only used where nothing better exists)."""

    codec: str
    frames: int | None
    fps: float | None
    time_base: float | None
    width: int
    height: int


def probe(path: str | os.PathLike[str], *, exact: bool = False) -> VideoInfo:
    """Measure `path` (see module docstring); `exact=True` decodes every frame to time it (slower, authoritative).
    MediaError for a file that is not a readable video, or a stream without frames or size."""
    p = media_file(path)
    try:
        with open_container(p) as container:
            header = _stream_header(p, container)
            check_frame(str(p), header.width, header.height)  # before any frame is decoded
            stream = container.streams.video[0]
            if exact:
                times, rotation, width, height = _decoded_times(container, stream, header)
                end = None
            else:
                times, end = _packet_times(container, stream, header)
                rotation, width, height = _first_frame(p, header.width, header.height)
    except MediaError:
        raise
    except Exception as exc:
        raise MediaError(str(p), f"not a readable video ({type(exc).__name__}: {exc})", "re-encode the file") from exc
    # the timeline (module docstring) from the raw frame times
    if not times:
        raise MediaError(str(p), "the video stream holds no frames", "re-encode or drop the file")
    if any(t != t for t in times):  # nan: a stream without timestamps -> the declared rate
        times = [i / (header.fps or 25.0) for i in range(len(times))]
        end = None
    times.sort()
    t0 = times[0]
    rel = tuple(t - t0 for t in times)
    fps, duration, vfr = _timeline(rel, header.fps, None if end is None else end - t0)
    if width <= 0 or height <= 0:
        raise MediaError(str(p), f"invalid frame size {width}x{height}", "re-encode the file")
    w, h = (height, width) if rotation in (90, 270) else (width, height)
    return VideoInfo(
        path=str(p),
        width=w,
        height=h,
        rotation=rotation,
        fps=fps,
        total_num_frames=len(rel),
        duration=duration,
        frame_times=rel,
        vfr=vfr,
        codec=header.codec,
        header_frames=header.frames,
        header_fps=header.fps,
        exact=exact,
    )


def _stream_header(p: Path, container: Any) -> _Header:
    if not container.streams.video:
        raise MediaError(str(p), "no video stream in the file", "check that this is a video file")
    stream = container.streams.video[0]
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return _Header(
        codec=stream.codec_context.name,
        frames=int(stream.frames) or None,
        fps=float(rate) if rate else None,
        time_base=float(stream.time_base) if stream.time_base else None,
        width=int(stream.codec_context.width),
        height=int(stream.codec_context.height),
    )


def _packet_times(container: Any, stream: Any, header: _Header) -> tuple[list[float], float | None]:
    """(each shown frame's time from its packet: pts, else dts, NaN where a packet carries neither; the end of the
    last frame, max(time + duration), None if unknown)."""
    times: list[float] = []
    tb = header.time_base
    end: float | None = None
    for packet in container.demux(stream):
        if packet.size == 0 or packet.is_discard:  # edit-list pre-roll: decoded but never shown
            continue
        ts = packet.pts if packet.pts is not None else packet.dts
        times.append(ts * tb if ts is not None and tb else float("nan"))
        if ts is not None and tb and packet.duration:
            end = max(end or 0.0, (ts + packet.duration) * tb)
    return times, end


def _decoded_times(container: Any, stream: Any, header: _Header) -> tuple[list[float], int, int, int]:
    """(times, rotation, width, height) from the decoder's own output, FFmpeg's best-effort timestamp rule."""
    stream.thread_type = "AUTO"
    stream.codec_context.thread_count = decode_threads(0, header.width, header.height)
    times: list[float] = []
    rotation, width, height = 0, header.width, header.height
    last: float | None = None
    for i, frame in enumerate(container.decode(stream)):
        if i == 0:
            rotation = int(frame.rotation or 0) % 360
            width, height = int(frame.width), int(frame.height)
        t = _frame_time(frame, last)
        times.append(t if t is not None else (last + 1 / (header.fps or 25) if last is not None else 0.0))
        last = times[-1]
    return times, rotation, width, height


def _frame_time(frame: object, last: float | None) -> float | None:
    """FFmpeg's best-effort rule: pts, falling back to dts when pts is missing or runs backwards."""
    tb = getattr(frame, "time_base", None)
    if tb is None:
        return None
    for ts in (getattr(frame, "pts", None), getattr(frame, "dts", None)):
        if ts is not None and (last is None or ts * float(tb) > last):
            return float(ts * float(tb))
    return None


def _first_frame(p: Path, width: int, height: int) -> tuple[int, int, int]:
    """(rotation, coded width, coded height) from the first decoded frame (the stream header's size as fallback)."""
    with open_container(p) as container:
        for frame in container.decode(video=0):
            return int(frame.rotation or 0) % 360, int(frame.width), int(frame.height)
    return 0, width, height


def _timeline(times: Sequence[float], header_fps: float | None, end: float | None) -> tuple[float, float, bool]:
    """(fps, duration, vfr) of the frame-index timeline for frame display times `times` (sorted, from 0) and the end
    of the last frame `end` (from 0; None if unknown)."""
    n = len(times)
    if n == 1:
        fps = header_fps or 1.0
        return fps, 1.0 / fps, False
    deltas = [b - a for a, b in itertools.pairwise(times)]
    median = statistics.median(deltas)
    if median <= 0:  # timestamps carry no information: trust the declared rate
        fps = header_fps or 25.0
        return fps, n / fps, False
    if all(abs(d - median) <= CFR_TOLERANCE * median for d in deltas):
        measured = 1.0 / median
        fps = header_fps if header_fps and abs(header_fps / measured - 1) < 0.01 else measured
        return fps, n / fps, False
    duration = end if end is not None and end > times[-1] else times[-1] + median
    return n / duration, duration, True
