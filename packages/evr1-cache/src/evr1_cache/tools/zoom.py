"""`zoom(time, box)`: a crop of the frame at `time`, at a higher resolution than the overview's pixel budget.

Crops come from the detail stream (`ToolConfig.detail_spec`: the video at `zoom_fps` with the largest per-frame
budget), one cache entry per video built on first use. The frame nearest `time` is cropped to `box` (fractions of
the frame: `[x0, y0, x1, y1]`, so a box means the same region at any resolution) and resized by the image rule
(`resized_image_hw`, Pillow's bicubic as qwen-vl-utils' `fetch_image`) into the zoom budget (`ToolConfig.zoom_spec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evr1_cache.spec import resized_image_hw
from evr1_cache.tools.base import ToolContext, ToolError, ToolMedia, ToolResult
from evr1_cache.tools.registry import register_tool

NAME = "zoom"

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "time": {"type": "number", "minimum": 0, "description": "seconds from the video's start"},
        "box": {
            "type": "array",
            "items": {"type": "number", "minimum": 0, "maximum": 1},
            "minItems": 4,
            "maxItems": 4,
            "description": "[x0, y0, x1, y1] as fractions of the frame's width and height (0..1)",
        },
    },
    "required": ["time", "box"],
    "additionalProperties": False,
}


def crop_region(box: list[float], height: int, width: int, min_side: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) pixel bounds of the fractional `box` in a `height` x `width` frame."""
    x0, y0, x1, y1 = (float(v) for v in box)
    if not (x0 < x1 and y0 < y1):
        raise ToolError(f"box {box} must have x0 < x1 and y0 < y1 (fractions of the frame)")
    top, bottom = round(y0 * height), round(y1 * height)
    left, right = round(x0 * width), round(x1 * width)
    if bottom - top < min_side or right - left < min_side:
        raise ToolError(
            f"box {box} is smaller than {min_side} pixels on a side of the {width}x{height} frame; widen it"
        )
    return top, bottom, left, right


@register_tool(
    NAME,
    "Return a high-resolution crop of the frame at a time (seconds); box = [x0, y0, x1, y1] as fractions of the "
    "frame. Use it to read small details.",
    PARAMETERS,
)
def zoom(ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
    """The crop (see the module doc); ToolError for a time after the video, a degenerate box or an empty budget."""
    from evr1_cache.resampling import resample

    time = float(args["time"])
    duration = ctx.meta().duration
    if time > duration:
        raise ToolError(f"time {time:g} s is after the video's end ({duration:.2f} s)")
    frames, meta = ctx.detail()
    stamps = meta.timestamps
    nearest = min(range(len(stamps)), key=lambda i: abs(stamps[i] - time))
    height, width = int(frames.shape[1]), int(frames.shape[2])
    image_spec = ctx.config.zoom_spec()
    factor = image_spec.size_factor
    assert factor is not None  # resolved by ImageSpec
    top, bottom, left, right = crop_region(list(args["box"]), height, width, min_side=max(4, factor // 4))
    try:
        out_h, out_w = resized_image_hw(bottom - top, right - left, image_spec)
    except ValueError as exc:
        raise ToolError(f"cannot zoom into box {list(args['box'])}: {exc}") from None
    ctx.charge(out_h * out_w, f"a {out_w}x{out_h} crop")
    crop = resample(frames[nearest : nearest + 1, top:bottom, left:right], out_h, out_w, image_spec.resize)[0]
    text = f"crop {list(args['box'])} of the frame at {stamps[nearest]:.2f} s, {out_w}x{out_h} pixels"
    media = ToolMedia("image", crop, (stamps[nearest],), stream="detail", positions=(nearest,))
    return ToolResult(NAME, dict(args), text, (media,))
