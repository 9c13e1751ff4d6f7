"""Temporal grounding: IoU of [start, end] spans, from `{"time": [s, e]}` JSON or spans in prose.

A reversed predicted span is a format error (0) in reward mode and swapped in metric mode (lmms-eval behaviour).
Reward mode: a span less than half on the gold earns 0 (`structured.MIN_PRECISION`: no credit for the whole video).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.registry import register
from evr1_rewards.structured import as_span, find_json, iou_1d, reward_iou_1d, span_from_prose
from evr1_rewards.truth import truth_json
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import TEMPORAL_GROUNDING

TIME_KEYS = ("time", "timestamps", "timestamp", "span", "segment")

Span = tuple[float, float]


def span_of(v: object) -> Span | None:
    if isinstance(v, (dict, Mapping)):  # (dict first: the common case skips the ABC check)
        for k in TIME_KEYS:
            if k in v:
                return as_span(v[k])
        return None
    if isinstance(v, list) and len(v) == 1 and isinstance(v[0], list):
        return as_span(v[0])
    return as_span(v)


def answer_span(text: str) -> Span | None:
    """A span from a JSON object (`{"time": [s, e]}`), a JSON list (`[s, e]`) or prose."""
    for want in (dict, list):
        found = find_json(text, want=want)
        if found is not None and (span := span_of(found)) is not None:
            return span
    return span_from_prose(text)


def order_span(span: Span, mode: str) -> Span | None:
    """Reward mode: a reversed span is malformed (None). Metric mode: swap it, as lmms-eval does."""
    if span[0] <= span[1]:
        return span
    return (span[1], span[0]) if mode == "metric" else None


@register(TEMPORAL_GROUNDING, answer_format='JSON {"time": [start_seconds, end_seconds]}')
class TemporalGrounding:
    """tIoU of the predicted and ground-truth spans; reversed spans are a format error in reward mode."""

    name = "temporal_grounding"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> Span:
        span = span_of(truth_json(ground_truth))
        if span is None:
            raise GroundTruthError(
                f'temporal ground truth must look like {{"time": [start, end]}}, got {str(ground_truth)[:120]!r}'
            )
        if span[0] > span[1] or span[0] < 0:
            raise GroundTruthError(f"temporal ground truth span {list(span)} is reversed or negative")
        return span

    def format_truth(self, truth: Span) -> str:
        return json.dumps({"time": [truth[0], truth[1]]})

    def score(self, response: Response, truth: Span, ctx: Context) -> Outcome:
        for i, cand in enumerate(response.candidates()):
            span = answer_span(cand.text)
            if span is None:
                continue
            ordered = order_span(span, ctx.mode)
            if ordered is None:
                return Outcome(0.0, False, {"source": cand.source, "reversed": True})
            value = (reward_iou_1d if ctx.mode == "reward" else iou_1d)(ordered, truth)
            return Outcome(value, i == 0, {"source": cand.source, "pred": list(ordered)})
        return Outcome(0.0, False, {"source": "none"})
