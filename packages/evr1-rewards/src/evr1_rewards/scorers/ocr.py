"""OCR: 1 − normalised edit distance (ANLS-style, case/space-normalised); several references → the best.

extras["anls_threshold"] (default 0: dense reward) zeroes similarities below it (0.5 reproduces ANLS).
Very long answers are compared on their last `8·len(ref) + 256` characters with the cut length counted as edits,
a lower bound of the exact score that keeps the cost linear.
"""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.extract import Response, clean_payload
from evr1_rewards.registry import register
from evr1_rewards.text import levenshtein, normalize_text
from evr1_rewards.truth import extra_float, references
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import OCR as OCR_TYPE


def similarity(pred: str, ref: str) -> float:
    """1 − lev(pred, ref) / max(len) on normalised text."""
    limit = 8 * len(ref) + 256
    cut = max(0, len(pred) - limit)
    dist = levenshtein(pred[cut:], ref) + cut
    longest = max(len(pred), len(ref))
    return max(0.0, 1.0 - min(dist, longest) / longest) if longest else 1.0


@register(OCR_TYPE, answer_format="the recognised text")
class OCR:
    """1 − normalised edit distance, best over references."""

    name = "ocr"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> tuple[list[str], float]:
        return references(ground_truth), extra_float(extras, "anls_threshold", 0.0)

    def score(self, response: Response, truth: tuple[list[str], float], ctx: Context) -> Outcome:
        refs, threshold = truth
        cand = response.extraction()
        raw = clean_payload(cand.text)
        # Normalise only what can matter: beyond 8·len(ref) + 256 characters the answer is scored as a lower bound.
        keep = 16 * max(len(r) for r in refs) + 512
        cut = max(0, len(raw) - keep)
        pred = normalize_text(raw[cut:])
        if cut:
            pred = "\x00" * cut + pred  # placeholders: counted as edits, never matched
        if not pred:
            return Outcome(0.0, False, {"source": cand.source})
        best = max(similarity(pred, r) for r in refs)
        return Outcome(best if best >= threshold else 0.0, True, {"source": cand.source})
