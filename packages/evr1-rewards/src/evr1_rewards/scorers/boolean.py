"""Boolean: yes/no/true/false as whole words in the extracted answer; the last declaration wins.

Whole words only: "I KNOW" is not "NO", "notably" is not "no". Chinese 是/否/对/错 count when they are the whole answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response, ascii_lower, clean_payload, tail
from evr1_rewards.registry import register
from evr1_rewards.scorers._common import first_parsed
from evr1_rewards.truth import truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import BOOLEAN

_WORDS = re.compile(r"(?<![a-z0-9_])(yes|no|true|false)(?![a-z0-9_])")
_MAP = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}
_ZH = {
    "是": "yes",
    "是的": "yes",
    "对": "yes",
    "正确": "yes",
    "否": "no",
    "不是": "no",
    "错": "no",
    "错误": "no",
    "不": "no",
}


def parse_yes_no(text: str) -> str | None:
    """'yes' / 'no' from an answer, or None."""
    s = clean_payload(tail(text, 4096)).strip().strip("。.!！*")
    if s in _ZH:
        return _ZH[s]
    last = None
    for m in _WORDS.finditer(ascii_lower(s)):
        last = m.group(1)
    return _MAP[last] if last else None


@register(BOOLEAN)
class Boolean:
    """Yes/no match on whole words (last one wins)."""

    name = "boolean"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> str:
        text = truth_text(ground_truth)
        stripped = text.strip().lower()
        if stripped in ("1", "0"):
            return "yes" if stripped == "1" else "no"
        gold = parse_yes_no(text)
        if gold is None:
            raise GroundTruthError(f"boolean ground truth {text[:80]!r} is not yes/no/true/false")
        return gold

    def format_truth(self, truth: str) -> str:
        return truth

    def score(self, response: Response, truth: str, ctx: Context) -> Outcome:
        pred, source, parsed = first_parsed(response, parse_yes_no)
        return Outcome(1.0 if pred == truth else 0.0, parsed, {"pred": pred or "", "source": source})
