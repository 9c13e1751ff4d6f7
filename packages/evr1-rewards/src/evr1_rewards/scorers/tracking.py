"""Tracking: mean box IoU over the union of ground-truth and predicted frame keys.

Missing frames and spurious frames score 0 (EasyVideoR1 averages over the intersection only, so one easy frame
earns full credit). Keys are normalised: "9" == "9.0" == 9.
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
from evr1_rewards.structured import find_json
from evr1_rewards.truth import truth_json
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import TRACKING

TrackTruth = tuple[dict[str, Box], Conventions]


@register(TRACKING, answer_format='JSON {"boxes": {"<second>": [x1, y1, x2, y2], ...}}')
class Tracking:
    """Mean IoU over the union of frame keys (missing/spurious frames = 0)."""

    name = "tracking"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> TrackTruth:
        track = boxes_by_frame(truth_json(ground_truth))
        if not track:
            raise GroundTruthError(
                f'tracking ground truth must look like {{"boxes": {{"<second>": [x1, y1, x2, y2]}}}}, got {str(ground_truth)[:120]!r}'
            )
        if None in track.values():
            bad = [k for k, b in track.items() if b is None]
            raise GroundTruthError(f"tracking ground truth has invalid or empty boxes at keys {bad[:5]}")
        return cast(dict[str, Box], track), conventions(extras)

    def format_truth(self, truth: TrackTruth) -> str:
        return json.dumps({"boxes": {k: list(b) for k, b in truth[0].items()}})

    def score(self, response: Response, truth: TrackTruth, ctx: Context) -> Outcome:
        gold, conv = truth
        for i, cand in enumerate(response.candidates()):
            obj = find_json(cand.text, want=dict)
            pred = boxes_by_frame(obj) if obj is not None else None
            if pred is None:
                continue
            miou, shared, union = union_mean_iou(pred, gold, conv, gated=ctx.mode == "reward")
            return Outcome(miou, i == 0 and bool(pred), {"source": cand.source, "shared": shared, "union": union})
        return Outcome(0.0, False, {"source": "none"})
