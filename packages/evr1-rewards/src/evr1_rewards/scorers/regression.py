"""Regression: Mean Relative Accuracy (VSI-Bench), exact thresholds, float64.

MRA = mean over t in {0.50, 0.55, …, 0.95} of 1[|p − g| / |g| < 1 − t]. The thresholds are integers in percent
(1 − t = (50 − 5k) / 100), so the test is `100·|p − g| < (50 − 5k)·|g|`: no accumulated float drift, no epsilon.
g = 0 → exact match. extras["official"] = True (metric mode) reproduces the benchmark's `<=` and rejects g <= 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.numbers import Number
from evr1_rewards.registry import register
from evr1_rewards.scorers._common import first_parsed
from evr1_rewards.scorers.numerical import (
    format_number,
    is_hedge,
    parse_payload_number,
    parse_truth_number,
    rejects_number,
)
from evr1_rewards.truth import extra_bool
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import REGRESSION

MARGINS_PERCENT = tuple(50 - 5 * k for k in range(10))  # 1 - t for t = 0.50 … 0.95


def mean_relative_accuracy(pred: float, gold: float, *, official: bool = False) -> float:
    """MRA in [0, 1]; `official=True` uses `<=` like the VSI-Bench code (which never sees g <= 0)."""
    err = abs(pred - gold) * 100.0
    g = abs(gold)
    if g == 0.0:
        return 1.0 if pred == 0.0 else 0.0
    # The margins decrease, so the thresholds met are a prefix: count until the first one missed.
    hits = 0
    for m in MARGINS_PERCENT:
        if not (err <= m * g if official else err < m * g):
            break
        hits += 1
    return hits / len(MARGINS_PERCENT)


@register(REGRESSION, answer_format="a single number")
class Regression:
    """Mean relative accuracy over 10 thresholds (VSI-Bench); `official` flag for the benchmark's `<=`."""

    name = "regression"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> tuple[Number, bool]:
        gold = parse_truth_number(ground_truth)
        official = extra_bool(extras, "official")
        if official and gold.value <= 0:
            raise GroundTruthError(f"official MRA needs a positive ground truth, got {gold.value}")
        return gold, official

    def format_truth(self, truth: tuple[Number, bool]) -> str:
        return format_number(truth[0])

    def score(self, response: Response, truth: tuple[Number, bool], ctx: Context) -> Outcome:
        gold, official = truth
        pred, source, parsed = first_parsed(response, parse_payload_number, is_hedge, rejects_number)
        if pred is None:
            return Outcome(0.0, False, {"source": source})
        acc = mean_relative_accuracy(pred.value, gold.value, official=official and ctx.mode == "metric")
        return Outcome(acc, parsed, {"pred": pred.value, "source": source})
