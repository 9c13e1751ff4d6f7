"""On-the-fly decoding with a `SamplingSpec`: the path a cache miss falls back to, and what `build` stores.

Both go through `decode_video`, so a cached entry and a fresh decode of the same file with the same spec hold the same
frames and the same `VideoMeta`.
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING

from evr1_cache.budget import check_video
from evr1_cache.decoders import Decoder, get_decoder
from evr1_cache.errors import DecodeMismatch, MediaError
from evr1_cache.probing import VideoInfo, probe
from evr1_cache.resampling import ResizeStream
from evr1_cache.spec import SamplingSpec, VideoMeta, resized_hw, sample_frame_indices

if TYPE_CHECKING:
    import numpy as np


def plan(info: VideoInfo, spec: SamplingSpec) -> tuple[tuple[int, ...], int, int]:
    """(frame indices, resized height, resized width) for a probed video; MediaError if the spec cannot apply."""
    try:
        indices = tuple(sample_frame_indices(info.total_num_frames, info.fps, spec))
    except ValueError as exc:
        raise MediaError(
            info.path,
            f"cannot sample frames: {exc} (video has {info.total_num_frames} frame(s) at {info.fps:.3f} fps)",
            "drop this video or lower --min-frames",
        ) from exc
    try:
        h, w = resized_hw(info.height, info.width, len(indices), spec)
    except ValueError as exc:
        raise MediaError(
            info.path, f"cannot resize {info.width}x{info.height}: {exc}", "crop or pad the video"
        ) from exc
    return indices, h, w


def decode_video(
    path: str | os.PathLike[str],
    spec: SamplingSpec,
    decoder: str = "auto",
    *,
    threads: int = 0,
    info: VideoInfo | None = None,
) -> tuple[np.ndarray, VideoMeta]:
    """Decode `path` sequentially, keep the spec's frames, resize: (uint8 `[T, H, W, 3]`, VideoMeta).

    If the decoder sees a different frame count than the packet probe (a damaged or lying stream), the video is
    re-probed by decoding and sampled again from the true count; a second disagreement is a MediaError.
    """
    dec = get_decoder(decoder)
    info = info or probe(path)
    for attempt in range(2):
        indices, h, w = plan(info, spec)
        positions = info.positions(indices, spec.timeline)
        distinct = sorted(set(positions))
        check_video(info.path, info.width, info.height, len(distinct), h, w)  # before a frame is allocated
        with ResizeStream(len(distinct), h, w, spec.resize, threads=threads) as stream:
            try:
                if _takes_sink(dec):
                    dec.decode(info, positions, threads=threads, sink=stream.add)  # resized while decoding goes on
                else:  # a plugin decoder written before sinks: its frames are resized once it has returned
                    frames = dec.decode(info, positions, threads=threads)
                    for i, (pos, frame) in enumerate(zip(positions, frames, strict=True)):
                        if i == 0 or pos != positions[i - 1]:  # positions are sorted: one frame per distinct one
                            stream.add(frame)
            except DecodeMismatch as exc:
                if attempt == 1:
                    raise MediaError(str(path), f"frame count unstable: {exc}", "re-encode the file") from exc
                info = probe(path, exact=True)
                continue
            except MediaError:
                raise
            except Exception as exc:
                msg = f"decoding failed ({type(exc).__name__}: {exc})"
                raise MediaError(str(path), msg, "re-encode the file") from exc
            resized = stream.result()
        if distinct != positions:  # a variable-rate video shows one frame at several instants
            at = {p: i for i, p in enumerate(distinct)}
            resized = resized[[at[p] for p in positions]]
        return resized, make_meta(info, indices, h, w, dec.name, spec)
    raise AssertionError("unreachable")


def _takes_sink(dec: Decoder) -> bool:
    """Whether `dec.decode` accepts the `sink` keyword (every built-in decoder does; older plugins may not)."""
    try:
        params = inspect.signature(dec.decode).parameters
    except (TypeError, ValueError):  # no introspectable signature: assume the current protocol
        return True
    return "sink" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def make_meta(
    info: VideoInfo, indices: tuple[int, ...], height: int, width: int, backend: str, spec: SamplingSpec
) -> VideoMeta:
    """The `VideoMeta` of a decoded video: measured timeline, chosen indices, resized size, source identity."""
    st = os.stat(info.path)
    return VideoMeta(
        total_num_frames=info.total_num_frames,
        fps=info.fps,
        duration=info.duration,
        width=info.width,
        height=info.height,
        frames_indices=indices,
        video_backend=backend,
        resized_height=height,
        resized_width=width,
        spec_key=spec.key(),
        source=info.path,
        source_size=st.st_size,
        source_mtime_ns=st.st_mtime_ns,
    )
