"""Per-sample official rules shared by several benchmarks: evr1-rewards' metric-mode scorers by default, and scorers
built from an official extractor (a letter compared with the ground truth) where the benchmark's own code differs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from evr1_eval.benchmarks.base import Outcome
from evr1_eval.benchmarks.extractors import MAX_SCAN, final_text, vsibench_first_token
from evr1_eval.types import Sample

if TYPE_CHECKING:
    from evr1_eval.benchmarks.base import Benchmark, Scorer


def _jsonable(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value if not isinstance(value, str) else value[:500]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth < 3 and isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in list(value.items())[:50]}
    if depth < 3 and isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value[:50]]
    return repr(value)[:200]


def rewards_outcome(sample: Sample, response: str) -> Outcome:
    """evr1-rewards in metric mode: the same scorer the trainer's reward uses, `.accuracy` as the metric.
    Only the options are passed: annotation fields never become scorer settings (tolerances, conventions) by accident."""
    from evr1_rewards import score

    result = score(
        response,
        sample.ground_truth,
        sample.problem_type,
        options=list(sample.options) or None,
        mode="metric",
    )
    details = dict(result.details or {})
    extracted = details.get("pred", details.get("extracted"))
    return Outcome(
        score=float(result.accuracy),
        extracted=None if extracted is None else str(extracted)[:500],
        details={"scorer": "evr1-rewards", "format": float(result.format), "rewards": _jsonable(details)},
    )


def letter_rule(extract: Callable[[Sample, str], str], name: str) -> Scorer:
    """A multiple-choice scorer from an official extractor: 1 when the extracted letter equals the ground truth.
    evr1-rewards' robust extraction is recorded beside it (`details["evr1"]`), so a summary can show how much of a
    score is the official parser's quirks. Non-MC rows of the same benchmark fall back to evr1-rewards."""

    def scorer(bench: Benchmark, sample: Sample, response: str) -> Outcome:
        if sample.problem_type != "multiple choice":
            return rewards_outcome(sample, response)
        letter = extract(sample, response)
        robust = rewards_outcome(sample, response)
        return Outcome(
            score=float(bool(letter) and letter == sample.ground_truth),
            extracted=letter,
            details={
                "scorer": name,
                "answered": bool(letter),
                "evr1": robust.score,
                "evr1_extracted": robust.extracted,
            },
        )

    return scorer


def letters_of(sample: Sample, default: str = "ABCD") -> str:
    return str(sample.extras.get("option_letters") or default)


# -- VSI-Bench (vision-x-nyu/thinking-in-space lmms_eval/tasks/vsibench/utils.py; research §2.6) ------------------
VSI_THRESHOLDS = tuple(0.50 + 0.05 * i for i in range(10))


def vsi_mra(pred: float, target: float) -> float:
    """Official MRA: mean over 10 thresholds of 1[|p - t| / t <= 1 - θ] (`<=`, target as-is)."""
    rel = abs(pred - target) / target
    return sum(rel <= 1 - theta for theta in VSI_THRESHOLDS) / len(VSI_THRESHOLDS)


def vsibench_rule(bench: Benchmark, sample: Sample, response: str) -> Outcome:
    """MCA: first token equals the GT letter (case-insensitive); NA: first token as float, official MRA.
    A GT <= 0 (a ZeroDivisionError or all-pass in the official code) is scored by exact equality and flagged."""
    token = vsibench_first_token(response)
    if sample.problem_type == "multiple choice":
        ok = token.lower() == str(sample.ground_truth).lower()
        return Outcome(score=float(ok), extracted=token, details={"scorer": "vsibench-mca"})
    try:
        pred = float(token)
    except ValueError:
        return Outcome(score=0.0, extracted=token, details={"scorer": "vsibench-mra", "parsed": False})
    if not math.isfinite(pred):
        return Outcome(score=0.0, extracted=token, details={"scorer": "vsibench-mra", "parsed": False})
    target = float(sample.ground_truth)
    if target <= 0:
        return Outcome(
            score=float(pred == target), extracted=token, details={"scorer": "vsibench-mra", "gt_nonpositive": True}
        )
    return Outcome(score=vsi_mra(pred, target), extracted=token, details={"scorer": "vsibench-mra"})


# -- OVO-Bench (JoeLeelyf/OVO-Bench utils/OVOBenchScore.py; research §1.2) -----------------------------------------
def ovobench_rule(bench: Benchmark, sample: Sample, response: str) -> Outcome:
    """Backward/real-time: GT letter is a substring of the response; REC: all digits concatenated equal the count;
    SSR/CRR: response "Y"/"N", else case-sensitive "Yes"/"No" substring. Official quirks kept on purpose."""
    text = (response or "")[-MAX_SCAN:]
    gt = str(sample.ground_truth)
    if sample.problem_type == "REC":
        digits = "".join(re.findall(r"\d", text))
        return Outcome(score=float(digits == gt), extracted=digits, details={"scorer": "ovobench-rec"})
    if sample.problem_type in ("SSR", "CRR"):
        stripped = text.strip()
        if stripped in ("Y", "N"):
            pred = "Yes" if stripped == "Y" else "No"
            return Outcome(score=float(pred == gt), extracted=pred, details={"scorer": "ovobench-yn"})
        return Outcome(score=float(gt in text), extracted=gt if gt in text else None, details={"scorer": "ovobench-yn"})
    return Outcome(
        score=float(gt in text), extracted=gt if gt in text else None, details={"scorer": "ovobench-substring"}
    )


# -- STVG (research §3.4: true vIoU with union denominator) --------------------------------------------------------
def extract_json_object(response: str) -> dict[str, Any] | None:
    """The last balanced `{...}` in the answer part of a response that parses to a JSON object (bounded scan)."""
    text = final_text(response)
    ends = [i for i, ch in enumerate(text) if ch == "}"][-20:]
    for end in reversed(ends):
        depth = 0
        for start in range(end, max(-1, end - MAX_SCAN), -1):
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


def _span(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, list) or len(value) != 2:
        return None
    try:
        s, e = float(value[0]), float(value[1])
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(s) and math.isfinite(e)) or e < s:
        return None
    return s, e


def _box(value: Any) -> tuple[float, float, float, float] | None:
    if not isinstance(value, list) or len(value) != 4:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in value)
    except (TypeError, ValueError):
        return None
    return (x1, y1, x2, y2) if all(math.isfinite(v) for v in (x1, y1, x2, y2)) else None


def box_iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    area_a = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])
    area_b = max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = area_a + area_b - inter
    return inter / union if union > 1e-12 else 0.0


def span_iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 1e-12 else 0.0


def _second_key(key: Any) -> str | None:
    try:
        value = float(key)
    except (TypeError, ValueError):
        return None
    return f"{value:g}" if math.isfinite(value) else None


def stvg_rule(bench: Benchmark, sample: Sample, response: str) -> Outcome:
    """tIoU of the time spans and the paper's vIoU = Σ_{t ∈ Tp ∩ Tg} IoU(b̂_t, b_t) / |Tp ∪ Tg| over the per-second box
    keys ("9" = "9.0"). Score = vIoU, or tIoU when the GT has no boxes (vIoU undefined; such rows are flagged)."""
    gt = json.loads(sample.ground_truth)
    gt_span = (float(gt["time"][0]), float(gt["time"][1]))
    gt_boxes = {k: tuple(v) for k, v in ((_second_key(k), v) for k, v in gt["boxes"].items()) if k is not None}
    pred = extract_json_object(response)
    pred_span = _span(pred.get("time")) if pred else None
    raw_boxes = pred.get("boxes") if pred else None
    pred_boxes: dict[str, tuple[float, ...]] = {}
    if isinstance(raw_boxes, Mapping):
        for key, value in list(raw_boxes.items())[:10_000]:
            k, box = _second_key(key), _box(value)
            if k is not None and box is not None:
                pred_boxes[k] = box
    tiou = span_iou(pred_span, gt_span) if pred_span else 0.0
    details: dict[str, Any] = {"scorer": "stvg", "tiou": tiou, "parsed": pred is not None}
    if not gt_boxes:
        details["viou"] = None
        return Outcome(score=tiou, extracted=None if pred is None else json.dumps(pred)[:500], details=details)
    union = set(gt_boxes) | set(pred_boxes)
    viou = sum(box_iou(pred_boxes[k], gt_boxes[k]) for k in set(gt_boxes) & set(pred_boxes)) / len(union)
    details["viou"] = viou
    return Outcome(score=viou, extracted=None if pred is None else json.dumps(pred)[:500], details=details)
