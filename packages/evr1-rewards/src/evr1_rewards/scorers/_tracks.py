"""Boxes keyed by frame/second, shared by tracking and spatio-temporal grounding."""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.coords import Box, Conventions, to_common
from evr1_rewards.structured import as_box, frame_key, iou_2d, reward_iou_2d

MAX_FRAMES = 100_000
"""A track with more keys than this is not an answer (it would only cost time)."""


def boxes_by_frame(v: object) -> dict[str, Box | None] | None:
    """{"<second>": [x1, y1, x2, y2], …} with keys normalised ("9" == "9.0"); unreadable boxes kept as None (IoU 0)."""
    if isinstance(v, (dict, Mapping)) and "boxes" in v:
        v = v["boxes"]
    if not isinstance(v, (dict, Mapping)) or len(v) > MAX_FRAMES:
        return None
    out: dict[str, Box | None] = {}
    for k, b in v.items():
        key = frame_key(k)
        if key is None:
            return None
        box = as_box(b)
        out[key] = box if box is not None and box[2] > box[0] and box[3] > box[1] else None
    return out


def union_mean_iou(
    pred: Mapping[str, Box | None], gold: Mapping[str, Box], conv: Conventions, *, gated: bool = False
) -> tuple[float, int, int]:
    """(Σ over shared keys of box IoU / |pred keys ∪ gold keys|, #shared, #union): missing and extra frames score 0.
    `gated` (reward mode): each frame's IoU is `reward_iou_2d` (a box mostly off the gold earns 0)."""
    box_iou = reward_iou_2d if gated else iou_2d
    pred_conv, gt_conv, size = conv
    union = len(pred.keys() | gold.keys())
    if union == 0:
        return 0.0, 0, 0
    total = 0.0
    shared = 0
    same = pred_conv == gt_conv
    for k, g in gold.items():
        if k not in pred:
            continue
        p = pred[k]
        shared += 1
        if p is not None:
            total += box_iou(p if same else to_common(p, pred_conv, gt_conv, size), g)
    return total / union, shared, union
