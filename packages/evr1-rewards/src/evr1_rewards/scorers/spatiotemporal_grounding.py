"""Spatio-temporal grounding: 0.5·tIoU + 0.5·vIoU, with the true vIoU.

vIoU = (1 / |T_pred ∪ T_gt|) · Σ_{t ∈ T_pred ∩ T_gt} IoU(b̂_t, b_t) over the frame keys of the `boxes` dicts, so
missing and extra frames cost (EasyVideoR1 averages over the intersection: one correct box earns full credit).
A ground truth without boxes is scored by tIoU alone. Reversed spans follow temporal grounding (0 / swapped).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import cast

from evr1_rewards.coords import Box, Conventions, conventions
from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.registry import register
from evr1_rewards.scorers._tracks import boxes_by_frame, union_mean_iou
from evr1_rewards.scorers.temporal_grounding import Span, order_span, span_of
from evr1_rewards.structured import find_json, iou_1d, reward_iou_1d, span_from_prose
from evr1_rewards.truth import truth_json
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import SPATIOTEMPORAL_GROUNDING

T_WEIGHT = 0.5


STTruth = tuple[Span, dict[str, Box], Conventions]
"""(time span, ground-truth boxes by frame key, box conventions)."""


@register(
    SPATIOTEMPORAL_GROUNDING,
    answer_format='JSON {"time": [s, e], "boxes": {"<second>": [x1, y1, x2, y2], ...}}',
)
class SpatioTemporalGrounding:
    """0.5·tIoU + 0.5·vIoU (union denominator: missing and extra frames cost)."""

    name = "spatiotemporal_grounding"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> STTruth:
        obj = truth_json(ground_truth)
        span = span_of(obj) if isinstance(obj, (dict, Mapping)) else None
        if not isinstance(obj, (dict, Mapping)) or span is None or span[0] > span[1] or span[0] < 0:
            raise GroundTruthError(
                f'spatio-temporal ground truth must look like {{"time": [s, e], "boxes": {{"<second>": [x1, y1, x2, y2]}}}} '
                f"with s <= e, got {str(ground_truth)[:120]!r}"
            )
        boxes = boxes_by_frame(obj.get("boxes") or {})
        if boxes is None:
            raise GroundTruthError(f"spatio-temporal ground truth has unreadable boxes: {str(ground_truth)[:120]!r}")
        if None in boxes.values():
            bad = next(k for k, b in boxes.items() if b is None)
            raise GroundTruthError(f"spatio-temporal ground truth has an unreadable box at {bad!r}")
        return span, cast(dict[str, Box], boxes), conventions(extras)

    def format_truth(self, truth: STTruth) -> str:
        span, boxes, _ = truth
        return json.dumps({"time": list(span), "boxes": {k: list(b) for k, b in boxes.items()}})

    def score(self, response: Response, truth: STTruth, ctx: Context) -> Outcome:
        gold_span, gold_boxes, conv = truth
        for i, cand in enumerate(response.candidates()):
            obj = find_json(cand.text, want=dict)
            span = span_of(obj) if obj is not None else span_from_prose(cand.text)
            if span is None:
                continue
            ordered = order_span(span, ctx.mode)
            if ordered is None:
                return Outcome(0.0, False, {"source": cand.source, "reversed": True})
            tiou = (reward_iou_1d if ctx.mode == "reward" else iou_1d)(ordered, gold_span)
            if not gold_boxes:
                return Outcome(tiou, i == 0, {"source": cand.source, "tiou": tiou})
            pred_boxes = (boxes_by_frame(obj.get("boxes", {})) if isinstance(obj, (dict, Mapping)) else None) or {}
            viou, shared, _union = union_mean_iou(pred_boxes, gold_boxes, conv, gated=ctx.mode == "reward")
            acc = T_WEIGHT * tiou + (1.0 - T_WEIGHT) * viou
            parsed = i == 0 and bool(pred_boxes)
            return Outcome(acc, parsed, {"source": cand.source, "tiou": tiou, "viou": viou, "shared": shared})
        return Outcome(0.0, False, {"source": "none"})
