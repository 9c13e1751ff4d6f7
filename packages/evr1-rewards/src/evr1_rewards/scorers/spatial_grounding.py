"""Spatial grounding: IoU of one [x1, y1, x2, y2] box, in the coordinate convention given by extras (see coords).
Reward mode: a box less than half on the gold box earns 0 (`structured.MIN_PRECISION`: no credit for the whole frame)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from evr1_rewards.coords import Box, Conventions, conventions, to_common
from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.registry import register
from evr1_rewards.structured import as_box, box_from_prose, find_json, iou_2d, reward_iou_2d
from evr1_rewards.truth import truth_json
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import SPATIAL_GROUNDING


def answer_box(text: str) -> Box | None:
    """A box from `{"boxes": [...]}`, `{"bbox_2d": [...]}`, `[{"bbox_2d": [...]}]`, `[x1, y1, x2, y2]` or prose."""
    for want in (dict, list):
        found = find_json(text, want=want)
        if found is not None and (box := as_box(found)) is not None:
            return box
    return box_from_prose(text)


def valid_box(box: Box) -> bool:
    return box[2] > box[0] and box[3] > box[1]


SpatialTruth = tuple[Box, Conventions]
"""(box, box conventions)."""


@register(SPATIAL_GROUNDING, answer_format='JSON {"boxes": [x1, y1, x2, y2]}')
class SpatialGrounding:
    """Box IoU; degenerate or inverted predicted boxes score 0; conventions converted via extras['image_size']."""

    name = "spatial_grounding"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> SpatialTruth:
        box = as_box(truth_json(ground_truth))
        if box is None:
            raise GroundTruthError(
                f'spatial ground truth must look like {{"boxes": [x1, y1, x2, y2]}}, got {str(ground_truth)[:120]!r}'
            )
        if not valid_box(box):
            raise GroundTruthError(f"spatial ground truth box {list(box)} has no area (need x2 > x1 and y2 > y1)")
        return box, conventions(extras)

    def format_truth(self, truth: SpatialTruth) -> str:
        return json.dumps({"boxes": list(truth[0])})

    def score(self, response: Response, truth: SpatialTruth, ctx: Context) -> Outcome:
        gold, (pred_conv, gt_conv, size) = truth
        for i, cand in enumerate(response.candidates()):
            box = answer_box(cand.text)
            if box is None:
                continue
            if not valid_box(box):
                return Outcome(0.0, False, {"source": cand.source, "degenerate": True})
            box = to_common(box, pred_conv, gt_conv, size)
            value = (reward_iou_2d if ctx.mode == "reward" else iou_2d)(box, gold)
            return Outcome(value, i == 0, {"source": cand.source, "pred": list(box)})
        return Outcome(0.0, False, {"source": "none"})
