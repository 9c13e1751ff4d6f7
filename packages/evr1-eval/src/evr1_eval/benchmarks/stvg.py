"""STVG (HC-STVG / VidSTG style spatio-temporal grounding; EasyVideoR1's 2,000-row file).

No official scorer for this file could be read (EasyVideoR1 cites it without code); the metrics follow the papers'
definitions: m_tIoU, m_vIoU, vIoU@0.3, vIoU@0.5 with the paper's vIoU (union denominator over per-second box keys) —
not TubeDETR's min-end quirk and not EasyVideoR1's 0.5·tIoU + 0.5·mean box IoU over shared keys. Rows whose ground
truth has no boxes (71 in EasyVideoR1's file) only count in m_tIoU. The answer is the last JSON object of the final
answer (last `<answer>`, else after the reasoning), as the JSON prompt asks. Span and box IoU and the second keys
are evr1-rewards' (`evr1_rewards.structured`, the maths of its grounding scorers).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.aggregation import Result, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.judging import final_text
from evr1_eval.api.registry import register
from evr1_eval.types import Outcome, Sample, ScoredSample
from evr1_rewards.structured import frame_key, iou_1d, iou_2d

_JSON_SCAN = 20_000  # characters scanned back from a closing brace (real answers are far shorter)


def extract_json_object(response: str) -> dict[str, Any] | None:
    """The last balanced `{...}` in the answer part of a response that parses to a JSON object (bounded scan)."""
    text = final_text(response)[-_JSON_SCAN:]
    ends = [i for i, ch in enumerate(text) if ch == "}"][-20:]
    for end in reversed(ends):
        depth = 0
        for start in range(end, max(-1, end - _JSON_SCAN), -1):
            ch = text[start]
            if ch == "}":
                depth += 1
            elif ch == "{":
                depth -= 1
                if depth == 0:
                    try:
                        obj = json.loads(text[start : end + 1])
                    except (json.JSONDecodeError, RecursionError):
                        break
                    if isinstance(obj, dict):
                        return obj
                    break
    return None


def _numbers(value: Any, n: int) -> list[float] | None:
    """A JSON list of `n` finite numbers as floats (a span, a box), else None."""
    if not isinstance(value, list) or len(value) != n:
        return None
    try:
        out = [float(v) for v in value]
    except (TypeError, ValueError):
        return None
    return out if all(math.isfinite(v) for v in out) else None


def rule(sample: Sample, response: str) -> Outcome:
    """tIoU of the time spans and the paper's vIoU = Σ_{t ∈ Tp ∩ Tg} IoU(b̂_t, b_t) / |Tp ∪ Tg| over the per-second box
    keys ("9" = "9.0"). Score = vIoU, or tIoU when the GT has no boxes (vIoU undefined; such rows are flagged)."""
    gt = json.loads(sample.ground_truth)
    gt_span = (float(gt["time"][0]), float(gt["time"][1]))
    gt_boxes = {k: tuple(v) for k, v in ((frame_key(k), v) for k, v in gt["boxes"].items()) if k is not None}
    pred = extract_json_object(response)
    span = _numbers(pred.get("time"), 2) if pred else None
    pred_span = (span[0], span[1]) if span and span[0] <= span[1] else None
    raw_boxes = pred.get("boxes") if pred else None
    pred_boxes: dict[str, tuple[float, float, float, float]] = {}
    if isinstance(raw_boxes, Mapping):
        for key, value in list(raw_boxes.items())[:10_000]:
            k, box = frame_key(key), _numbers(value, 4)
            if k is not None and box is not None:
                pred_boxes[k] = (box[0], box[1], box[2], box[3])
    tiou = iou_1d(pred_span, gt_span) if pred_span else 0.0
    details: dict[str, Any] = {"scorer": "stvg", "tiou": tiou, "parsed": pred is not None}
    if not gt_boxes:
        details["viou"] = None
        return Outcome(score=tiou, extracted=None if pred is None else json.dumps(pred)[:500], details=details)
    union = set(gt_boxes) | set(pred_boxes)
    viou = sum(iou_2d(pred_boxes[k], gt_boxes[k]) for k in set(gt_boxes) & set(pred_boxes)) / len(union)
    details["viou"] = viou
    return Outcome(score=viou, extracted=None if pred is None else json.dumps(pred)[:500], details=details)


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """m_tIoU, m_vIoU, vIoU@0.3/0.5 (strict `>`); rows whose GT has no boxes are outside the vIoU metrics."""
    tious = [float(r.details.get("tiou") or 0.0) for r in rows]
    vrows = [r for r in rows if r.error is not None or r.details.get("viou") is not None]
    vious = [float(r.details.get("viou") or 0.0) for r in vrows]
    metrics = {"m_viou": pct(vious), "m_tiou": pct(tious)}
    for t in (0.3, 0.5):
        metrics[f"viou@{t}"] = pct(float(v > t) for v in vious)
    notes = [] if len(vrows) == len(rows) else [f"{len(rows) - len(vrows)} rows have no GT boxes: tIoU only"]
    return "m_viou", metrics, notes


BENCHMARK = register(
    Benchmark(
        name="stvg",
        title="STVG",
        problem_types=("spatiotemporal_grounding",),
        scorer=rule,
        aggregator=aggregate,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
        notes=("no official scorer available: the papers' m_vIoU / m_tIoU definitions are used",),
    )
)
