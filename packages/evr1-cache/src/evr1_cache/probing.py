"""What a video really holds: frame count, frame times, rate, size and rotation, measured rather than read from headers.

Why: headers lie (a file claiming 444 frames at 15 fps can hold 68 frames spread over 30 s), streams start at non-zero
times and phones store rotation as metadata. Frame selection needs the true count and times *before* decoding, so
`probe` demuxes every packet of the video stream (cheap: no decoding) and takes each frame's time from its packet
(pts, else dts), sorted into display order and counted from the first frame. A decoder that then sees a different
number of frames raises `DecodeMismatch`, and `probe(exact=True)` measures the times from the decoder's own output
(FFmpeg's best-effort rule: pts, falling back to dts when pts run backwards).

The timeline: for a constant-frame-rate stream, frame index i is the i-th frame and fps is the stream's rate. For a
variable-frame-rate stream, fps = frames / duration and index i names the instant i / fps; the frame shown there is the
last one whose time is <= i / fps (what a player shows). Either way `frames_indices / fps` are the true instants.
"""

from __future__ import annotations

import bisect
import itertools
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evr1_cache.errors import MediaError

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

    def positions(self, indices: Sequence[int]) -> list[int]:
        """Decode-order frame positions shown at the timeline `indices` (identity for constant-rate video)."""
        n = len(self.frame_times)
        if not self.vfr:
            return [min(max(int(i), 0), n - 1) for i in indices]
        eps = min(1e-3, 0.25 / self.fps)
        return [max(0, bisect.bisect_right(self.frame_times, i / self.fps + eps) - 1) for i in indices]

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly summary (without the per-frame times) for `evr1-cache probe`."""
        return {
            "path": self.path,
            "width": self.width,
            "height": self.height,
            "rotation": self.rotation,
            "fps": self.fps,
            "total_num_frames": self.total_num_frames,
            "duration": self.duration,
            "decoded_frames": len(self.frame_times),
            "vfr": self.vfr,
            "codec": self.codec,
            "header_frames": self.header_frames,
            "header_fps": self.header_fps,
            "header_mismatch": self.header_mismatch,
            "exact": self.exact,
        }


def check_readable(path: str | os.PathLike[str]) -> Path:
    """Raise MediaError for the cheap-to-detect bad inputs: missing, not a file, empty, unreadable."""
    p = Path(path)
    if not p.exists():
        raise MediaError(str(p), "file not found", "check the path and --media-root")
    if not p.is_file():
        raise MediaError(str(p), "not a regular file (a directory or device)", "point the dataset at a media file")
    size = p.stat().st_size
    if size == 0:
        raise MediaError(str(p), "file is empty (0 bytes)", "re-download or re-encode the file")
    try:
        with p.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise MediaError(str(p), f"cannot be read ({exc.strerror or exc})", "fix the file permissions") from exc
    return p


def probe(path: str | os.PathLike[str], *, exact: bool = False) -> VideoInfo:
    """Measure `path` (see module docstring); `exact=True` decodes every frame to time it (slower, authoritative)."""
    import av

    p = check_readable(path)
    try:
        with av.open(str(p)) as container:
            if not container.streams.video:
                raise MediaError(str(p), "no video stream in the file", "check that this is a video file")
            stream = container.streams.video[0]
            codec = stream.codec_context.name
            header_frames = int(stream.frames) or None
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            header_fps = float(rate) if rate else None
            tb = float(stream.time_base) if stream.time_base else None
            cw, ch = int(stream.codec_context.width), int(stream.codec_context.height)
            times: list[float] = []
            rotation = 0
            if exact:
                stream.thread_type = "AUTO"
                last: float | None = None
                for i, frame in enumerate(container.decode(stream)):
                    if i == 0:
                        rotation = int(frame.rotation or 0) % 360
                        cw, ch = int(frame.width), int(frame.height)
                    t = _frame_time(frame, last)
                    times.append(t if t is not None else (last + 1 / (header_fps or 25) if last is not None else 0.0))
                    last = times[-1]
            else:
                for packet in container.demux(stream):
                    if packet.size == 0 or packet.is_discard:  # edit-list pre-roll: decoded but never shown
                        continue
                    ts = packet.pts if packet.pts is not None else packet.dts
                    times.append(ts * tb if ts is not None and tb else float("nan"))
        if not exact:
            rotation, cw, ch = _first_frame(p, cw, ch)
    except MediaError:
        raise
    except Exception as exc:
        raise MediaError(str(p), f"not a readable video ({type(exc).__name__}: {exc})", "re-encode the file") from exc
    if not times:
        raise MediaError(str(p), "the video stream holds no frames", "re-encode or drop the file")
    if any(t != t for t in times):  # nan: a stream without timestamps -> the declared rate
        times = [i / (header_fps or 25.0) for i in range(len(times))]
    times.sort()
    t0 = times[0]
    rel = tuple(t - t0 for t in times)
    fps, duration, vfr = _timeline(rel, header_fps)
    if cw <= 0 or ch <= 0:
        raise MediaError(str(p), f"invalid frame size {cw}x{ch}", "re-encode the file")
    w, h = (ch, cw) if rotation in (90, 270) else (cw, ch)
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
        codec=codec,
        header_frames=header_frames,
        header_fps=header_fps,
        exact=exact,
    )


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
    import av

    with av.open(str(p)) as container:
        for frame in container.decode(video=0):
            return int(frame.rotation or 0) % 360, int(frame.width), int(frame.height)
    return 0, width, height


def _timeline(times: Sequence[float], header_fps: float | None) -> tuple[float, float, bool]:
    """(fps, duration, vfr) of the frame-index timeline for frame display times `times` (sorted, from 0)."""
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
    duration = times[-1] + median
    return n / duration, duration, True
