"""Box coordinate conventions: absolute pixels (Qwen2.5-VL), 0–1000 (Qwen3-VL), 0–1 (relative).

extras: `box_format` (both sides) or `pred_box_format` / `gt_box_format` ∈ {"absolute", "norm1000", "relative"}
(aliases: "abs"/"pixels", "qwen3"/"0-1000", "norm1"/"0-1"); `image_size` = [width, height] when they differ.
Boxes are compared in absolute pixels; when both sides use the same convention no size is needed (IoU is
invariant to a per-axis scale shared by both boxes).
"""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError

Box = tuple[float, float, float, float]
Conventions = tuple[str, str, tuple[float, float] | None]
"""(prediction convention, ground-truth convention, image size [w, h] or None)."""

_ALIASES = {
    "absolute": "absolute", "abs": "absolute", "pixels": "absolute", "pixel": "absolute", "qwen2.5": "absolute",
    "qwen2_5": "absolute", "norm1000": "norm1000", "qwen3": "norm1000", "0-1000": "norm1000", "1000": "norm1000",
    "relative": "relative", "norm1": "relative", "0-1": "relative", "normalized": "relative",
}  # fmt: skip
_SCALE = {"norm1000": 1000.0, "relative": 1.0}
_DEFAULT: Conventions = ("absolute", "absolute", None)
"""No extras: both sides in absolute pixels, no size needed."""


def _convention(extras: Mapping[str, object], key: str) -> str:
    raw = next((v for v in (extras.get(key), extras.get("box_format")) if v is not None), "absolute")
    conv = _ALIASES.get(str(raw).strip().lower())
    if conv is None:
        raise GroundTruthError(f"extras[{key!r}] = {raw!r} is not a box convention; use one of {sorted(set(_ALIASES))}")
    return conv


def conventions(extras: Mapping[str, object]) -> Conventions:
    """(pred convention, gt convention, image size or None); raises if a conversion needs a missing size."""
    if not extras:
        return _DEFAULT
    pred, gt = _convention(extras, "pred_box_format"), _convention(extras, "gt_box_format")
    size = extras.get("image_size")
    if size is None and extras.get("width") is not None and extras.get("height") is not None:
        size = (extras["width"], extras["height"])
    wh: tuple[float, float] | None = None
    if size is not None:
        try:
            if not isinstance(size, (list, tuple)):
                raise TypeError
            w, h = (float(x) for x in size)
        except (TypeError, ValueError):
            raise GroundTruthError(f"extras['image_size'] must be [width, height], got {size!r}") from None
        if not (w > 0 and h > 0):
            raise GroundTruthError(f"extras['image_size'] must be positive, got {size!r}")
        wh = (w, h)
    if pred != gt and wh is None:
        raise GroundTruthError(
            f"predicted boxes are {pred!r} but ground-truth boxes are {gt!r}: pass extras['image_size'] = [w, h]"
        )
    return pred, gt, wh


def to_common(box: Box, conv: str, target: str, size: tuple[float, float] | None) -> Box:
    """Convert `box` from `conv` to `target` (identity when equal)."""
    if conv == target:
        return box
    assert size is not None
    w, h = size
    if conv != "absolute":
        s = _SCALE[conv]
        box = (box[0] / s * w, box[1] / s * h, box[2] / s * w, box[3] / s * h)
    if target != "absolute":
        s = _SCALE[target]
        box = (box[0] / w * s, box[1] / h * s, box[2] / w * s, box[3] / h * s)
    return box
