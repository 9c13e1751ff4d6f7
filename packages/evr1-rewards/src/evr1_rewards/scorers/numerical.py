"""Numerical answers: equal within a relative/absolute tolerance (`3` equals `3.0`, `1,000` equals `1000`).

An answer that only offers several numbers ("3 or 4", "between 3 and 5", "3, 4, 5") names none and scores 0; a range
written with a dash ("12-20") still reads as its last number, as before."""

from __future__ import annotations

import re
from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response, clean_payload, rejected
from evr1_rewards.numbers import Number, close, parse_number
from evr1_rewards.registry import register
from evr1_rewards.scorers._common import first_parsed
from evr1_rewards.truth import extra_float, truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import NUMERICAL

REL_TOL = 1e-4
ABS_TOL = 1e-9
MIN_ROUNDING_DECIMALS = 2
"""A ground truth written with >= 2 decimals also accepts answers that round to it (1/3 vs 0.33)."""
_DECIMAL = re.compile(r"[-+−]?[\d,]*\.(\d{1,12})")


def parse_truth_number(ground_truth: object) -> Number:
    text = clean_payload(truth_text(ground_truth))
    n = parse_number(text)
    if n is None:
        raise GroundTruthError(f"numerical ground truth {text[:80]!r} does not contain a number")
    return n


_N = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?"
_HEDGE = re.compile(
    r"(?i:(?:either|between|maybe|perhaps|possibly|about|around|approximately|roughly)\s{1,3})?(" + _N + r")"
    r"((?:\s{0,3}(?:,\s|;)\s{0,3}(?:or\s{1,3})?" + _N + r"|\s{1,3}(?i:or|and|nor)\s{1,3}(?i:maybe\s{1,3}|perhaps\s{1,3})?"
    + _N + r"){1,9})[\s.?!]{0,3}"
)  # fmt: skip
"""An answer that only offers several numbers ("3 or 4", "between 3 and 5", "3, 4, 5"): it names no answer."""


def is_hedge(text: str) -> bool:
    """The answer only offers several numbers ("3 or 4", "between 3 and 5", "3, 4, 5"), choosing none."""
    if " " not in text:  # every hedge has a space, and unwrapping adds none: one number (the common case) is done
        return False
    cleaned = clean_payload(text).strip()
    if len(cleaned) > 96 or " " not in cleaned or (m := _HEDGE.fullmatch(cleaned)) is None:
        return False
    return len({parse_number(x) for x in re.findall(_N, m.group())}) > 1


def parse_answer_number(text: str) -> Number | None:
    """The number an answer names; None when there is none or it hedges (see `is_hedge`)."""
    return None if is_hedge(text) else parse_payload_number(text)


def parse_payload_number(text: str) -> Number | None:
    """`parse_answer_number` without the hedge test, for `first_parsed(…, hedge=is_hedge)`, which makes it once."""
    return parse_number(clean_payload(text))


_LAST_NUMBER = re.compile(r"[-+−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)\s{0,2}%?")


def rejects_number(text: str, value: object) -> bool:
    """The answer negates the last number it writes: "not 42", "The answer is not 42" (0, not 42)."""
    return rejected(text, _LAST_NUMBER, last_only=True)


def _decimals(ground_truth: object) -> int:
    """Decimal places written in the ground truth ("0.33" -> 2), used to accept answers rounded to that precision."""
    m = _DECIMAL.fullmatch(clean_payload(truth_text(ground_truth)).strip().rstrip("%").strip())
    return len(m.group(1)) if m else 0


def format_number(n: Number, decimals: int = 0) -> str:
    """Canonical text of a number that parses back to it: '1250', '0.33' (decimals kept), '12.5', '50%'."""
    v = n.value
    text = f"{v:.{decimals}f}" if decimals > 0 else str(int(v)) if v.is_integer() and abs(v) < 1e18 else repr(v)
    return text + "%" if n.percent else text


NumericalTruth = tuple[Number, float, float, int]
"""(number, rel_tol, abs_tol, decimals written in the ground truth)."""


@register(NUMERICAL, answer_format="a single number")
class Numerical:
    """Number equality within tolerance (extras: rel_tol=1e-4, abs_tol=1e-9); percent, fractions, words understood."""

    name = "numerical"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> NumericalTruth:
        rel = extra_float(extras, "rel_tol", REL_TOL)
        abs_ = extra_float(extras, "abs_tol", ABS_TOL)
        return parse_truth_number(ground_truth), rel, abs_, _decimals(ground_truth)

    def format_truth(self, truth: NumericalTruth) -> str:
        return format_number(truth[0], truth[3])

    def score(self, response: Response, truth: NumericalTruth, ctx: Context) -> Outcome:
        gold, rel, abs_, decimals = truth
        pred, source, parsed = first_parsed(response, parse_payload_number, is_hedge, rejects_number)
        if pred is None:
            return Outcome(0.0, False, {"source": source})
        ok = close(pred, gold, rel_tol=rel, abs_tol=abs_)
        if not ok and decimals >= MIN_ROUNDING_DECIMALS:
            # The ground truth is written to `decimals` places: an answer that rounds to it is correct ("1/3" ~ "0.33").
            ok = round(pred.value, decimals) == round(gold.value, decimals)
        return Outcome(1.0 if ok else 0.0, parsed, {"pred": pred.value, "source": source})
