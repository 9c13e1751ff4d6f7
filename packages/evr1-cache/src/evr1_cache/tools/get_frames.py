"""`get_frames(start, end[, fps | n])`: the frames of a time window at a higher rate than the overview, from the cache.

The window stream (`ToolConfig.frames_spec`: the whole video at `ToolConfig.fps`) is one cache entry per video,
built on the first call and reused by every later call, episode and engine. A call selects the stream's frames that
lie in the window and samples `n` (or `fps`) of them with the spec's own rule (`sample_frame_indices`: even counts,
`linspace` rounding), so a window is sampled exactly as a video of that length would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from evr1_cache.spec import SamplingSpec, sample_frame_indices
from evr1_cache.tools.base import ToolContext, ToolError, ToolMedia, ToolResult
from evr1_cache.tools.registry import register_tool

NAME = "get_frames"
#: Timestamps within this many seconds of the window's ends are inside it (float time arithmetic).
EPS = 1e-6

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "start": {"type": "number", "minimum": 0, "description": "window start, seconds from the video's start"},
        "end": {"type": "number", "minimum": 0, "description": "window end, seconds (after start)"},
        "fps": {"type": "number", "minimum": 0, "description": "frames per second to sample (optional)"},
        "n": {"type": "integer", "minimum": 2, "description": "number of frames to sample (optional; not with fps)"},
    },
    "required": ["start", "end"],
    "additionalProperties": False,
}


def window_positions(timestamps: tuple[float, ...], start: float, end: float) -> list[int]:
    """Positions of the stream frames shown within `[start, end]` seconds."""
    return [i for i, t in enumerate(timestamps) if start - EPS <= t <= end + EPS]


def _window_spec(args: Mapping[str, Any], rate: float, limit: int) -> SamplingSpec:
    fps, n = args.get("fps"), args.get("n")
    if fps is not None and n is not None:
        raise ToolError("give either fps or n, not both")
    if n is not None:
        if n > limit:
            raise ToolError(f"n={n} is above the {limit} frames a call may return; ask for n <= {limit}")
        return SamplingSpec(nframes=int(n), fps=None)
    if fps is not None and (fps <= 0 or fps > rate + EPS):
        raise ToolError(f"fps must be in (0, {rate:g}] (the rate frames are served at), got {fps:g}")
    return SamplingSpec(fps=float(fps or rate), min_frames=2, max_frames=max(2, limit))


@register_tool(
    NAME,
    "Return the video's frames between two times (seconds) at a higher frame rate than the overview, with their "
    "timestamps. Use it to look closely at a short moment.",
    PARAMETERS,
)
def get_frames(ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
    """The frames of `[start, end]` (see the module doc); ToolError for a window outside the video or over budget."""
    start, end = float(args["start"]), float(args["end"])
    stream, meta = ctx.frames()
    duration = meta.duration
    if not start < end:
        raise ToolError(f"end ({end:g}) must be after start ({start:g})")
    if end > duration + EPS:
        raise ToolError(f"the window {start:g}-{end:g} s ends after the video ({duration:.2f} s long)")
    stamps = meta.timestamps
    inside = window_positions(stamps, start, end)
    rate = len(stamps) / duration if duration > 0 else 1.0
    if len(inside) < 2:
        raise ToolError(
            f"the window {start:g}-{end:g} s holds {len(inside)} frame(s) (frames are served every "
            f"{1 / rate:.2f} s); widen it"
        )
    spec = _window_spec(args, rate, ctx.budget.frames_per_call)
    try:
        chosen = sample_frame_indices(len(inside), rate, spec)
    except ValueError:
        raise ToolError(
            f"cannot sample {args.get('n')} frames from the {len(inside)} in {start:g}-{end:g} s; ask for fewer"
        ) from None
    height, width = int(stream.shape[1]), int(stream.shape[2])
    ctx.charge(len(chosen) * height * width, f"{len(chosen)} frames of {width}x{height}")
    positions = [inside[i] for i in chosen]
    absolute = tuple(meta.frames_indices[p] for p in positions)
    first, last = meta.frames_indices[inside[0]], meta.frames_indices[inside[-1]]
    clip = replace(  # the window as a video of its own: a processor derives the clip's true rate from it
        meta,
        total_num_frames=last - first + 1,
        duration=(last - first + 1) / meta.fps,
        frames_indices=tuple(i - first for i in absolute),
    )
    times = tuple(i / meta.fps for i in absolute)
    text = f"{len(times)} frames of {start:g}-{end:g} s at " + ", ".join(f"{t:.2f}" for t in times) + " s"
    media = ToolMedia("video", stream[positions], times, clip, stream="frames", positions=tuple(positions))
    return ToolResult(NAME, dict(args), text, (media,))
