"""Boxes keyed by frame/second, shared by tracking and spatio-temporal grounding."""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.coords import Box, Conventions, to_common
from evr1_rewards.structured import MIN_PRECISION, as_box, frame_key, iou_2d

MAX_FRAMES = 100_000
"""A track with more keys than this is not an answer (it would only cost time)."""


def boxes_by_frame(v: object) -> dict[str, Box | None] | None:
    """{"<second>": [x1, y1, x2, y2], …} with keys normalised ("9" == "9.0"); unreadable boxes kept as None (IoU 0).

    Per frame, the common JSON form — a key of plain digits and a list of four integers — is read inline (the same
    result as `frame_key` and `as_box`, which read every other form): tracks have tens of frames per answer."""
    if isinstance(v, (dict, Mapping)) and "boxes" in v:
        v = v["boxes"]
    if not isinstance(v, (dict, Mapping)) or len(v) > MAX_FRAMES:
        return None
    out: dict[str, Box | None] = {}
    for k, b in v.items():
        if type(k) is str and k.isdigit() and k.isascii() and len(k) < 16 and (k[0] != "0" or len(k) == 1):
            key = k
        else:
            canonical = frame_key(k)
            if canonical is None:
                return None
            key = canonical
        if type(b) is list and len(b) == 4:
            x1, y1, x2, y2 = b
            if type(x1) is int and type(y1) is int and type(x2) is int and type(y2) is int:
                try:
                    fx1, fy1, fx2, fy2 = float(x1), float(y1), float(x2), float(y2)
                except OverflowError:  # beyond float range: not a box (as `as_box` says)
                    out[key] = None
                    continue
                out[key] = (fx1, fy1, fx2, fy2) if fx2 > fx1 and fy2 > fy1 else None
                continue
        box = as_box(b)
        out[key] = box if box is not None and box[2] > box[0] and box[3] > box[1] else None
    return out


def union_mean_iou(
    pred: Mapping[str, Box | None], gold: Mapping[str, Box], conv: Conventions, *, gated: bool = False
) -> tuple[float, int, int]:
    """(Σ over shared keys of box IoU / |pred keys ∪ gold keys|, #shared, #union): missing and extra frames score 0.
    `gated` (reward mode): each frame's IoU is `reward_iou_2d`'s (a box mostly off the gold earns 0). The union is
    counted as |pred| + |gold| − #shared (keys are unique on each side), without building it."""
    gate = MIN_PRECISION if gated else 0.0
    pred_conv, gt_conv, size = conv
    total = 0.0
    shared = 0
    same = pred_conv == gt_conv
    for k, g in gold.items():
        if k in pred:
            shared += 1
            p = pred[k]
            if p is not None:
                total += iou_2d(p if same else to_common(p, pred_conv, gt_conv, size), g, gate)
    union = len(pred) + len(gold) - shared
    if union == 0:
        return 0.0, 0, 0
    return total / union, shared, union
