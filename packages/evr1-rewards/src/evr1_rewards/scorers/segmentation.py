"""Segmentation: mask IoU between the predicted mask (polygons or COCO RLE) and the ground-truth mask.

Ground truth: `{"size": [h, w], "counts": [...] | "<compressed>"}` (COCO RLE) or `{"size": [h, w], "polygons":
[[x1, y1, x2, y2, …], …]}`. Predictions: the same shapes (size defaults to the ground truth's), `{"polygon": [[x, y],
…]}`, or SAM-style prompts `{"boxes": [x1, y1, x2, y2], "positive_points": [[x, y], …], "negative_points": [...]}`
scored 0.5·IoU(box, mask's box) + 0.25·(positive points inside the mask) + 0.25·(negative points outside) in metric
mode; in reward mode IoU(box)·(0.5 + 0.25·pos + 0.25·neg), and a box or mask less than half on the gold earns 0
(`structured.MIN_PRECISION`), so a constant prompt (whole-frame box, centre and corner points) earns nothing.
Coordinates follow extras box conventions (`box_format`, …) with the mask size as the image size.
`evr1_rewards.masks.j_and_f` gives DAVIS-style J&F for evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evr1_rewards.coords import Conventions, conventions, to_common
from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.masks import Mask, from_polygons, from_rle, iou, reward_iou
from evr1_rewards.registry import register
from evr1_rewards.scorers._common import every
from evr1_rewards.structured import as_box, as_float, find_json, iou_2d, reward_iou_2d
from evr1_rewards.truth import truth_json
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import SEGMENTATION

POS_KEYS = ("positive_points", "pos_points", "points_positive", "positive")
NEG_KEYS = ("negative_points", "neg_points", "points_negative", "negative")


def _flat(poly: object) -> list[float] | None:
    """[[x, y], …] or [x1, y1, …] → flat list of floats."""
    if not isinstance(poly, Sequence) or isinstance(poly, str):
        return None
    if poly and all(isinstance(p, Sequence) and not isinstance(p, str) and len(p) == 2 for p in poly):
        poly = [c for p in poly for c in p]
    return every([as_float(v) for v in poly])


def _polygons(obj: Mapping[str, object]) -> list[list[float]] | None:
    raw = obj.get("polygons", obj.get("polygon", obj.get("segmentation")))
    if raw is None:
        return None
    if isinstance(raw, Sequence) and raw and isinstance(raw[0], (int, float)):
        raw = [raw]
    if (
        isinstance(raw, Sequence)
        and raw
        and all(isinstance(p, Sequence) and p and isinstance(p[0], (int, float)) for p in raw)
        and all(len(p) == 2 for p in raw)
    ):
        raw = [raw]  # a single polygon given as [[x, y], …]
    return every([_flat(p) for p in raw]) if isinstance(raw, Sequence) else None


def mask_from(obj: object, size: tuple[int, int] | None) -> Mask | None:
    """A mask from RLE or polygons (raises ValueError on malformed data)."""
    if not isinstance(obj, Mapping):
        return None
    sz = obj.get("size", size)
    if not isinstance(sz, Sequence) or len(sz) != 2:
        return None
    h, w = sz
    if "counts" in obj:
        counts = obj["counts"]
        if not isinstance(counts, (str, list)):
            raise ValueError("RLE counts must be a list or a compressed string")
        return from_rle(h, w, counts)
    polys = _polygons(obj)
    if polys is not None:
        return from_polygons(h, w, polys)
    return None


def _points(obj: Mapping[str, object], keys: tuple[str, ...]) -> list[tuple[float, float]] | None:
    for k in keys:
        if k in obj:
            raw = obj[k]
            if not isinstance(raw, Sequence):
                return []
            pairs = [(as_float(p[0]), as_float(p[1])) for p in raw if isinstance(p, Sequence) and len(p) == 2]
            return [(x, y) for x, y in pairs if x is not None and y is not None]
    return None


@register(SEGMENTATION)
class Segmentation:
    """Mask IoU (polygons / RLE), or box + point prompts scored against the mask."""

    name = "segmentation"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> tuple[Mask, Conventions]:
        obj = truth_json(ground_truth)
        try:
            mask = mask_from(obj, None)
        except ValueError as e:
            raise GroundTruthError(f"segmentation ground truth is malformed: {e}") from None
        if mask is None:
            raise GroundTruthError(
                'segmentation ground truth must be {"size": [h, w], "counts": ...} (COCO RLE) or {"size": [h, w], '
                f'"polygons": [...]}}, got {str(ground_truth)[:120]!r}'
            )
        return mask, conventions({"image_size": [mask.w, mask.h], **extras})

    def score(self, response: Response, truth: tuple[Mask, Conventions], ctx: Context) -> Outcome:
        gold, conv = truth
        pred_conv, gt_conv, size = conv
        reward = ctx.mode == "reward"
        for i, cand in enumerate(response.candidates()):
            obj = find_json(cand.text, want=dict)
            if obj is None:
                arr = find_json(cand.text, want=list)
                obj = {"polygon": arr} if arr is not None else None
            if not isinstance(obj, Mapping):  # None, or not an object (find_json returns what `want` asks)
                continue
            if pred_conv != gt_conv:
                obj = _convert(obj, pred_conv, gt_conv, size)
            try:
                mask = mask_from(obj, (gold.h, gold.w))  # (the gold's size unless the answer gives one)
            except (ValueError, TypeError):
                return Outcome(0.0, False, {"source": cand.source, "malformed": True})
            if mask is not None:
                if (mask.h, mask.w) != (gold.h, gold.w):
                    return Outcome(0.0, False, {"source": cand.source, "size_mismatch": True})
                value = (reward_iou if reward else iou)(mask, gold) if gold.bits or mask.bits else 1.0
                return Outcome(value, i == 0, {"source": cand.source, "iou": value})
            box = as_box(obj)
            if box is None:
                continue
            gbox = gold.bbox()
            box_iou = ((reward_iou_2d if reward else iou_2d)(box, gbox)) if gbox else 0.0
            pos, neg = _points(obj, POS_KEYS), _points(obj, NEG_KEYS)
            pos_s = sum(gold.contains(x, y) for x, y in pos) / len(pos) if pos else 0.0
            neg_s = sum(not gold.contains(x, y) for x, y in neg) / len(neg) if neg else 0.0
            if reward:  # points refine a box: credited in proportion to the box's IoU, never on their own
                acc = box_iou * (0.5 + 0.25 * pos_s + 0.25 * neg_s)
            else:
                acc = 0.5 * box_iou + 0.25 * pos_s + 0.25 * neg_s
            return Outcome(acc, i == 0, {"source": cand.source, "box_iou": box_iou, "pos": pos_s, "neg": neg_s})
        return Outcome(0.0, False, {"source": "none"})


def _convert(obj: Mapping[str, object], conv: str, target: str, size: tuple[float, float] | None) -> dict[str, object]:
    """Rescale prompt/polygon coordinates from the prediction's convention to the mask's pixels."""
    out = dict(obj)

    def point(x: float, y: float) -> list[float]:
        return list(to_common((x, y, x, y), conv, target, size)[:2])

    box = as_box(obj)
    if box is not None:
        out["boxes"] = list(to_common(box, conv, target, size))
        for k in ("bbox_2d", "bbox", "box"):  # read before "boxes" (as_box): none may shadow the converted box
            out.pop(k, None)
    for keys in (POS_KEYS, NEG_KEYS):
        pts = _points(obj, keys)
        if pts:
            for k in keys:
                out.pop(k, None)
            out[keys[0]] = [point(x, y) for x, y in pts]
    polys = _polygons(obj)
    if polys:
        for k in ("polygons", "polygon", "segmentation"):
            out.pop(k, None)
        out["polygons"] = [[c for j in range(0, len(p) - 1, 2) for c in point(p[j], p[j + 1])] for p in polys]
    return out
