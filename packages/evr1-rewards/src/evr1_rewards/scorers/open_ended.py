"""Open-ended answers: ROUGE-L F1 with a CJK-aware tokenizer; several references → the best.

Unlike the ROUGE-1/2/L average, a one-word answer can reach 1.0. Answers longer than MAX_TOKENS are scored on their
last MAX_TOKENS tokens against their full length (a lower bound of the exact F1; such answers score ~0 anyway).
For benchmarks whose official protocol is LLM-judged, `RewardRouter(judge=...).ascore` asks `evr1_rewards.judge`.
"""

from __future__ import annotations

from collections.abc import Mapping

from evr1_rewards.extract import Response, clean_payload
from evr1_rewards.registry import register
from evr1_rewards.text import rouge_l_f1, tokenize
from evr1_rewards.truth import references
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import OPEN_ENDED

MAX_TOKENS = 4096
MAX_CHARS = 32_768


@register(OPEN_ENDED)
class OpenEnded:
    """ROUGE-L F1 (CJK-aware), best over references."""

    name = "open_ended"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> list[list[str]]:
        refs = [tokenize(r) for r in references(ground_truth)]
        return [r for r in refs if r] or [list(references(ground_truth)[0])]

    def score(self, response: Response, truth: list[list[str]], ctx: Context) -> Outcome:
        cand = response.extraction()
        text = clean_payload(cand.text)
        window = text[-MAX_CHARS:]
        toks = tokenize(window)
        # Beyond MAX_CHARS the token count is extrapolated: the hypothesis length only enters the precision.
        n = max(len(toks), round(len(toks) * len(text) / max(1, len(window))))
        toks = toks[-MAX_TOKENS:]
        if not toks:
            return Outcome(0.0, False, {"source": cand.source})
        return Outcome(max(rouge_l_f1(toks, ref, hyp_len=n) for ref in truth), True, {"source": cand.source})
